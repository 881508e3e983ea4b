"""Memory plan of the gradient engine (``oracle.chunk: auto``, ``oracle.eval_batch: auto``).

One vmap call over m clients with b samples each holds, per client, its gradient (d numbers)
and, per sample, the input and every layer's output kept for the backward pass plus the
gradients flowing back (about ``ACT_COPIES`` times the activations A of one sample; A counted
with forward hooks on the leaf modules):

    bytes(m, b) = itemsize * m * (d + b (ACT_COPIES A + input))

An exact evaluation pass over e samples at one model is the same with m = 1, b = e. The plan
takes the largest chunk m <= n and evaluation batch e whose bytes stay within ``memory_gb``
(at least 1 of each); on the CPU the chunk also within :data:`CHUNK_BYTES`, beyond which a
vmap call gets no faster there but the working set grows with n (on GPUs, not measured yet,
larger calls may pay: only ``memory_gb`` bounds them). Client states (n x d tensors, also the
gradients of all n clients) and
the data set come on top. ``scripts/bench_memory.py`` checks the estimate against measured
peak memory (ACT_COPIES = 3 bounds what MobileNetV3-Small and the MLP were measured to use).

Also here: the check that a run's tensors can fit the device (:func:`check_sizes`), and, on the
CPU, glibc keeping freed memory for reuse (:func:`keep_freed_memory`).
"""

from __future__ import annotations

import ctypes
import functools
import math
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import torch
from torch import nn

from ..common import cgroup

ACT_COPIES = 3
# Largest vmap call oracle.chunk=auto plans on the CPU, whatever memory_gb allows: larger calls
# ran no faster there (docs/performance.md, "What the engine's code rests on").
CHUNK_BYTES = 256 * 2**20


def activation_size(
    module: nn.Module, input_shape: tuple[int, ...], dtype: torch.dtype, device: torch.device
) -> int:
    """Numbers output by all leaf modules for one sample of ``input_shape``."""
    sizes: list[int] = []
    leaves = [m for m in module.modules() if not any(True for _ in m.children())]
    hooks = [m.register_forward_hook(lambda _m, _i, out: sizes.append(out.numel())) for m in leaves]
    try:
        with torch.no_grad():
            module(torch.zeros(1, *input_shape, dtype=dtype, device=device))
    finally:
        for h in hooks:
            h.remove()
    return sum(sizes)


@dataclass(frozen=True)
class Footprint:
    """Bytes of one engine call: ``per_client`` for each client, ``per_sample`` for each sample."""

    per_client: int
    per_sample: int
    device_type: str = "cpu"  # CHUNK_BYTES applies on the CPU (measured there only)

    def call_bytes(self, clients: int, samples: int) -> int:
        """bytes(m, b) of the module docstring, for m clients with b samples each."""
        return clients * (self.per_client + samples * self.per_sample)


def footprint(
    module: nn.Module,
    d: int,
    input_shape: tuple[int, ...],
    dtype: torch.dtype,
    device: torch.device,
) -> Footprint:
    item = torch.tensor([], dtype=dtype).element_size()
    act = activation_size(module, input_shape, dtype, device)
    return Footprint(
        per_client=item * d,
        per_sample=item * (ACT_COPIES * act + math.prod(input_shape)),
        device_type=torch.device(device).type,
    )


def plan(
    fp: Footprint,
    n: int,
    samples: int,
    chunk: int | Literal["auto"] | None,
    eval_batch: int | Literal["auto"],
    memory_gb: float,
) -> tuple[int, int]:
    """(clients per vmap call, samples per evaluation call) for ``oracle.chunk`` and
    ``oracle.eval_batch``: ``auto`` = the largest that fits ``memory_gb`` (at least 1; chunk at
    most n and, on the CPU, within CHUNK_BYTES), a number is kept, ``chunk=None`` = all n clients
    at once."""
    budget = memory_gb * 2**30
    if chunk == "auto":
        cap = min(budget, CHUNK_BYTES) if fp.device_type == "cpu" else budget
        chunk = max(1, min(n, int(cap // fp.call_bytes(1, samples))))
    if eval_batch == "auto":
        return chunk or n, max(1, int((budget - fp.per_client) // fp.per_sample))
    return chunk or n, eval_batch


def available_bytes(device: torch.device) -> tuple[int, str]:
    """The memory of ``device`` and, where it is less than the hardware's, what sets it: the
    GPU's, or the machine's physical memory or its cgroup's limit (:mod:`..common.cgroup`)."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).total_memory, ""
    return cgroup.available()


def least_parameters(name: str, params: dict[str, Any]) -> int:
    """A lower bound on the parameters of model ``name`` that needs no data: the model built on
    the ``meta`` device (nothing allocated) for a one-feature input, or 0 for a model that needs
    the data's image shape (its size is then fixed by the data set, checked once loaded).
    Counted once per model builder and parameters (a sweep's jobs share them)."""
    from ..common.errors import UserError
    from . import models

    try:
        builder = models.lookup(name, params.get("_target_"))
    except UserError:
        return 0
    key = tuple(sorted(params.items()))
    try:
        hash(key)
    except TypeError:  # a parameter that is not hashable (a list): counted each time
        return _count(name, builder, key)
    return _counted(name, builder, key)


def _count(name: str, builder: object, params: tuple[tuple[str, Any], ...]) -> int:
    """:func:`least_parameters` of model ``name`` (``builder``: its entry, a key of the
    cache)."""
    from ..common.errors import UserError
    from . import models

    try:
        with torch.device("meta"):
            return sum(p.numel() for p in models.build(name, (1,), 2, **dict(params)).parameters())
    except (UserError, RuntimeError, ValueError):
        return 0


_counted = functools.lru_cache(maxsize=256)(_count)


class RunSizes(Protocol):
    """What :func:`check_sizes` reads of a run's config (``config.schema.RunConfig``)."""

    @property
    def n(self) -> int: ...
    @property
    def B(self) -> object: ...
    @property
    def batch(self) -> int | None: ...
    @property
    def torch_dtype(self) -> torch.dtype: ...
    @property
    def torch_device(self) -> torch.device: ...


def check_sizes(s: RunSizes, model: str, model_params: dict[str, Any], runs: int = 1) -> None:
    """Refuse (:class:`UserError`) a config whose tensors cannot fit the device before anything
    is allocated: each of the ``runs`` x n clients holds at least one model-sized state (d
    numbers, :func:`least_parameters`), and each local step draws n x B mini-batch positions
    (a float32 draw and two int64 index tables)."""
    from ..common.errors import require

    item = torch.tensor([], dtype=s.torch_dtype).element_size()
    d = least_parameters(model, model_params)
    need = runs * s.n * (item * d + 20 * (s.batch or 0))
    have, what = available_bytes(s.torch_device)
    require(
        need <= have,
        f"the run needs at least {need / 2**30:,.0f} GiB (n={s.n} clients x "
        f"(d >= {d:,} parameters of model {model} + B={s.B} mini-batch draws)"
        f"{f' x {runs} runs' if runs > 1 else ''}), more than the "
        f"{have / 2**30:,.0f} GiB of {s.torch_device}{f' ({what})' if what else ''}; reduce n, B "
        f"or the model",
    )


@functools.cache
def keep_freed_memory() -> None:
    """Have glibc serve every allocation from its heap and keep freed memory there, never
    trimmed, instead of mapping large blocks fresh and unmapping them on free: a round allocates
    and frees several (n, d) tensors per local step, and re-faulting their pages each time slows
    the step (docs/performance.md, "Freed memory"). The process keeps its peak memory until it
    exits. No effect where the C library is not glibc."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return
    M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4
    libc.mallopt(M_MMAP_MAX, 0)
    libc.mallopt(M_TRIM_THRESHOLD, -1)
