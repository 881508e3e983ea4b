"""The practical roofline: a step's matrix products (and convolutions) recorded and replayed
alone, FLOPs counted, and the device's peak FLOP/s."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch._ops import OpOverload
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map
from torch.utils.flop_counter import FlopCounterMode, flop_registry

_Call = tuple[OpOverload, tuple[object, ...], dict[str, object]]


class _RecordProducts(TorchDispatchMode):  # type: ignore[no-untyped-call]  # torch: untyped
    """Records every FLOP-counted aten call (matrix products, convolutions) with its arguments'
    shapes, to replay them alone."""

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
            spec = lambda a: (a.shape, a.dtype, a.device) if isinstance(a, torch.Tensor) else a  # noqa: E731
            self.calls.append((func, tree_map(spec, args), tree_map(spec, kwargs)))
        return func(*args, **kwargs)


class Roofline:
    """The products of one client step (forward + backward), replayed ``times`` times on random
    operands."""

    def __init__(self, step_fn: Callable[[], object], times: int = 1):
        self.times = times
        with _RecordProducts() as rec:
            step_fn()
        make = lambda a: torch.randn(a[0], dtype=a[1], device=a[2]) if _is_spec(a) else a  # noqa: E731
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


def _is_spec(a: object) -> bool:
    return isinstance(a, tuple) and len(a) == 3 and isinstance(a[0], torch.Size)


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
