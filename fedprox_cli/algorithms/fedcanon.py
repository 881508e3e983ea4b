"""FedCanon (the FedCanon paper, Algorithm 1, eqs. 7a-7f)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, TypedDict

import torch

from ._local import local_sgd, rows_into
from .base import Algorithm, Env, register


class FedCanonState(TypedDict):
    """FedCanon's state (a typo in a key is a type error)."""

    z: torch.Tensor
    C: torch.Tensor


@register
@dataclass(kw_only=True)
class FedCanon(Algorithm[FedCanonState]):
    """Clients run K plain corrected SGD steps from z; the server takes the only prox.

        X <- z (every row);  K times: X <- X - beta (G(X) + C)             (7a-7b)
        Delta_i = (z - x_i) / (beta K);  Dbar = mean_i Delta_i              (7c-7d)
        z <- prox_{alpha h}(z - alpha Dbar)                                 (7e)
        C <- C + Dbar - Delta   (row-wise; sum_i c_i stays 0)               (7f)

    Output z. Per client per round: up d (Delta_i), down 2d (Dbar, z); 1 prox."""

    name: ClassVar[str] = "fedcanon"
    display_name: ClassVar[str] = "FedCanon"
    alpha: float = 0.1  # global step size alpha (eq. 7e)
    beta: float = 0.02  # local step size beta (eq. 7b)

    def init(self, z0: torch.Tensor, n: int) -> FedCanonState:
        return {"z": z0.clone(), "C": z0.new_zeros(n, z0.numel())}

    def round(self, state: FedCanonState, env: Env, t: int) -> FedCanonState:
        z, C = state["z"], state["C"]
        X = local_sgd(env, z.expand_as(C), t, self.beta, C)
        Delta = env.up(torch.sub(z, X, out=X).div_(self.beta * env.K))  # into X, no new (n, d)
        Dbar = Delta.mean(0)
        z = env.prox(z - self.alpha * Dbar, self.alpha)
        env.down(Dbar, z)
        # C + Dbar - Delta, written over Delta (ours): states C and X are all a round holds
        return {"z": z, "C": rows_into(Delta, lambda C, Delta: C + Dbar - Delta, C, Delta)}

    def prox_steps(self, K: int, T: int) -> dict[str, float]:
        return {"alpha": self.alpha}

    def stationarity_step(self, K: int) -> float:
        return self.alpha
