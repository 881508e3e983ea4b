"""Regularizers h with exact proximal operators.

Every regularizer is a small object with

- ``value(x)``: h summed over the last dimension (a scalar for a flat vector, one value per row
  for client states of shape (n, d));
- ``prox(x, step)``: prox_{step h}(x) = argmin_u h(u) + ||u - x||^2 / (2 step), exact and
  branch-free, for any tensor shape, device and floating dtype;
- ``rho``: the weak-convexity modulus (0 for convex h); prox_{step h} is single-valued only
  for step < 1/rho, and :meth:`Regularizer.prox` refuses larger steps.

New regularizers subclass :class:`Regularizer`, implement ``_value`` and ``_prox``, and
register with :func:`register`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import ClassVar

import torch

from .errors import UserError, require

_REGISTRY: dict[str, type["Regularizer"]] = {}


def register(cls):
    _REGISTRY[cls.name] = cls
    return cls


def names() -> list[str]:
    return sorted(_REGISTRY)


def build(name: str, **params) -> "Regularizer":
    """The regularizer ``name`` with the given coefficients, e.g. ``build("l1", lam=1e-4)``."""
    require(name in _REGISTRY, f"unknown regularizer '{name}' (choose from: {', '.join(names())})")
    cls = _REGISTRY[name]
    allowed = [f.name for f in fields(cls)]
    unknown = sorted(set(params) - set(allowed))
    require(not unknown, f"regularizer {name} has no parameter {', '.join(unknown)} "
                         f"(it takes: {', '.join(allowed) or 'none'})")
    reg = cls(**params)
    reg.validate()
    return reg


@dataclass(frozen=True)
class Regularizer:
    name: ClassVar[str]

    @property
    def rho(self) -> float:
        """Weak-convexity modulus: h + (rho/2)||.||^2 is convex."""
        return 0.0

    @property
    def is_zero(self) -> bool:
        return False

    def validate(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            require(isinstance(v, (int, float)) and math.isfinite(v) and v >= 0,
                    f"regularizer.{f.name} must be a finite number >= 0, got {v!r}")

    def max_step(self) -> float:
        """Largest admissible prox step (exclusive): 1/rho, or inf for convex h."""
        return math.inf if self.rho == 0 else 1.0 / self.rho

    def check_step(self, step: float, what: str = "prox step") -> None:
        """Refuse a prox parameter at or above 1/rho (the prox is then not single-valued)."""
        if not step < self.max_step():
            raise UserError(f"{what} = {step:g} must be < 1/rho = {self.max_step():g} for "
                            f"regularizer {self.name} (weakly convex with rho = {self.rho:g})")

    def value(self, x: torch.Tensor) -> torch.Tensor:
        return self._value(x)

    def prox(self, x: torch.Tensor, step: float) -> torch.Tensor:
        if not step > 0:
            raise UserError(f"prox step must be > 0, got {step:g}")
        self.check_step(step)
        return self._prox(x, step)

    def _value(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def _prox(self, x: torch.Tensor, step: float) -> torch.Tensor:
        raise NotImplementedError


def soft_threshold(x: torch.Tensor, tau: float) -> torch.Tensor:
    """prox of tau ||.||_1: sign(x) max(|x| - tau, 0)."""
    return torch.sign(x) * torch.clamp(x.abs() - tau, min=0.0)


@register
@dataclass(frozen=True)
class NoReg(Regularizer):
    """h = 0: the prox is the identity."""
    name: ClassVar[str] = "none"

    @property
    def is_zero(self) -> bool:
        return True

    def _value(self, x):
        return x.new_zeros(x.shape[:-1])

    def _prox(self, x, step):
        return x


@register
@dataclass(frozen=True)
class L1(Regularizer):
    """h(x) = lam ||x||_1; prox is the soft threshold at step * lam."""
    name: ClassVar[str] = "l1"
    lam: float = 1e-4

    def _value(self, x):
        return self.lam * x.abs().sum(-1)

    def _prox(self, x, step):
        return soft_threshold(x, step * self.lam)
