"""FedDR (Tran-Dinh et al., NeurIPS 2021; reference code unc-optimization/FedDR)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, TypedDict

import torch

from ..common.ranges import param
from ._local import local_sgd
from .base import Algorithm, Env, register


class FedDRState(TypedDict):
    """FedDR's state (a typo in a key is a type error)."""

    z: torch.Tensor
    Y: torch.Tensor
    X: torch.Tensor
    Xhat: torch.Tensor


@register
@dataclass(kw_only=True)
class FedDR(Algorithm[FedDRState]):
    """Randomized Douglas-Rachford splitting. Clients keep y_i, x_i, xhat_i; the server z.

        client i in S (receives z):  y_i <- y_i + alpha_dr (z - x_i)
                                     x_i <- K steps x <- x - beta (g_i(x) + (x - y_i)/eta),
                                            warm start at x_i (approximate prox of eta f_i at y_i)
                                     xhat_i <- 2 x_i - y_i;  send xhat_i
        server:                      z <- prox_{eta h}(mean_i xhat_i)   (all n rows; absent
                                                                         clients' rows are stale)

    [I] Init: y_i = x_i = xhat_i = z = z0 (the reference code sets z = prox_{eta h}(z0); the two
    agree whenever prox(z0) = z0, e.g. a zero init). Output z. Up d, down d; prox 1 per round."""

    name: ClassVar[str] = "feddr"
    display_name: ClassVar[str] = "FedDR"
    partial_participation: ClassVar[bool] = True
    eta: float = 1.0  # prox parameter eta of the splitting (soft threshold eta * lam for l1)
    alpha_dr: float = param(1.95, gt=0, lt=2)  # relaxation alpha in (0, 2) (reference default 1.95)
    beta: float = 0.02  # local step size of the K-step subproblem solver

    def init(self, z0: torch.Tensor, n: int) -> FedDRState:
        rows = z0.expand(n, -1)
        return {"z": z0.clone(), "Y": rows.clone(), "X": rows.clone(), "Xhat": rows.clone()}

    def round(self, state: FedDRState, env: Env, t: int) -> FedDRState:
        z, S = state["z"], env.clients
        Y, X, Xhat = state["Y"].clone(), state["X"].clone(), state["Xhat"].clone()
        Y[S] = Y[S] + self.alpha_dr * (z - X[S])
        Y_S = Y[S]  # gathered once, not at every local step
        X[S] = local_sgd(env, X[S], t, self.beta, lambda V, rows: (V - Y_S[rows]) / self.eta)
        Xhat[S] = env.up(2 * X[S] - Y[S])
        z = env.prox(Xhat.mean(0), self.eta)
        env.down(z)
        return {"z": z, "Y": Y, "X": X, "Xhat": Xhat}

    def prox_steps(self, K: int, T: int) -> dict[str, float]:
        return {"eta": self.eta}

    def stationarity_step(self, K: int) -> float:
        return self.eta
