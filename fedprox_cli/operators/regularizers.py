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
from dataclasses import dataclass
from typing import ClassVar

import torch

from ..common import ranges
from ..common.errors import UserError, require
from ..common.plugin_calls import calling, returned
from ..common.ranges import param
from ..common.registry import Registry, class_contract


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
        """Each parameter in its declared range (:mod:`fedprox_cli.common.ranges`; a float
        declaring none is a coefficient, >= 0)."""
        ranges.check(self, "regularizer")

    def max_step(self) -> float:
        """Largest admissible prox step (exclusive): 1/rho, or inf for convex h."""
        return math.inf if self.rho == 0 else 1.0 / self.rho

    def check_step(self, step: float, what: str = "prox step") -> None:
        """Refuse a prox parameter at or above 1/rho (the prox is then not single-valued)."""
        if not step < self.max_step():
            raise UserError(
                f"{what} = {step:g} must be < 1/rho = {self.max_step():g} for "
                f"regularizer {self.name} (weakly convex with rho = {self.rho:g})"
            )

    def value(self, x: torch.Tensor) -> torch.Tensor:
        with calling(self, "regularizer", "value(x)"):
            v = self._value(x)
        return returned(
            self,
            "regularizer",
            "value(x)",
            v,
            torch.is_tensor(v) and v.shape == x.shape[:-1],
            f"a tensor of shape {tuple(x.shape[:-1])} (one value per row)",
        )

    def prox(self, x: torch.Tensor, step: float) -> torch.Tensor:
        if not step > 0:
            raise UserError(f"prox step must be > 0, got {step:g}")
        self.check_step(step)
        with calling(self, "regularizer", "prox(x, step)"):
            u = self._prox(x, step)
        return returned(
            self,
            "regularizer",
            "prox(x, step)",
            u,
            torch.is_tensor(u) and u.shape == x.shape,
            f"a tensor of x's shape {tuple(x.shape)}",
        )

    def _value(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def _prox(self, x: torch.Tensor, step: float) -> torch.Tensor:
        raise NotImplementedError


register, names, lookup, build = (
    _REGISTRY := Registry[type[Regularizer]](
        "regularizer",
        "regularizers",
        class_contract(Regularizer, ("_value", "_prox")),
        lambda reg: reg.validate(),
    )
).calls()


def soft_threshold(x: torch.Tensor, tau: float) -> torch.Tensor:
    """prox of tau ||.||_1: sign(x) max(|x| - tau, 0), computed as x - clip(x, -tau, tau)
    (two passes over memory)."""
    return x - torch.clamp(x, -tau, tau)


@register
@dataclass(frozen=True)
class NoReg(Regularizer):
    """h = 0: the prox is the identity."""

    name: ClassVar[str] = "none"

    @property
    def is_zero(self) -> bool:
        return True

    def _value(self, x: torch.Tensor) -> torch.Tensor:
        return x.new_zeros(x.shape[:-1])

    def _prox(self, x: torch.Tensor, step: float) -> torch.Tensor:
        return x


@register
@dataclass(frozen=True)
class L1(Regularizer):
    """h(x) = lam ||x||_1 (FedCEF Sec. V-A: lam = 1e-5); prox is the soft threshold at step *
    lam."""

    name: ClassVar[str] = "l1"
    lam: float = 1e-5  # weight lam of ||x||_1

    def _value(self, x: torch.Tensor) -> torch.Tensor:
        return self.lam * x.abs().sum(-1)

    def _prox(self, x: torch.Tensor, step: float) -> torch.Tensor:
        return soft_threshold(x, step * self.lam)


@register
@dataclass(frozen=True)
class ElasticNet(Regularizer):
    """h(x) = l1 ||x||_1 + l2 ||x||_2^2 (FedNMap Sec. 5.1, nu_1 = 0.001, nu_2 = 0.01);
    prox is the soft threshold at step * l1 shrunk by 1 / (1 + 2 step l2)."""

    name: ClassVar[str] = "elastic_net"
    l1: float = 1e-3  # weight of ||x||_1 (FedNMap's nu_1)
    l2: float = 1e-2  # weight of ||x||_2^2 (FedNMap's nu_2)

    def _value(self, x: torch.Tensor) -> torch.Tensor:
        return self.l1 * x.abs().sum(-1) + self.l2 * x.square().sum(-1)

    def _prox(self, x: torch.Tensor, step: float) -> torch.Tensor:
        return soft_threshold(x, step * self.l1) / (1.0 + 2.0 * step * self.l2)


@register
@dataclass(frozen=True)
class MCP(Regularizer):
    """Minimax concave penalty (Zhang 2010), per coordinate
    lam |x| - x^2 / (2 theta) for |x| <= theta lam, theta lam^2 / 2 beyond; (1/theta)-weakly
    convex. For step < theta the prox is the "firm threshold": 0 for |x| <= step lam,
    soft(x, step lam) / (1 - step/theta) up to |x| = theta lam, x beyond."""

    name: ClassVar[str] = "mcp"
    lam: float = 1e-5  # penalty level lam (the slope at 0)
    theta: float = param(3.0, gt=0)  # concavity theta: the penalty is flat beyond theta lam

    @property
    def rho(self) -> float:
        return 1.0 / self.theta

    def _value(self, x: torch.Tensor) -> torch.Tensor:
        a = x.abs()
        inner = self.lam * a - a.square() / (2 * self.theta)
        return torch.where(
            a <= self.theta * self.lam, inner, torch.full_like(a, self.theta * self.lam**2 / 2)
        ).sum(-1)

    def _prox(self, x: torch.Tensor, step: float) -> torch.Tensor:
        firm = soft_threshold(x, step * self.lam) * (self.theta / (self.theta - step))
        return torch.where(x.abs() > self.theta * self.lam, x, firm)


@register
@dataclass(frozen=True)
class SCAD(Regularizer):
    """Smoothly clipped absolute deviation (Fan and Li 2001), per coordinate
    lam |x| for |x| <= lam, (2 a lam |x| - x^2 - lam^2) / (2 (a - 1)) up to a lam,
    lam^2 (a + 1) / 2 beyond; 1/(a-1)-weakly convex. For step < a - 1 the prox is
    soft(x, step lam) for |x| <= (1 + step) lam, ((a-1) x - sign(x) step a lam) / (a - 1 - step)
    up to |x| = a lam, x beyond (Fan and Li's thresholding rule, there with step = 1). The middle
    piece is (a-1)/(a-1-step) soft(x, step a lam / (a-1)), as |x| > step a lam / (a-1) there."""

    name: ClassVar[str] = "scad"
    lam: float = 1e-5  # penalty level lam (the slope at 0)
    a: float = param(3.7, gt=2)  # shape a > 2: the penalty is flat beyond a lam (Fan and Li: 3.7)

    @property
    def rho(self) -> float:
        return 1.0 / (self.a - 1.0)

    def _value(self, x: torch.Tensor) -> torch.Tensor:
        a, lam = self.a, self.lam
        t = x.abs()
        middle = (2 * a * lam * t - t.square() - lam**2) / (2 * (a - 1))
        outer = torch.full_like(t, lam**2 * (a + 1) / 2)
        return torch.where(t <= lam, lam * t, torch.where(t <= a * lam, middle, outer)).sum(-1)

    def _prox(self, x: torch.Tensor, step: float) -> torch.Tensor:
        a, lam = self.a, self.lam
        t = x.abs()
        middle = soft_threshold(x, step * a * lam / (a - 1)) * ((a - 1) / (a - 1 - step))
        return torch.where(
            t <= (1 + step) * lam,
            soft_threshold(x, step * lam),
            torch.where(t <= a * lam, middle, x),
        )


def _indicator(inside: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """0 where ``inside``, +inf elsewhere, in x's dtype and device."""
    return torch.where(inside, x.new_zeros(()), x.new_full((), math.inf))


def _slack(x: torch.Tensor) -> float:
    """Relative feasibility tolerance of the indicators: sqrt(machine epsilon) of x's dtype, so
    that a projected point counts as inside despite rounding."""
    return math.sqrt(torch.finfo(x.dtype).eps)


@register
@dataclass(frozen=True)
class L2Ball(Regularizer):
    """Indicator of {x : ||x||_2 <= radius} (per row); prox is the projection
    x min(1, radius / ||x||_2)."""

    name: ClassVar[str] = "l2_ball"
    radius: float = param(10.0, gt=0)  # radius of the ball

    def _value(self, x: torch.Tensor) -> torch.Tensor:
        inside = x.norm(dim=-1) <= self.radius * (1 + _slack(x))
        return _indicator(inside, x)

    def _prox(self, x: torch.Tensor, step: float) -> torch.Tensor:
        norm = x.norm(dim=-1, keepdim=True)
        return x * torch.clamp(self.radius / norm.clamp_min(torch.finfo(x.dtype).tiny), max=1.0)


@register
@dataclass(frozen=True)
class Box(Regularizer):
    """Indicator of the box {x : lo <= x_j <= hi for all j}; prox is the clamp to [lo, hi]."""

    name: ClassVar[str] = "box"
    lo: float = param(-1.0)  # lower bound of every coordinate
    hi: float = param(1.0)  # upper bound of every coordinate

    def validate(self) -> None:
        super().validate()
        require(self.lo <= self.hi, f"regularizer.lo = {self.lo:g} must be <= hi = {self.hi:g}")

    def _value(self, x: torch.Tensor) -> torch.Tensor:
        tol = _slack(x) * max(abs(self.lo), abs(self.hi), 1.0)
        inside = ((x >= self.lo - tol) & (x <= self.hi + tol)).all(-1)
        return _indicator(inside, x)

    def _prox(self, x: torch.Tensor, step: float) -> torch.Tensor:
        return torch.clamp(x, self.lo, self.hi)
