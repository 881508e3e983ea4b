"""FedCEF (the FedCEF paper, Algorithm 1): compressed error feedback with momentum."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, TypedDict

import torch

from ..common.ranges import param
from ._local import local_dual_sgd
from .base import Algorithm, Env, register


class FedCEFState(TypedDict):
    """FedCEF's state (a typo in a key is a type error)."""

    z: torch.Tensor
    c: torch.Tensor
    C: torch.Tensor
    V: torch.Tensor


@register
@dataclass(kw_only=True)
class FedCEF(Algorithm[FedCEFState]):
    """State: z, c (server; every client holds the same z and c); C, V (clients); all 0 but z.

        client:  W <- z;  for k < K:  x = prox_{k alpha h}(W);  W <- W - alpha (g_i(x) + c - c_i)
                 v_i <- (1 - eta) v_i + eta ((z - w_i)/(alpha K) + c_i - c)        (line 11)
                 Delta_i = C(v_i - c_i), sent;  c_i <- c_i + Delta_i              (lines 12-13)
        server:  c <- c + mean_i Delta_i;  ztilde = z - beta c, broadcast        (lines 21-23)
        client:  c = (z - ztilde)/beta;  z <- prox_{beta h}(ztilde)              (lines 16-17)

    beta = alpha eta_g K. Output z. Up: the compressed Delta_i; down d (ztilde).
    Prox per round: n K local (the k = 0 one is prox_0 = identity; the paper's x^{t,K} is
    never used and not computed) + n + 1 for z = prox_{beta h}(ztilde): every client (line 17;
    Sec. III-B: "without server-side computation", n K + n in all) and [I] the
    server, which needs z for its next ztilde.
    [I] c is kept once: the clients' reconstruction (z - ztilde)/beta equals the server's c
    in exact arithmetic. The paper does not give eta; the default is from a sweep (config)."""

    name: ClassVar[str] = "fedcef"
    display_name: ClassVar[str] = "FedCEF"
    takes_compressor: ClassVar[bool] = True
    alpha: float = 0.1  # local step size alpha (Sec. V: 0.1 on MNIST, 0.06 on CIFAR-10)
    eta_g: float = 1.0  # server learning rate eta_g (Sec. V: 1.0)
    eta: float = param(
        0.3, gt=0, le=1
    )  # momentum eta in (0, 1] (line 11); not given by the paper (sweep)

    def beta(self, K: int) -> float:
        """The effective global step beta = alpha eta_g K."""
        return self.alpha * self.eta_g * K

    def init(self, z0: torch.Tensor, n: int) -> FedCEFState:
        zeros = z0.new_zeros(n, z0.numel())
        return {"z": z0.clone(), "c": z0.new_zeros(z0.numel()), "C": zeros, "V": zeros.clone()}

    def round(self, state: FedCEFState, env: Env, t: int) -> FedCEFState:
        z, c, C, V = state["z"], state["c"], state["C"], state["V"]
        W, _ = local_dual_sgd(env, z.expand_as(C), t, self.alpha, c - C)
        V = (1 - self.eta) * V + self.eta * ((z - W) / (self.alpha * env.K) + C - c)
        Delta = env.up(V - C)
        c = c + Delta.mean(0)
        beta = self.beta(env.K)
        ztilde = z - beta * c
        env.down(ztilde)
        return {"z": env.prox(ztilde, beta, copies=env.n + 1), "c": c, "C": C + Delta, "V": V}

    def prox_steps(self, K: int, T: int) -> dict[str, float]:
        return {"K*alpha": K * self.alpha, "beta=alpha*eta_g*K": self.beta(K)}

    def stationarity_step(self, K: int) -> float:
        return self.beta(K)
