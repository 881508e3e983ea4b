"""FedADMM (Wang et al., 2022), reconstructed from the ADMM derivation [I]."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, TypedDict

import torch

from ._local import local_sgd
from .base import Algorithm, Env, register


class FedADMMState(TypedDict):
    """FedADMM's state (a typo in a key is a type error)."""

    z: torch.Tensor
    X: torch.Tensor
    Lam: torch.Tensor
    Xhat: torch.Tensor


@register
@dataclass(kw_only=True)
class FedADMM(Algorithm[FedADMMState]):
    """Consensus ADMM with inexact local solves. Clients keep x_i, lam_i (lam_i = 0 at start,
    x_i = z0); the server keeps z (z = z0) and the last xhat_i of every client.

        client i in S (receives z):  K steps x <- x - beta (g_i(x) + lam_i + (x - z)/eta),
                                     warm start at x_i
                                     lam_i <- lam_i + (x_i - z)/eta;  send xhat_i = x_i + eta lam_i
        server:                      z <- prox_{eta h}(mean_i xhat_i)   (absent rows stale [I])

    With y_i := z - eta lam_i this is FedDR with alpha_dr = 1, step for step (tested).
    [I] No reference code was found: update order, init and the stale rows under partial
    participation are chosen to make that equivalence exact. Output z. Up d, down d; prox 1."""

    name: ClassVar[str] = "fedadmm"
    display_name: ClassVar[str] = "FedADMM"
    partial_participation: ClassVar[bool] = True
    eta: float = 1.0  # prox / penalty parameter eta (penalty 1/eta)
    beta: float = 0.02  # local step size

    def init(self, z0: torch.Tensor, n: int) -> FedADMMState:
        rows = z0.expand(n, -1)
        return {
            "z": z0.clone(),
            "X": rows.clone(),
            "Lam": z0.new_zeros(n, z0.numel()),
            "Xhat": rows.clone(),
        }

    def round(self, state: FedADMMState, env: Env, t: int) -> FedADMMState:
        z, S = state["z"], env.clients
        X, Lam, Xhat = state["X"].clone(), state["Lam"].clone(), state["Xhat"].clone()
        Lam_S = Lam[S]  # gathered once, not at every local step
        X[S] = local_sgd(env, X[S], t, self.beta, lambda V, rows: Lam_S[rows] + (V - z) / self.eta)
        Lam[S] = Lam[S] + (X[S] - z) / self.eta
        Xhat[S] = env.up(X[S] + self.eta * Lam[S])
        z = env.prox(Xhat.mean(0), self.eta)
        env.down(z)
        return {"z": z, "X": X, "Lam": Lam, "Xhat": Xhat}

    def prox_steps(self, K: int, T: int) -> dict[str, float]:
        return {"eta": self.eta}

    def stationarity_step(self, K: int) -> float:
        return self.eta
