"""SCAFFOLD, option II (the FedCanon paper, Appendix A-1, eq. 14); defined for h = 0 only."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, TypedDict

import torch

from ._local import local_sgd
from .base import Algorithm, Env, register


class ScaffoldState(TypedDict):
    """Scaffold's state (a typo in a key is a type error)."""

    z: torch.Tensor
    c: torch.Tensor
    C: torch.Tensor


@register
@dataclass(kw_only=True)
class Scaffold(Algorithm[ScaffoldState]):
    """client i in S:  x <- z;  K times: x <- x - beta (g_i(x) - c_i + c)
                       c_i+ = c_i - c + (z - x)/(K beta);  send dx_i = x - z, dc_i = c_i+ - c_i
    server:            z <- z + alpha mean_S dx_i;   c <- c + (1/n) sum_S dc_i

    Output z. Up 2d, down 2d (z, c), prox 0. Partial participation: only the rows of the
    sampled clients S change. The composite "scaffold with server prox" variant is not built."""

    name: ClassVar[str] = "scaffold"
    display_name: ClassVar[str] = "SCAFFOLD"
    partial_participation: ClassVar[bool] = True
    smooth_only: ClassVar[bool] = True
    alpha: float = 1.0  # server step size (eq. 14; 1 = the clients' average)
    beta: float = 0.02  # local step size

    def init(self, z0: torch.Tensor, n: int) -> ScaffoldState:
        return {"z": z0.clone(), "c": z0.new_zeros(z0.numel()), "C": z0.new_zeros(n, z0.numel())}

    def round(self, state: ScaffoldState, env: Env, t: int) -> ScaffoldState:
        z, c, C = state["z"], state["c"], state["C"].clone()
        S = env.clients
        Ci = C[S]
        X = local_sgd(env, z.expand_as(Ci), t, self.beta, c - Ci)
        msg = X.new_empty(len(X), 2 * z.numel())  # [dx_i, dc_i], formed in place
        dx, dc = torch.split(msg, z.numel(), dim=1)
        torch.sub(X, z, out=dx)
        self.control_delta(env, t, z, X, c, Ci, out=dc)
        dx, dc = torch.split(env.up(msg), z.numel(), dim=1)
        C[S] = Ci + dc
        z = z + self.alpha * dx.mean(0)
        c = c + dc.sum(0) / env.n
        env.down(z, c)
        return {"z": z, "c": c, "C": C}

    def control_delta(
        self,
        env: Env,
        t: int,
        z: torch.Tensor,
        X: torch.Tensor,
        c: torch.Tensor,
        Ci: torch.Tensor,
        out: torch.Tensor,
    ) -> torch.Tensor:
        """dc_i = c_i+ - c_i with option II's c_i+ = c_i - c + (z - x_i)/(K beta), written into
        ``out``."""
        return torch.sub(z, X, out=out).div_(env.K * self.beta).sub_(c)

    def stationarity_step(self, K: int) -> float:
        return self.alpha * K * self.beta
