"""Local loops shared by several algorithms (registers nothing)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from .base import Env

Shift = torch.Tensor | float | Callable[[torch.Tensor], torch.Tensor]


def local_sgd(env: Env, X: torch.Tensor, t: int, beta: float, shift: Shift = 0.0) -> torch.Tensor:
    """K corrected SGD steps on every row: X <- X - beta (G(X) + shift), where ``shift`` is a
    constant (a scalar or rows) or a function of X (e.g. a proximal term (X - Y)/eta). A
    constant shift runs fused, client by client (:meth:`Oracle.sgd_steps`)."""
    if not callable(shift):
        return env.sgd_steps(X.clone(), t, beta, shift)
    X, G = X.clone(), torch.empty_like(X)
    for k in range(env.K):
        X.sub_(
            env.grad(X, t, k, out=G).add_(shift(X)), alpha=beta
        )  # in place: no (n, d) temporaries
    return X


def local_dual_sgd(
    env: Env,
    W: torch.Tensor,
    t: int,
    step: float,
    shift: torch.Tensor | float = 0.0,
    elapsed: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """K steps of local dual averaging (FedDA, FedCEF, ZA1): for k = 0..K-1

        U = prox_{(elapsed + k step) h}(W);   W <- W - step (G(U) + shift)

    (prox_0 is the identity, so with elapsed = 0 the first gradient is taken at W itself).
    K prox calls per row. Returns the final W and the sum of the K gradients."""
    W, G, gsum = W.clone(), torch.empty_like(W), torch.zeros_like(W)
    for k in range(env.K):
        U = env.prox(W, elapsed + k * step)
        gsum += env.grad(U, t, k, out=G)
        W.sub_(G.add_(shift).mul_(step))  # W - step (G + shift), in place: no (n, d) temporaries
    return W, gsum


def rows_into(
    out: torch.Tensor, fn: Callable[..., torch.Tensor], *rows: torch.Tensor, block: int = 64
) -> torch.Tensor:
    """``out = fn(*rows)`` computed ``block`` rows at a time, written into ``out`` (which may be
    one of ``rows``, e.g. a buffer the caller no longer needs): an (n, d) result with only
    (block, d) temporaries, the same numbers as ``fn`` on whole tensors."""
    for a in range(0, len(out), block):
        out[a : a + block] = fn(*(r[a : a + block] for r in rows))
    return out
