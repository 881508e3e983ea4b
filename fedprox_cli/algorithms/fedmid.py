"""FedMiD (Yuan, Zaheer, Reddi, ICML 2021; reference code hongliny/FCO-ICML21)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, TypedDict

import torch

from ._local import at_rows
from .base import Algorithm, Env, register


class FedMiDState(TypedDict):
    """FedMiD's state (a typo in a key is a type error)."""

    z: torch.Tensor


@register
@dataclass(kw_only=True)
class FedMiD(Algorithm[FedMiDState]):
    """Federated mirror descent with the Euclidean mirror map (proximal SGD locally):

        client i in S:  x <- z;  K times: x <- prox_{beta h}(x - beta g_i(x));  send x - z
        server:         z <- prox_{alpha K beta h}(z + alpha mean_S (x_i - z))

    Output z. Up d, down d; prox n K + 1 per round (n = participating clients)."""

    name: ClassVar[str] = "fedmid"
    display_name: ClassVar[str] = "FedMiD"
    partial_participation: ClassVar[bool] = True
    alpha: float = 1.0  # server learning rate (the reference code's server_lr)
    beta: float = 0.02  # client learning rate (client_lr)

    def init(self, z0: torch.Tensor, n: int) -> FedMiDState:
        return {"z": z0.clone()}

    def round(self, state: FedMiDState, env: Env, t: int) -> FedMiDState:
        z = state["z"]

        def update(V: torch.Tensor, G: torch.Tensor, rows: slice, k: int) -> None:
            V.copy_(env.prox(V - self.beta * G, self.beta))

        X = env.local_steps(z.expand(len(env.clients), -1).clone(), t, at_rows, update)
        step = self.alpha * env.K * self.beta
        z = env.prox(z + self.alpha * env.up(X - z).mean(0), step)
        env.down(z)
        return {"z": z}

    def prox_steps(self, K: int, T: int) -> dict[str, float]:
        return {"beta": self.beta, "alpha*K*beta": self.alpha * K * self.beta}

    def stationarity_step(self, K: int) -> float:
        return self.alpha * K * self.beta
