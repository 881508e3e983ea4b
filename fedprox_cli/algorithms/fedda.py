"""FedDA (Yuan, Zaheer, Reddi, ICML 2021; reference code hongliny/FCO-ICML21)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, TypedDict

import torch

from ._local import local_dual_sgd
from .base import Algorithm, Env, register


class FedDAState(TypedDict):
    """FedDA's state (a typo in a key is a type error)."""

    z: torch.Tensor
    x: torch.Tensor
    s: float


@register
@dataclass(kw_only=True)
class FedDA(Algorithm[FedDAState]):
    """Federated dual averaging. The server keeps the dual z (z_0 = initial model) and the
    elapsed step s (s_0 = 0, so s_t = t alpha K beta):

        client i in S:  w <- z;  for k < K:  x = prox_{(s + k beta) h}(w);  w <- w - beta g_i(x)
                        send w - z
        server:         z <- z + alpha mean_S (w_i - z);   s <- s + alpha K beta
                        broadcast z and s (d + 1 floats)

    Output the primal prox_{s h}(z), computed by the server after its update (1 prox).
    Prox per round n K + 1 (n = participating clients; at round 0, k = 0 is prox_0 = identity)."""

    name: ClassVar[str] = "fedda"
    display_name: ClassVar[str] = "FedDA"
    partial_participation: ClassVar[bool] = True
    alpha: float = 1.0  # server learning rate (server_lr)
    beta: float = 0.02  # client learning rate (client_lr)

    def init(self, z0: torch.Tensor, n: int) -> FedDAState:
        return {"z": z0.clone(), "x": z0.clone(), "s": 0.0}

    def round(self, state: FedDAState, env: Env, t: int) -> FedDAState:
        z, elapsed = state["z"], state["s"]
        W, _ = local_dual_sgd(env, z.expand(len(env.clients), -1), t, self.beta, elapsed=elapsed)
        z = z + self.alpha * env.up(W - z).mean(0)
        elapsed += self.alpha * env.K * self.beta
        env.down(z, scalars=1)  # and the elapsed step s, a host number
        return {"z": z, "x": env.prox(z, elapsed), "s": elapsed}

    def output(self, state: FedDAState) -> torch.Tensor:
        return state["x"]

    def prox_steps(self, K: int, T: int) -> dict[str, float]:
        # clients use s_{T-1} + (K-1) beta, the output s_T = T alpha K beta
        s_last = (T - 1) * self.alpha * K * self.beta
        return {
            "s+k*beta (largest over T rounds)": max(
                s_last + (K - 1) * self.beta, T * self.alpha * K * self.beta
            )
        }

    def stationarity_step(self, K: int) -> float:
        return self.alpha * K * self.beta
