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
larger calls may pay: only ``memory_gb`` bounds them). Client states (n x d tensors, also the gradients of all n clients) and
the data set come on top. ``scripts/bench_memory.py`` checks the estimate against measured
peak memory (ACT_COPIES = 3 bounds what MobileNetV3-Small and the MLP were measured to use).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

ACT_COPIES = 3
# Largest vmap call oracle.chunk=auto plans, whatever memory_gb allows. Measured (FedCanon,
# n = 1000, one thread, scripts/bench_engine.py's machine): the MLP (2.2 MB per client) ran at
# 813, 798 and 836 client-steps/s with 64, 128 and 1000 clients per call; the linear model
# (0.2 MB per client) at 6.2k, 7.0k and 7.6k with 64, 128 and 1000.
CHUNK_BYTES = 256 * 2**20


def activation_size(module: nn.Module, input_shape: tuple[int, ...], dtype: torch.dtype,
                    device: torch.device) -> int:
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


def footprint(module: nn.Module, d: int, input_shape: tuple[int, ...], dtype: torch.dtype,
              device: torch.device) -> Footprint:
    item = torch.tensor([], dtype=dtype).element_size()
    act = activation_size(module, input_shape, dtype, device)
    return Footprint(per_client=item * d,
                     per_sample=item * (ACT_COPIES * act + math.prod(input_shape)),
                     device_type=torch.device(device).type)


def plan(fp: Footprint, n: int, samples: int, chunk, eval_batch, memory_gb: float) -> tuple[int, int]:
    """(clients per vmap call, samples per evaluation call) for ``oracle.chunk`` and
    ``oracle.eval_batch``: ``auto`` = the largest that fits ``memory_gb`` (at least 1; chunk at
    most n and, on the CPU, within CHUNK_BYTES), a number is kept, ``chunk=None`` = all n clients at once."""
    budget = memory_gb * 2**30
    if chunk == "auto":
        cap = min(budget, CHUNK_BYTES) if fp.device_type == "cpu" else budget
        chunk = max(1, min(n, int(cap // fp.call_bytes(1, samples))))
    if eval_batch == "auto":
        eval_batch = max(1, int((budget - fp.per_client) // fp.per_sample))
    return chunk or n, eval_batch
