"""FedCanon II (the FedCanon paper, Algorithm 2)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, TypedDict

import torch

from ._local import local_sgd, rows_into
from .base import Algorithm, Env, register


class FedCanon2State(TypedDict):
    """FedCanon2's state (a typo in a key is a type error)."""

    X0: torch.Tensor
    C: torch.Tensor


@register
@dataclass(kw_only=True)
class FedCanon2(Algorithm[FedCanon2State]):
    """FedCanon's local loop; the server only averages and broadcasts Dbar, every client
    applies the prox itself:

        K times: X <- X - beta (G(X) + C)   from the clients' own start rows X0
        Delta_i = (x0_i - x_i) / (beta K);  Dbar = mean_i Delta_i   (server, broadcast)
        x0_i <- prox_{alpha h}(x0_i - alpha Dbar);  C <- C + Dbar - Delta

    The rows of X0 stay identical (all start at z0 and receive the same Dbar), so the z
    trajectory is FedCanon's. Output: row 0 of X0 [I]. Up d, down d; n prox per round."""

    name: ClassVar[str] = "fedcanon2"
    display_name: ClassVar[str] = "FedCanon II"
    alpha: float = 0.1  # global step size alpha (prox parameter, as in FedCanon)
    beta: float = 0.02  # local step size beta

    def init(self, z0: torch.Tensor, n: int) -> FedCanon2State:
        return {"X0": z0.expand(n, -1).clone(), "C": z0.new_zeros(n, z0.numel())}

    def round(self, state: FedCanon2State, env: Env, t: int) -> FedCanon2State:
        X0, C = state["X0"], state["C"]
        X = local_sgd(env, X0, t, self.beta, C)
        Delta = env.up(torch.sub(X0, X, out=X).div_(self.beta * env.K))  # into X, no new (n, d)
        Dbar = Delta.mean(0)
        env.down(Dbar)
        return {
            "X0": env.prox(X0 - self.alpha * Dbar, self.alpha),
            "C": rows_into(Delta, lambda C, Delta: C + Dbar - Delta, C, Delta),
        }  # over Delta

    def output(self, state: FedCanon2State) -> torch.Tensor:
        return state["X0"][0]

    def prox_steps(self, K: int, T: int) -> dict[str, float]:
        return {"alpha": self.alpha}

    def stationarity_step(self, K: int) -> float:
        return self.alpha
