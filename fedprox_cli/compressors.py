"""Uplink compressors: each maps client messages (rows of a tensor) to what the server
receives, and reports the bytes that cost (a dense float 4 bytes; a kept sparse element 8:
value + index, as in FedCEF Sec. V-A).

New compressors subclass :class:`Compressor`, implement ``__call__`` and register with
:func:`register`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import ClassVar

import torch

from .errors import require

DENSE_BYTES = 4
SPARSE_BYTES = 8

_REGISTRY: dict[str, type["Compressor"]] = {}


def register(cls):
    _REGISTRY[cls.name] = cls
    return cls


def names() -> list[str]:
    return sorted(_REGISTRY)


def build(name: str, **params) -> "Compressor":
    require(name in _REGISTRY, f"unknown compressor '{name}' (choose from: {', '.join(names())})")
    cls = _REGISTRY[name]
    allowed = [f.name for f in fields(cls)]
    unknown = sorted(set(params) - set(allowed))
    require(not unknown, f"compressor {name} has no parameter {', '.join(unknown)} "
                         f"(it takes: {', '.join(allowed) or 'none'})")
    comp = cls(**params)
    comp.validate()
    return comp


@dataclass(frozen=True)
class Compressor:
    name: ClassVar[str]

    @property
    def is_identity(self) -> bool:
        return False

    def validate(self) -> None:
        pass

    def __call__(self, V: torch.Tensor, seed: int = 0) -> tuple[torch.Tensor, int]:
        """(compressed rows of V, total bytes of all rows); ``seed`` keys any randomness."""
        raise NotImplementedError


@register
@dataclass(frozen=True)
class Identity(Compressor):
    """No compression: every entry sent as a dense float."""
    name: ClassVar[str] = "identity"

    @property
    def is_identity(self) -> bool:
        return True

    def __call__(self, V, seed=0):
        return V, DENSE_BYTES * V.numel()
