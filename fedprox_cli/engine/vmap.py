"""The ``vmap`` engine: chunks of clients at once, with ``torch.func.vmap(grad_and_value(...))``
of the loss of a flat parameter vector (:mod:`batched`), or, for a dense network on the CPU,
the same kernels by hand (:mod:`dense_vmap`: the same numbers); the gradients come out as one
(chunk, d) tensor.

The batched call can be replaced by a compiled one (:mod:`compile`, which compiles the
transform's call) or one joined with other runs' calls (:mod:`lockstep`):
:meth:`VmapEngine.wrapped`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch

from .base import Batch, Engine, GradCall, Samples, cross_entropy, per_row, shifted
from .batched import batched_grad
from .dense import dense_activations
from .dense_vmap import DenseVmap
from .models import FlatModel


class VmapEngine(Engine):
    """Chunks of at most ``chunk`` clients per batched call; a dense network's call by hand
    where ``dense`` (the CPU: it is tested bit for bit against the transform there)."""

    name = "vmap"

    def __init__(self, model: FlatModel, samples: Samples, chunk: int, dense: bool = False):
        self.model, self.samples, self.chunk = model, samples, chunk
        self.block = chunk  # local_steps: one batched call's rows at a time
        self.transform: GradCall = batched_grad(self._flat_loss)
        acts = dense_activations(model.module) if dense else None
        self.dense = DenseVmap(model, acts) if acts is not None else None
        # (X, inputs, targets, w) -> G (m, d), losses (m,)
        self.call: GradCall = self.dense or self.transform
        self.by_parameter = True  # local steps take the gradient parameter by parameter
        self._param_grads = (
            self.dense.param_grads if self.dense is not None else batched_grad(self._param_loss)
        )

    @property
    def kind(self) -> str:
        return "dense" if self.dense is not None else "autograd"

    def wrapped(self, wrap: Callable[[GradCall], GradCall], transform: bool = False) -> VmapEngine:
        """This engine with its batched call replaced by ``wrap(call)`` (of the transform's
        call where ``transform``, e.g. to compile it, else of the engine's own); its local
        steps go through that call too."""
        engine = copy.copy(self)
        engine.call = wrap(self.transform if transform else self.call)
        engine.by_parameter = False
        if transform:
            engine.dense = None  # it computes as the transform does
        return engine

    def _flat_loss(
        self, x: torch.Tensor, inputs: torch.Tensor, targets: torch.Tensor, weights: torch.Tensor
    ) -> torch.Tensor:
        return self._param_loss(self.model.params(x), inputs, targets, weights)

    def _param_loss(
        self,
        params: dict[str, torch.Tensor],
        inputs: torch.Tensor,
        targets: torch.Tensor,
        weights: torch.Tensor,
    ) -> torch.Tensor:
        return cross_entropy(self.model.apply(params, inputs), targets, weights)

    def grad(
        self, X: torch.Tensor, ids: torch.Tensor, w: torch.Tensor, out: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        inputs, targets = self.samples(ids)
        if out is None and self.chunk >= len(ids):
            return self.call(X, inputs, targets, w)  # one call: its output is G
        G = torch.empty_like(X) if out is None else out
        L = X.new_empty(len(ids))
        for s in range(0, len(ids), self.chunk):
            e = s + self.chunk
            L[s:e] = self._grads(X[s:e], inputs[s:e], targets[s:e], w[s:e], G[s:e])
        return G, L

    def _grads(
        self,
        X: torch.Tensor,
        inputs: torch.Tensor,
        targets: torch.Tensor,
        w: torch.Tensor,
        G: torch.Tensor,
    ) -> torch.Tensor:
        """The batched call's gradients into ``G`` (the call by hand concatenates them there
        directly); its losses."""
        if self.dense is not None and self.call is self.dense:
            return self.dense(X, inputs, targets, w, out=G)[1]
        G[:], L = self.call(X, inputs, targets, w)
        return L

    def sgd_steps(
        self, X: torch.Tensor, batches: list[Batch], beta: float, shift: torch.Tensor | float
    ) -> None:
        """Chunk by chunk, all steps of a chunk before the next, so a chunk's states, gradients
        and shifts stay in cache, with no (m, d) temporaries."""
        rows = shift if per_row(shift) else None  # one shift per row, or None: one for all
        for a in range(0, len(X), self.chunk):
            e = a + self.chunk
            Xc, Sc = X[a:e], rows[a:e] if rows is not None else shift
            for ids, w in batches:
                inputs, targets = self.samples(ids[a:e])
                if self.by_parameter:
                    self._param_step(Xc, Sc, inputs, targets, w[a:e], beta)
                else:
                    Xc.sub_(shifted(self.call(Xc, inputs, targets, w[a:e])[0], Sc), alpha=beta)

    def _param_step(
        self,
        Xc: torch.Tensor,
        Sc: torch.Tensor | float,
        inputs: torch.Tensor,
        targets: torch.Tensor,
        w: torch.Tensor,
        beta: float,
    ) -> None:
        """One step ``Xc <- Xc - beta (G + Sc)`` with the gradient taken parameter by parameter
        (vmap over the rows' parameter views) and applied to those views: the numbers of the
        flat gradient's step, bit for bit, without concatenating the parameters' gradients
        into an (m, d) tensor."""
        views = self.model.params(Xc)
        shifts = self.model.params(Sc) if torch.is_tensor(Sc) else dict.fromkeys(views, Sc)
        grads, _ = self._param_grads(views, inputs, targets, w)
        for name, view in views.items():
            view.sub_(shifted(grads[name], shifts[name]), alpha=beta)
