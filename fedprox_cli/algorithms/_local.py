"""Local loops shared by several algorithms (registers nothing)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from .base import Env

Shift = torch.Tensor | float | Callable[[torch.Tensor, slice], torch.Tensor]


def rows_of(shift: torch.Tensor | float, rows: slice) -> torch.Tensor | float:
    """The rows ``rows`` of a per-row shift (m, d); a scalar or one row (d,) as it is."""
    return shift[rows] if torch.is_tensor(shift) and shift.dim() == 2 else shift


def at_rows(V: torch.Tensor, k: int) -> torch.Tensor:
    """Gradients taken at the rows themselves (:meth:`Env.local_steps`'s ``at``)."""
    return V


def local_sgd(env: Env, X: torch.Tensor, t: int, beta: float, shift: Shift = 0.0) -> torch.Tensor:
    """K corrected SGD steps on every row: X <- X - beta (G(X) + shift), where ``shift`` is a
    constant (a scalar or rows) or a function of the rows and their slice (e.g. a proximal term
    (V - Y[rows])/eta). Client by client (:meth:`Env.sgd_steps`, :meth:`Env.local_steps`)."""
    if not callable(shift):
        return env.sgd_steps(X.clone(), t, beta, shift)
    fn = shift

    def update(V: torch.Tensor, G: torch.Tensor, rows: slice, k: int) -> None:
        V.sub_(G.add_(fn(V, rows)), alpha=beta)

    return env.local_steps(X.clone(), t, at_rows, update)


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
    K prox calls per row, client by client (:meth:`Env.local_steps`). Returns the final W and
    the sum of the K gradients."""
    W, gsum = W.clone(), torch.zeros_like(W)

    def update(V: torch.Tensor, G: torch.Tensor, rows: slice, k: int) -> None:
        gsum[rows].add_(G)
        V.sub_(G.add_(rows_of(shift, rows)).mul_(step))  # V - step (G + shift), in place

    env.local_steps(W, t, lambda V, k: env.prox(V, elapsed + k * step), update)
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
