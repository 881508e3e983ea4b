"""Uplink compressors: each maps client messages (rows of a tensor) to what the server
receives, and reports the bytes that cost (a dense float 4 bytes; a kept sparse element 8:
value + index, as in FedCEF Sec. V-A; a quantized row: see :class:`QSGD`).

New compressors subclass :class:`Compressor`, implement ``__call__`` and register with
:func:`register`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch

from ..common import ranges
from ..common.draws import to_device
from ..common.ranges import param
from ..common.registry import Registry, class_contract

DENSE_BYTES = 4
SPARSE_BYTES = 8


@dataclass(frozen=True)
class Compressor:
    name: ClassVar[str]

    @property
    def is_identity(self) -> bool:
        return False

    def validate(self) -> None:
        """Each parameter in its declared range (:mod:`fedprox_cli.common.ranges`)."""
        ranges.check(self, "compressor")

    def __call__(self, V: torch.Tensor, seed: int = 0) -> tuple[torch.Tensor, int]:
        """(compressed rows of V, total bytes of all rows); ``seed`` keys any randomness."""
        raise NotImplementedError


register, names, lookup, build = (
    _REGISTRY := Registry[type[Compressor]](
        "compressor",
        "compressors",
        class_contract(Compressor, ("__call__",)),
        lambda comp: comp.validate(),
    )
).calls()


@register
@dataclass(frozen=True)
class Identity(Compressor):
    """No compression: every entry sent as a dense float."""

    name: ClassVar[str] = "identity"

    @property
    def is_identity(self) -> bool:
        return True

    def __call__(self, V: torch.Tensor, seed: int = 0) -> tuple[torch.Tensor, int]:
        return V, DENSE_BYTES * V.numel()


def _kept(d: int, ratio: float) -> int:
    """k = ceil(ratio d) coordinates kept per row (at least 1)."""
    return max(1, min(d, math.ceil(ratio * d)))


@dataclass(frozen=True)
class _Sparsifier(Compressor):
    ratio: float = param(0.1, gt=0, le=1)  # share r of coordinates kept per row


@register
@dataclass(frozen=True)
class TopK(_Sparsifier):
    """Top-k: keep the k = ceil(r d) largest-magnitude entries of each row (a q^2 = 1 - k/d
    contractive compressor, FedCEF Definition 1). Each kept entry costs 8 bytes."""

    name: ClassVar[str] = "topk"

    def __call__(self, V: torch.Tensor, seed: int = 0) -> tuple[torch.Tensor, int]:
        k = _kept(V.shape[-1], self.ratio)
        idx = V.abs().topk(k, dim=-1).indices
        return torch.zeros_like(V).scatter_(-1, idx, V.gather(-1, idx)), SPARSE_BYTES * k * V.shape[
            0
        ]


@register
@dataclass(frozen=True)
class RandK(_Sparsifier):
    """Rand-k: keep k = ceil(r d) uniformly random entries of each row (independent per row,
    drawn from ``seed``). ``scaled = false`` (default) keeps them as they are: contractive with
    E||C(v) - v||^2 = (1 - k/d)||v||^2, the class FedCEF's Definition 1 assumes;
    ``scaled = true`` multiplies by d/k: unbiased, E||C(v) - v||^2 = (d/k - 1)||v||^2, not
    contractive. 8 bytes per kept entry (the indices are counted, though a shared seed could
    replace them)."""

    name: ClassVar[str] = "randk"
    scaled: bool = False  # multiply the kept entries by d/k: unbiased, not contractive

    def __call__(self, V: torch.Tensor, seed: int = 0) -> tuple[torch.Tensor, int]:
        d = V.shape[-1]
        k = _kept(d, self.ratio)
        gen = torch.Generator().manual_seed(seed)  # on the CPU: the same draws on every device
        idx = to_device(
            torch.rand(V.shape, generator=gen, dtype=torch.float32).topk(k, dim=-1).indices,
            V.device,
        )
        vals = V.gather(-1, idx) * (d / k if self.scaled else 1.0)
        return torch.zeros_like(V).scatter_(-1, idx, vals), SPARSE_BYTES * k * V.shape[0]


@register
@dataclass(frozen=True)
class QSGD(Compressor):
    """QSGD (Alistarh et al. 2017) with s = ``levels``: each row v is sent as ||v||_2 and, per
    entry, sign(v_j) and a level l_j in {0..s} drawn by unbiased stochastic rounding of
    s |v_j| / ||v||_2; the server gets ||v|| sign(v_j) l_j / s (unbiased, not contractive).
    Bytes per row: 4 for the norm + ceil(d (1 + ceil(log2(s + 1))) / 8) for signs and levels,
    bit-packed (no entropy coding)."""

    name: ClassVar[str] = "qsgd"
    levels: int = 16  # quantization levels s per entry

    def row_bytes(self, d: int) -> int:
        return DENSE_BYTES + math.ceil(d * (1 + math.ceil(math.log2(self.levels + 1))) / 8)

    def __call__(self, V: torch.Tensor, seed: int = 0) -> tuple[torch.Tensor, int]:
        gen = torch.Generator().manual_seed(seed)  # on the CPU: the same draws on every device
        u = to_device(torch.rand(V.shape, generator=gen, dtype=V.dtype), V.device)
        norm = V.norm(dim=-1, keepdim=True)
        scaled = self.levels * V.abs() / norm.clamp_min(torch.finfo(V.dtype).tiny)
        low = scaled.floor()
        level = low + (u < scaled - low)
        return norm * V.sign() * level / self.levels, self.row_bytes(V.shape[-1]) * V.shape[0]
