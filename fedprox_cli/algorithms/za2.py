"""ZA2: the "standard uncompressed" composite FL baseline of FedCEF (its reference [40])."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from .base import Algorithm, Env, register
from .fedcef import FedCEF, FedCEFState


@register
@dataclass(kw_only=True)
class ZA2(Algorithm[FedCEFState]):
    """[I] FedCEF with the identity compressor and eta = 1 (no momentum), standing in for
    Zhang, Hu, Johansson (Automatica 2026), whose own algorithm is not at hand: clients run
    FedCEF's corrected local dual averaging, send v_i - c_i uncompressed, c_i <- v_i.
    Up d, down d; prox per round as FedCEF (n K + n + 1)."""

    name: ClassVar[str] = "za2"
    display_name: ClassVar[str] = "ZA2"
    alpha: float = 0.1  # local step size (FedCEF's alpha)
    eta_g: float = 1.0  # server learning rate (FedCEF's eta_g); beta = alpha eta_g K

    @property
    def cef(self) -> FedCEF:
        return FedCEF(alpha=self.alpha, eta_g=self.eta_g, eta=1.0)

    def init(self, z0: torch.Tensor, n: int) -> FedCEFState:
        return self.cef.init(z0, n)

    def round(self, state: FedCEFState, env: Env, t: int) -> FedCEFState:
        return self.cef.round(state, env, t)

    def prox_steps(self, K: int, T: int) -> dict[str, float]:
        return self.cef.prox_steps(K, T)

    def stationarity_step(self, K: int) -> float:
        return self.cef.stationarity_step(K)
