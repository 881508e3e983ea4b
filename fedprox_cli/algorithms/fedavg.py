"""FedAvg (McMahan et al. 2017) with a server step size; defined for h = 0 only."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, TypedDict

import torch

from ._local import local_sgd
from .base import Algorithm, Env, register


class FedAvgState(TypedDict):
    """FedAvg's state (a typo in a key is a type error)."""

    z: torch.Tensor


@register
@dataclass(kw_only=True)
class FedAvg(Algorithm[FedAvgState]):
    """X <- z; K steps X <- X - beta G(X); z <- z + alpha mean_i (x_i - z).

    alpha = 1 is the original FedAvg (the server takes the clients' average)."""

    name: ClassVar[str] = "fedavg"
    display_name: ClassVar[str] = "FedAvg"
    partial_participation: ClassVar[bool] = True
    smooth_only: ClassVar[bool] = True
    alpha: float = 1.0  # server step size
    beta: float = 0.02  # local step size

    def init(self, z0: torch.Tensor, n: int) -> FedAvgState:
        return {"z": z0.clone()}

    def round(self, state: FedAvgState, env: Env, t: int) -> FedAvgState:
        z = state["z"]
        X = local_sgd(env, z.expand(len(env.clients), -1), t, self.beta)
        z = z + self.alpha * env.up(torch.sub(X, z, out=X)).mean(0)  # X - z in X: no new (n, d)
        env.down(z)
        return {"z": z}

    def stationarity_step(self, K: int) -> float:
        return self.alpha * K * self.beta
