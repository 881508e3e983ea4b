"""FedCanon (fedcanon.txt, Algorithm 1, eqs. 7a-7f)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .base import Algorithm, register


@register
@dataclass(kw_only=True)
class FedCanon(Algorithm):
    """Clients run K plain corrected SGD steps from z; the server takes the only prox.

        X <- z (every row);  K times: X <- X - beta (G(X) + C)             (7a-7b)
        Delta_i = (z - x_i) / (beta K);  Dbar = mean_i Delta_i              (7c-7d)
        z <- prox_{alpha h}(z - alpha Dbar)                                 (7e)
        C <- C + Dbar - Delta   (row-wise; sum_i c_i stays 0)               (7f)

    Output z. Per client per round: up d (Delta_i), down 2d (Dbar, z); 1 prox."""
    name: ClassVar[str] = "fedcanon"
    alpha: float = 0.1   # global step size alpha (eq. 7e)
    beta: float = 0.02   # local step size beta (eq. 7b)

    def init(self, z0, n):
        return {"z": z0.clone(), "C": z0.new_zeros(n, z0.numel())}

    def round(self, s, env, t):
        z, C = s["z"], s["C"]
        X = z.expand_as(C).clone()
        for k in range(env.K):
            X.sub_(env.grad(X, t, k).add_(C), alpha=self.beta)  # in place: G is ours
        Delta = env.up((z - X) / (self.beta * env.K))
        Dbar = Delta.mean(0)
        z = env.prox(z - self.alpha * Dbar, self.alpha)
        env.down(Dbar, z)
        return {"z": z, "C": C + Dbar - Delta}

    def prox_steps(self, K, T):
        return {"alpha": self.alpha}

    def stationarity_step(self, K):
        return self.alpha
