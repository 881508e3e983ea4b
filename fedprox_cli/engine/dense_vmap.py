"""The vmap engine's batched gradient on a dense network written out by hand, without
``torch.func`` or autograd: the ``vmap`` engine's and the seed-batched runs' call for the
models ``linear``, ``mlp`` and ``sigmoid_mlp`` on the CPU (:func:`dense.dense_activations`).

``vmap(grad_and_value(loss))`` of such a model costs about a millisecond per call beside its
products (the transforms' Python, the graph, a tensor per activation and gradient and a
concatenation of the parameters' gradients: docs/performance.md). :class:`DenseVmap` runs the
kernels the transform runs for these models, in its order and on operands of the same shapes
and strides: per layer ``bmm`` of the inputs with the transposed weights (views of the rows)
and the bias added after the product; ``_log_softmax``, the ``gather`` backward's
``scatter_add`` into zeros, ``_log_softmax_backward_data``; per layer ``bmm`` of the output
gradient with the weights for the layer below, ``bmm`` of its transpose with the layer's
input for the weights, ``sum`` over the samples for the bias, ``threshold_backward`` /
``sigmoid_backward``. The gradients are written straight into their rows: the same numbers,
bit for bit (``tests/test_dense_vmap.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from .dense import ACTIVATIONS
from .models import FlatModel


class DenseVmap:
    """``(X, inputs, targets, w) -> (G, losses)``: the gradients (m, d) and the weighted losses
    (m,) of m rows of parameters X (m, d), row i on its own mini-batch ``inputs[i]`` (b, ...),
    ``targets[i]`` (b,), weights ``w[i]`` (b,); what ``vmap(grad_and_value(loss))`` gives for
    the dense network ``model`` with the activations ``acts``."""

    def __init__(self, model: FlatModel, acts: Sequence[type[nn.Module]]) -> None:
        self.model = model
        self.acts = [ACTIVATIONS[a] for a in acts]

    def __call__(
        self,
        X: torch.Tensor,
        inputs: torch.Tensor,
        targets: torch.Tensor,
        w: torch.Tensor,
        out: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The gradients, written into ``out`` (m, d) where given, and the losses."""
        m, b = targets.shape
        params = list(self.model.params(X).values())  # weight (m, o, i), bias (m, o), ...
        G = torch.empty_like(X) if out is None else out
        grads = list(self.model.params(G).values())
        weights, biases, acts = params[0::2], params[1::2], self.acts
        below = [inputs.reshape(m, b, -1)]  # each layer's input, then the logits
        for l, (W, bias) in enumerate(zip(weights, biases)):
            z = torch.bmm(below[l], W.transpose(1, 2)).add_(bias.unsqueeze(1))
            if l < len(acts):
                acts[l][0](z)
            below.append(z)
        lsm = torch._log_softmax(below[-1], 2, False)
        y = targets.unsqueeze(2)
        losses = torch.sum(w * -lsm.gather(2, y).squeeze(2), 1)
        # the loss's gradient w.r.t. the log-softmax: -w_s at y_s, else 0
        dlsm = torch.zeros_like(lsm).scatter_add_(2, y, torch.neg(w).unsqueeze(2))
        dz = torch._log_softmax_backward_data(dlsm, lsm, 2, lsm.dtype)
        for l in range(len(weights) - 1, -1, -1):
            dh = torch.bmm(dz, weights[l]) if l else None
            torch.bmm(dz.transpose(1, 2), below[l], out=grads[2 * l])
            torch.sum(dz, 1, out=grads[2 * l + 1])
            if dh is not None:
                dz = acts[l - 1][1](dh, below[l], torch.empty_like(dh))
        return G, losses
