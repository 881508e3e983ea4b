"""FedProx with a proximal server step: a fedrun algorithm plugin in one file.

FedProx (Li, Sahu, Zaheer, Sanjabi, Talwalkar, Smith, "Federated Optimization in Heterogeneous
Networks", MLSys 2020, Algorithm 2): each client approximately minimizes its local objective
plus a proximal term around the server model z,

    min_x  f_i(x) + mu/2 ||x - z||^2,

here by K SGD steps from x = z:  x <- x - beta (g_i(x) + mu (x - z)).  The paper's server
averages, z <- mean_i x_i, and has no regularizer h. For a composite objective f + h we add
(our choice, as FedMiD's server step does) a proximal server step with server step size alpha:

    z <- prox_{alpha K beta h}( z + alpha mean_i (x_i - z) )

so alpha = 1 and h = 0 is the paper's FedProx, and mu = 0 is FedAvg followed by a server prox.
Per round: each participating client sends x_i - z (d numbers, through the run's uplink) and
receives z (d numbers); one prox call (the server's). Output: z.

Installed (``pip install examples/fedprox_server``), fedrun finds the class by its entry point
(group ``fedprox_cli.algorithms``, name ``fedprox_server``) and its config
``algorithm/fedprox_server.yaml`` by the Hydra search-path plugin in ``hydra_plugins/``:
``fedrun algorithm=fedprox_server dataset=digits``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from fedprox_cli.algorithms import Algorithm, Env, State


@dataclass(kw_only=True)
class FedProxServer(Algorithm):
    """FedProx local steps, prox-regularized server step (see the module docstring)."""

    name: ClassVar[str] = "fedprox_server"
    display_name: ClassVar[str] = "FedProx-S"
    partial_participation: ClassVar[bool] = True
    alpha: float = 1.0  # server step size
    beta: float = 0.02  # local step size
    mu: float = 0.01  # proximal coefficient of the local objective (> 0)

    def init(self, z0: torch.Tensor, n: int) -> State:
        return {"z": z0.clone()}

    def round(self, state: State, env: Env, t: int) -> State:
        z = state["z"]
        X, G = z.expand(len(env.clients), -1).clone(), None
        for k in range(env.K):
            G = env.grad(X, t, k, out=G)
            X.sub_(G.add_(X - z, alpha=self.mu), alpha=self.beta)  # x - beta (g + mu (x - z))
        z = env.prox(z + self.alpha * env.up(X.sub_(z)).mean(0), self.alpha * env.K * self.beta)
        env.down(z)
        return {"z": z}

    def prox_steps(self, K: int, T: int) -> dict[str, float]:
        return {"alpha*K*beta": self.alpha * K * self.beta}

    def stationarity_step(self, K: int) -> float:
        return self.alpha * K * self.beta
