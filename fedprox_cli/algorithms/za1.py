"""ZA1: Zhang, Hu, Johansson, ICASSP 2024 (the FedNMap paper, Appendix A.1, eqs. 30-34)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, TypedDict

import torch

from ._local import local_dual_sgd
from .base import Algorithm, Env, register


class ZA1State(TypedDict):
    """ZA1's state (a typo in a key is a type error)."""

    x: torch.Tensor
    C: torch.Tensor


@register
@dataclass(kw_only=True)
class ZA1(Algorithm[ZA1State]):
    """etahat = eta_a eta_s K; the server keeps z and x = prox_{etahat h}(z); c_i start at 0.

        client i:  w <- x;  for l < K:  u = prox_{l eta_a h}(w);  g_l = g_i(u);
                                        w <- w - eta_a (g_l + c_i)                 (30)
                   send w
        server:    z <- x + eta_s (mean_i w_i - x);  x_new = prox_{etahat h}(z);  broadcast z  (31)
        client i:  c_i <- (x - z)/etahat - (1/K) sum_l g_l  (old x, new z);  x <- x_new    (32)

    Output x. Up d, down d (z). Prox per round: n K local (l = 0 is prox_0 = identity; the
    unused u^K is not computed) + n + 1 for x_new: the server (31; n K + 1 in all) and [I]
    every client recomputing it from the z it receives. The initial c_i = 0 as in the paper.
    [I] Start: x^0 = z0, the initial model itself; reading (31)'s x_t = prox_{etahat h}(z_t) at
    t = 0 would give x^0 = prox_{etahat h}(z0) instead (the paper states no x^0). The two agree
    whenever prox(z0) = z0 (e.g. a zero init) and otherwise differ by one prox of the initial
    model (a non-zero init differs from it by a relative 3.5e-4); from
    round 1 on x = prox_{etahat h}(z) holds as above. The committed runs under
    results/reproduction/ were made with x^0 = z0."""

    name: ClassVar[str] = "za1"
    display_name: ClassVar[str] = "ZA1"
    eta_a: float = 0.1  # local step size eta_a (eq. 30; FedNMap's comparisons: 1/Q)
    eta_s: float = 1.0  # server step size eta_s (eq. 31)

    def etahat(self, K: int) -> float:
        return self.eta_a * self.eta_s * K

    def init(self, z0: torch.Tensor, n: int) -> ZA1State:
        return {"x": z0.clone(), "C": z0.new_zeros(n, z0.numel())}

    def round(self, state: ZA1State, env: Env, t: int) -> ZA1State:
        x, C = state["x"], state["C"]
        W, gsum = local_dual_sgd(env, x.expand_as(C), t, self.eta_a, C)
        z = x + self.eta_s * (env.up(W).mean(0) - x)
        env.down(z)
        etahat = self.etahat(env.K)
        return {"x": env.prox(z, etahat, copies=env.n + 1), "C": (x - z) / etahat - gsum / env.K}

    def output(self, state: ZA1State) -> torch.Tensor:
        return state["x"]

    def prox_steps(self, K: int, T: int) -> dict[str, float]:
        return {"K*eta_a": K * self.eta_a, "eta_a*eta_s*K": self.etahat(K)}

    def stationarity_step(self, K: int) -> float:
        return self.etahat(K)
