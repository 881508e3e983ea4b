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

from .base import Batch, Engine, cross_entropy, per_row, shifted
from .client_data import ClientData
from .dense import DenseNet, dense_activations
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
        self.g_views = list(model.params(self.g).values())
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
        return list(self.model.params(row).values())

    def _row(self, x: torch.Tensor) -> list[torch.Tensor]:
        """Parameter views of the state ``x`` (d,) to read: its own where it is contiguous, else
        of the working buffer, loaded with it."""
        if x.is_contiguous():
            return self._views(x)
        self.work.load(x)
        return self.views

    def sgd_steps(
        self, X: torch.Tensor, batches: list[Batch], beta: float, shift: torch.Tensor | float
    ) -> None:
        """Client by client: x_i stays in the working module for all its steps, updated through
        its parameter views, so its state, gradient and shift stay in cache. A dense network's
        step is its gradient by hand into one flat buffer and one update of the flat state."""
        rows = shift if per_row(shift) else None  # one shift per row, or None: one for all
        for i in range(len(X)):
            si = rows[i] if rows is not None else shift
            self.work.load(X[i])
            if self.dense is not None:
                for ids, w in batches:
                    self.dense.grad(self.views, ids[i], w[i], self.g_views)
                    self.work.w.sub_(shifted(self.g, si), alpha=beta)
            else:
                self._autograd_steps(batches, i, beta, si)
            X[i].copy_(self.work.w)

    def _autograd_steps(
        self, batches: list[Batch], i: int, beta: float, si: torch.Tensor | float
    ) -> None:
        """Client i's steps on the working module with autograd, parameter by parameter."""
        s_views: Iterable[torch.Tensor | float] = (
            self.model.params(si).values() if torch.is_tensor(si) else [si] * len(self.work.params)
        )
        for ids, w in batches:
            inputs, targets = self.samples(ids[i])
            _, grads = self.work.loss_grad(self._inputs(inputs), targets, w[i])
            with torch.no_grad():
                for p, g, sp in zip(self.work.params, grads, s_views):
                    p.sub_(shifted(g, sp), alpha=beta)
