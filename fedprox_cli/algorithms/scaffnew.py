"""SCAFFNEW / ProxSkip (the FedCanon paper, Appendix A-2, eq. 15)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, TypedDict

import torch

from ..common.draws import generator
from ..common.ranges import param
from .base import Algorithm, Env, register


class ScaffnewState(TypedDict):
    """Scaffnew's state (a typo in a key is a type error)."""

    z: torch.Tensor
    X: torch.Tensor
    H: torch.Tensor


@register
@dataclass(kw_only=True)
class Scaffnew(Algorithm[ScaffnewState]):
    """Clients keep x_i and controls h_i (sum_i h_i = 0, all start at 0). Each local step:

        xhat_i = x_i - beta (g_i(x_i) - h_i)
        communicate (prob. p):  z = prox_{(beta/p) h}(mean_i (xhat_i - (beta/p) h_i));  x_i <- z
        otherwise:              x_i <- xhat_i
        h_i <- h_i + (p/beta) (x_i - xhat_i)

    A round is always K local gradient steps, so rounds compare with the other methods.
    ``p`` unset (default): communicate at the last of the K steps, i.e. p = 1/K
    deterministically, one communication per round. ``p`` set: a coin shared by all clients,
    drawn from a stream keyed by (seed, round, step), decides at every step; a round then
    holds 0, 1 or more communications and its metrics row evaluates z of the last one (z is
    unchanged by a round without communication). Output z. Per communication: up d, down d,
    prox 1."""

    name: ClassVar[str] = "scaffnew"
    display_name: ClassVar[str] = "SCAFFNEW"
    beta: float = 0.02  # local step size gamma of ProxSkip (eq. 15)
    p: float | None = param(
        None, gt=0, le=1, none=True
    )  # communication probability; None = every K-th step (p = 1/K)

    def prob(self, K: int) -> float:
        return 1.0 / K if self.p is None else self.p

    def communicates(self, env: Env, t: int, k: int) -> bool:
        if self.p is None:
            return k == env.K - 1
        coin = torch.rand((), generator=generator(env.seed, t, k, -3))
        return coin.item() < self.p  # CPU: no sync

    def init(self, z0: torch.Tensor, n: int) -> ScaffnewState:
        return {"z": z0.clone(), "X": z0.expand(n, -1).clone(), "H": z0.new_zeros(n, z0.numel())}

    def round(self, state: ScaffnewState, env: Env, t: int) -> ScaffnewState:
        z, X, H = state["z"], state["X"], state["H"]
        step = self.beta / self.prob(env.K)
        for k in range(env.K):
            Xhat = X - self.beta * (env.grad(X, t, k) - H)
            if self.communicates(env, t, k):
                z = env.prox(env.up(Xhat - step * H).mean(0), step)
                env.down(z)
                X = z.expand_as(Xhat)
            else:
                X = Xhat
            H = H + (X - Xhat) / step
        return {"z": z, "X": X, "H": H}

    def prox_steps(self, K: int, T: int) -> dict[str, float]:
        return {"beta/p": self.beta / self.prob(K)}

    def stationarity_step(self, K: int) -> float:
        return self.beta / self.prob(K)
