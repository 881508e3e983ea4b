"""FedProx (Li, Sahu, Zaheer, Sanjabi, Talwalkar, Smith, "Federated Optimization in
Heterogeneous Networks", MLSys 2020, Algorithm 2): the tutorial plugin of docs/extending.md.

Each participating client starts from the server model z and approximately minimizes its local
objective plus a proximal term around z,

    min_x  f_i(x) + mu/2 ||x - z||^2,

by K SGD steps  x <- x - beta (g_i(x) + mu (x - z));  the server averages: z <- mean_i x_i.
mu = 0 is FedAvg: ``fedrun algorithm=fedprox algorithm.mu=0`` gives fedavg's numbers bit for bit
(the same gradients and the same arithmetic, in the same order). The paper's method has no
regularizer h, so the class declares h = 0 only (``smooth_only``): ``regularizer=l1`` is
refused before training. Per round: each client sends x_i - z (d floats, through ``env.up``)
and receives z (d floats, ``env.down``); no prox call.

It ships no YAML: fedrun makes its config from the field defaults below.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from fedprox_cli.algorithms import Algorithm, Env, State
from fedprox_cli.common.ranges import param


@dataclass(kw_only=True)
class FedProx(Algorithm):
    """K proximal local SGD steps, server average (see the module docstring)."""

    name: ClassVar[str] = "fedprox"
    display_name: ClassVar[str] = "FedProx"
    partial_participation: ClassVar[bool] = True  # a round may run on a subset of clients
    smooth_only: ClassVar[bool] = True  # defined for h = 0 only
    beta: float = 0.02  # local step size (a float: > 0 by default)
    mu: float = param(0.01, ge=0)  # proximal coefficient, mu >= 0 (0 = FedAvg)

    def init(self, z0: torch.Tensor, n: int) -> State:
        return {"z": z0.clone()}

    def round(self, state: State, env: Env, t: int) -> State:
        z = state["z"]
        X = z.expand(len(env.clients), -1).clone()  # one row per participating client
        G = torch.empty_like(X)
        for k in range(env.K):
            env.grad(X, t, k, out=G)  # g_i(x_i) at step k of round t
            X.sub_(G.add_(X - z, alpha=self.mu), alpha=self.beta)  # x - beta (g + mu (x - z))
        z = z + env.up(X.sub_(z)).mean(0)  # the server averages the clients' x_i
        env.down(z)
        return {"z": z}

    def stationarity_step(self, K: int) -> float:
        return K * self.beta
