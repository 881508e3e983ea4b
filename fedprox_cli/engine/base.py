"""The interface of a gradient engine, and the loss every engine computes.

An :class:`Engine` turns rows of client parameters and their clients' mini-batches into
gradients; the oracle draws the mini-batches and chooses one engine when it is built
(:mod:`choice`), so that its methods never branch on the engine. ``loop`` (:mod:`loop`)
evaluates one client after another with plain autograd, ``vmap`` (:mod:`vmap`) chunks of
clients at once; both compute the same function (``tests/test_engines.py``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import ClassVar, TypeGuard

import torch

Batch = tuple[torch.Tensor, torch.Tensor]  # sample ids (m, b) and their weights (m, b)
Samples = Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]  # ids -> inputs, targets
GradCall = Callable[..., tuple[torch.Tensor, torch.Tensor]]  # (X, inputs, targets, w) -> G, losses
At = Callable[[torch.Tensor, int], torch.Tensor]  # (rows, k) -> where step k takes their gradients
Update = Callable[[torch.Tensor, torch.Tensor, slice, int], None]
"""(rows, their gradients G, the rows' slice of the whole, k): step k's update of the rows, in
place (G may be overwritten)."""


class Engine(ABC):
    """Gradients of m clients' losses at m rows of parameters: row i is client i's state, its
    mini-batch the samples ``ids[i]`` with weights ``w[i]`` (loss = sum of weighted losses)."""

    name: ClassVar[str]
    block: int  # rows of X whose K local steps :meth:`local_steps` takes before the next rows

    @property
    def kind(self) -> str:
        """How the engine computes its gradients (a timing of ``engine=auto`` is kept per kind)."""
        return "autograd"

    @abstractmethod
    def grad(
        self, X: torch.Tensor, ids: torch.Tensor, w: torch.Tensor, out: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Gradients G (m, d) at the rows of X and the batch losses (m,); G written into ``out``
        (an (m, d) tensor) if given."""

    @abstractmethod
    def sgd_steps(
        self, X: torch.Tensor, batches: list[Batch], beta: float, shift: torch.Tensor | float
    ) -> None:
        """One corrected SGD step x_i <- x_i - beta (g_i(x_i) + s_i) per batch, in place, with
        ``shift`` s a scalar, one row (d,) or rows (m, d)."""

    def local_steps(self, X: torch.Tensor, batches: list[Batch], at: At, update: Update) -> None:
        """For k = 0..K-1: G = the gradients at ``at(rows, k)`` on ``batches[k]``, then
        ``update(rows, G, slice, k)``; all K steps of :attr:`block` rows before the next rows,
        so their states stay in cache and no (m, d) temporary is made. Each gradient is the one
        :meth:`grad` gives on all of X (its calls are per client or per chunk alike)."""
        G = X.new_empty(min(self.block, len(X)), X.shape[1])
        for a in range(0, len(X), self.block):
            rows = slice(a, a + self.block)
            Xb = X[rows]
            Gb = G[: len(Xb)]
            for k, (ids, w) in enumerate(batches):
                self.grad(at(Xb, k), ids[rows], w[rows], out=Gb)
                update(Xb, Gb, rows, k)


def per_row(shift: torch.Tensor | float) -> TypeGuard[torch.Tensor]:
    """Whether ``shift`` holds one row per client (an (m, d) tensor)."""
    return torch.is_tensor(shift) and shift.dim() == 2


def cross_entropy(logits: torch.Tensor, y: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """sum_s w_s CE(logits_s, y_s), with CE_s = -log_softmax(logits_s)[y_s] taken by ``gather``:
    the numbers of ``F.cross_entropy(..., reduction="none")`` and of its gradient, bit for bit,
    but under vmap without ``nll_loss``'s Python decomposition (whose first call imports sympy,
    and which is Python work in every call)."""
    return nll(torch.log_softmax(logits, -1), y, w)


def nll(log_probs: torch.Tensor, y: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """sum_s w_s (-log_probs_s[y_s]): :func:`cross_entropy` from the log-softmax."""
    return (w * -log_probs.gather(-1, y.unsqueeze(-1)).squeeze(-1)).sum()


def shifted(g: torch.Tensor, s: torch.Tensor | float) -> torch.Tensor:
    """``g + s`` in place; ``g`` itself for the shift 0.0 (FedAvg's): one pass over the
    gradient fewer per step, with the same numbers."""
    return g if isinstance(s, float) and s == 0.0 else g.add_(s)
