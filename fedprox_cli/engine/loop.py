"""The ``loop`` engine: one client after another, with plain autograd on a working module, or,
for a dense network, its gradient written out by hand (:mod:`dense`: the same numbers).

On the CPU a network with 2-D convolutions gets its mini-batches channels-last
(:func:`channels_last`): oneDNN's convolutions and their gradients run about a fifth faster on
that layout here (docs/performance.md, "The Fig. 3 CNN"), and every layer after the first
keeps it. The function is the same; its numbers agree with the contiguous layout's to float
rounding, not bit for bit (the kernels sum in another order: ``tests/test_channels_last.py``
bounds the difference against float64).

The working module (:class:`FlatModule`) is a private copy of the model whose parameters are
views of one flat buffer, so loading a client's state is one copy and there is no
re-parametrization per call. The oracle's exact evaluation passes use it too.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable

import torch
from torch import nn

from .base import At, Batch, Engine, Update, cross_entropy, per_row, shifted
from .client_data import ClientData
from .dense import ALIGN, DenseNet, dense_activations
from .models import FlatModel


class FlatModule:
    """A private copy of a module whose parameters are views of one flat buffer ``w`` (d,):
    ``load(x)`` sets the model to x with one copy, and the module runs with plain autograd."""

    def __init__(self, flat: FlatModel):
        self.module = copy.deepcopy(flat.module)
        self.w = flat.flat()
        for name, view in zip(flat.names, flat.params(self.w).values()):
            owner, _, attr = name.rpartition(".")
            setattr(self.module.get_submodule(owner), attr, nn.Parameter(view))
        self.params = [self.module.get_parameter(k) for k in flat.names]

    def load(self, x: torch.Tensor) -> None:
        with torch.no_grad():
            self.w.copy_(x)

    def loss_grad(
        self, inputs: torch.Tensor, targets: torch.Tensor, weights: torch.Tensor
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
        """The weighted loss and its parameter gradients at the loaded model."""
        loss = cross_entropy(self.module(inputs), targets, weights)
        return loss.detach(), torch.autograd.grad(loss, self.params)


def _stacked(batches: list[Batch]) -> Batch:
    """The K mini-batches' ids and weights (m, b) stacked client-major: (m, K, b) each."""
    return torch.stack([ids for ids, _ in batches], 1), torch.stack([w for _, w in batches], 1)


def channels_last(module: nn.Module, x: torch.Tensor) -> bool:
    """Whether the loop engine feeds ``module`` its samples ``x`` channels-last: on the CPU,
    images (N, C, H, W) into a module with a 2-D convolution."""
    return (
        x.device.type == "cpu"
        and x.dim() == 4
        and any(isinstance(m, nn.Conv2d) for m in module.modules())
    )


class LoopEngine(Engine):
    """Client by client through the working module ``work`` (shared with the oracle's
    evaluation passes); a dense network's gradients by hand on the CPU (:attr:`dense`)."""

    name = "loop"
    block = 1

    def __init__(self, model: FlatModel, data: ClientData, work: FlatModule):
        self.model, self.samples, self.work = model, data.samples, work
        acts = dense_activations(model.module)
        # by hand on the CPU, where it is tested bit for bit against autograd (no GPU has run it)
        on_cpu = data.x.device.type == "cpu"
        self.dense = DenseNet(model, acts, data.x, data.y) if acts is not None and on_cpu else None
        self.views = list(model.params(work.w).values())  # the working parameters, no autograd
        self.g = torch.empty_like(work.w)  # a local step's gradient (dense networks)
        self._shapes = [torch.empty(s, device="meta") for s in model.shapes]  # sizes, no data
        self.g_views = self._views(self.g)
        self.channels_last = self.dense is None and channels_last(model.module, data.x)

    @property
    def kind(self) -> str:
        if self.dense is not None:
            return "dense"
        return "autograd, channels-last" if self.channels_last else "autograd"

    def _inputs(self, inputs: torch.Tensor) -> torch.Tensor:
        """One client's mini-batch inputs as the module takes them (see :func:`channels_last`)."""
        return inputs.to(memory_format=torch.channels_last) if self.channels_last else inputs

    def grad(
        self, X: torch.Tensor, ids: torch.Tensor, w: torch.Tensor, out: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        G = torch.empty_like(X) if out is None else out
        L = X.new_empty(len(ids))
        if self.dense is not None:
            for i in range(len(ids)):
                self.dense.grad(self._row(X[i]), ids[i], w[i], self._views(G[i]))
                L[i] = self.dense.loss(w[i])
            return G, L
        inputs, targets = self.samples(ids)
        for i in range(len(ids)):
            self.work.load(X[i])
            L[i], grads = self.work.loss_grad(self._inputs(inputs[i]), targets[i], w[i])
            for g, gi in zip(self.model.params(G[i]).values(), grads):
                g.copy_(gi)
        return G, L

    def _views(self, row: torch.Tensor) -> list[torch.Tensor]:
        """Parameter views of a contiguous state ``row`` (d,), made in one C++ call (a third
        of the time of :meth:`FlatModel.params`: it is made at every step of local steps whose
        gradients are taken at a new vector, e.g. FedNMap's prox)."""
        views = torch._utils._unflatten_dense_tensors(row, self._shapes)  # type: ignore[no-untyped-call]  # torch: untyped
        return list(views)

    def _row(self, x: torch.Tensor) -> list[torch.Tensor]:
        """Parameter views of the state ``x`` (d,) to read: its own where it is contiguous and
        starts as the working buffer does (:data:`dense.ALIGN`), else of the working buffer,
        loaded with it."""
        if x.is_contiguous() and x.data_ptr() % ALIGN == 0:
            return self._views(x)
        self.work.load(x)
        return self.views

    def sgd_steps(
        self, X: torch.Tensor, batches: list[Batch], beta: float, shift: torch.Tensor | float
    ) -> None:
        """Client by client: x_i stays in the working module for all its steps, updated through
        its parameter views, so its state, gradient and shift stay in cache. A dense network's
        step is its gradient by hand into one flat buffer and one update of the flat state, its
        K mini-batches gathered at once (:meth:`DenseNet.gather`)."""
        rows = shift if per_row(shift) else None  # one shift per row, or None: one for all
        ids, w = _stacked(batches)
        for i in range(len(X)):
            si = rows[i] if rows is not None else shift
            self.work.load(X[i])
            if self.dense is not None:
                self.dense.gather(ids[i], w[i])
                for k in range(len(batches)):
                    self.dense.step(self.views, k, self.g_views)
                    self.work.w.sub_(shifted(self.g, si), alpha=beta)
            else:
                self._autograd_steps(ids[i], w[i], beta, si)
            X[i].copy_(self.work.w)

    def local_steps(self, X: torch.Tensor, batches: list[Batch], at: At, update: Update) -> None:
        """:meth:`Engine.local_steps`; a dense network's client by client with its K
        mini-batches gathered at once, each step's gradient by hand into one flat buffer (no
        loss: no one reads it)."""
        if self.dense is None:
            return super().local_steps(X, batches, at, update)
        ids, w = _stacked(batches)
        G = self.g[None]  # (1, d): the gradient of one client's step, in place of its row
        for i in range(len(X)):
            rows = slice(i, i + 1)
            Xb = X[rows]
            self.dense.gather(ids[i], w[i])
            for k in range(len(batches)):
                self.dense.step(self._row(at(Xb, k)[0]), k, self.g_views)
                update(Xb, G, rows, k)

    def _autograd_steps(
        self, ids: torch.Tensor, w: torch.Tensor, beta: float, si: torch.Tensor | float
    ) -> None:
        """One client's steps (its sample ids and weights (K, b)) on the working module with
        autograd, parameter by parameter."""
        s_views: Iterable[torch.Tensor | float] = (
            self.model.params(si).values() if torch.is_tensor(si) else [si] * len(self.work.params)
        )
        for ids_k, w_k in zip(ids, w):
            inputs, targets = self.samples(ids_k)
            _, grads = self.work.loss_grad(self._inputs(inputs), targets, w_k)
            with torch.no_grad():
                for p, g, sp in zip(self.work.params, grads, s_views):
                    p.sub_(shifted(g, sp), alpha=beta)
