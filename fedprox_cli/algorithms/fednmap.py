"""FedNMap (the FedNMap paper, Algorithm 1, eqs. 4-7): normal-map local updates."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, TypedDict

import torch

from .base import Algorithm, Env, register


class FedNMapState(TypedDict):
    """FedNMap's state (a typo in a key is a type error)."""

    z: torch.Tensor
    x: torch.Tensor
    C: torch.Tensor


@register
@dataclass(kw_only=True)
class FedNMap(Algorithm[FedNMapState]):
    """x_t = prox_{gamma h}(z)
    client:  w <- z;  K times: w <- w - eta_a (g_i(prox_{gamma h}(w)) + (z - x_t)/gamma + c_i)
             y_i = (z - w) / (eta_a K)
    server:  ybar = mean_i y_i;  z <- z - K eta_s eta_a ybar;  broadcast z, ybar
    client:  c_i <- c_i - y_i + ybar

    Output x = prox_{gamma h}(z), computed by the server after its update (the initial row
    evaluates z0 itself [I]). Up d (y_i), down 2d (z, ybar). Prox per round: n K local + n
    (x_t at every client) + 1 (the server's output model)."""

    name: ClassVar[str] = "fednmap"
    display_name: ClassVar[str] = "FedNMap"
    eta_a: float = 0.1  # local step size eta_a (eq. 5; the paper's figures: 1/Q)
    eta_s: float = 1.0  # server step size eta_s (eq. 6)
    gamma: float = 4.0  # prox parameter gamma of the normal map (eq. 4; Figs. 2-5)

    def init(self, z0: torch.Tensor, n: int) -> FedNMapState:
        return {"z": z0.clone(), "x": z0.clone(), "C": z0.new_zeros(n, z0.numel())}

    def round(self, state: FedNMapState, env: Env, t: int) -> FedNMapState:
        z, C = state["z"], state["C"]
        x = env.prox(z, self.gamma, copies=env.n)
        shift = (z - x) / self.gamma + C

        def update(V: torch.Tensor, G: torch.Tensor, rows: slice, k: int) -> None:
            V.sub_(G.add_(shift[rows]).mul_(self.eta_a))  # V - eta_a (G + shift), in place

        W = env.local_steps(z.expand_as(C).clone(), t, lambda V, k: env.prox(V, self.gamma), update)
        Y = env.up(torch.sub(z, W, out=W).div_(self.eta_a * env.K))  # into W
        ybar = Y.mean(0)
        z = z - env.K * self.eta_s * self.eta_a * ybar
        env.down(z, ybar)
        return {"z": z, "x": env.prox(z, self.gamma), "C": C - Y + ybar}

    def output(self, state: FedNMapState) -> torch.Tensor:
        return state["x"]

    def prox_steps(self, K: int, T: int) -> dict[str, float]:
        return {"gamma": self.gamma}

    def stationarity_step(self, K: int) -> float:
        return self.gamma
