"""The practical roofline: a step's matrix products (and convolutions) recorded and replayed
alone, FLOPs counted, and the device's peak FLOP/s."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import torch
from torch._ops import OpOverload
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map
from torch.utils.flop_counter import FlopCounterMode, flop_registry

_Call = tuple[OpOverload, tuple[object, ...], dict[str, object]]


class _RecordProducts(TorchDispatchMode):  # type: ignore[no-untyped-call]  # torch: untyped
    """Records every FLOP-counted aten call (matrix products, convolutions) with its arguments'
    shapes and strides, to replay them alone."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # torch: untyped
        self.calls: list[_Call] = []

    def __torch_dispatch__(
        self,
        func: OpOverload,
        types: object,
        args: tuple[object, ...] = (),
        kwargs: dict[str, object] | None = None,
    ) -> object:
        kwargs = kwargs or {}
        if func.overloadpacket in flop_registry:
            spec = lambda a: (  # noqa: E731
                (a.shape, a.dtype, a.device, a.stride()) if isinstance(a, torch.Tensor) else a
            )
            self.calls.append((func, tree_map(spec, args), tree_map(spec, kwargs)))
        return func(*args, **kwargs)


class Roofline:
    """The products of one client step (forward + backward), replayed ``times`` times on random
    operands: contiguous ones (``layout="contiguous"``), or ones of the strides the step passed
    (``layout="step"``: e.g. a weight transposed as a view, as ``addmm(b, h, W.t())`` takes it).
    Strided tensors go through the aten call as recorded, so a kernel that runs at another pace
    on another layout is timed on the step's own."""

    def __init__(self, step_fn: Callable[[], object], times: int = 1, layout: str = "contiguous"):
        if layout not in ("contiguous", "step"):
            raise ValueError(f"layout must be 'contiguous' or 'step', got {layout!r}")
        self.times = times
        with _RecordProducts() as rec:
            step_fn()
        make = _contiguous if layout == "contiguous" else _strided
        self.calls = [
            (f, tree_map(make, a, is_leaf=_is_spec), tree_map(make, k, is_leaf=_is_spec))
            for f, a, k in rec.calls
        ]
        counter = FlopCounterMode(display=False)
        with counter:
            self.replay()
        self.flops = counter.get_total_flops()

    def replay(self) -> None:
        for _ in range(self.times):
            for f, a, k in self.calls:
                f(*a, **k)


def _contiguous(a: object) -> object:
    """A random contiguous tensor of the recorded spec's shape (anything else as it is)."""
    return torch.randn(a[0], dtype=a[1], device=a[2]) if _is_spec(a) else a  # type: ignore[index]


def _strided(a: object) -> object:
    """A random tensor of the recorded spec's shape and strides (anything else as it is)."""
    if not _is_spec(a):
        return a
    spec = cast(tuple[torch.Size, torch.dtype, torch.device, tuple[int, ...]], a)
    return torch.empty_strided(spec[0], spec[3], dtype=spec[1], device=spec[2]).normal_()


def _is_spec(a: object) -> bool:
    return isinstance(a, tuple) and len(a) == 4 and isinstance(a[0], torch.Size)


def count_flops(fn: Callable[[], object]) -> int:
    counter = FlopCounterMode(display=False)
    with counter:
        fn()
    return counter.get_total_flops()


# Dense FP32 and TF32 peaks in FLOP/s by GPU name (NVIDIA data sheets; TF32 without sparsity),
# first match wins: the fraction of peak is reported where the device is one of these.
PEAKS = (
    ("H100 PCIe", {"fp32": 51e12, "tf32": 378e12}),
    ("H100", {"fp32": 67e12, "tf32": 494.5e12}),
    ("H200", {"fp32": 67e12, "tf32": 494.5e12}),
    ("A100", {"fp32": 19.5e12, "tf32": 156e12}),
)


def peak_flops(device: torch.device, given: float | None = None) -> float | None:
    """The device's float32 peak in FLOP/s (``given`` if set): FP32, or TF32 where
    ``matmul_precision`` lets products use it (``high``, ``medium``); None where unknown
    (CPUs, other GPUs)."""
    if given:
        return given
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    kind = "fp32" if torch.get_float32_matmul_precision() == "highest" else "tf32"
    return next((p[kind] for key, p in PEAKS if key in name), None)
