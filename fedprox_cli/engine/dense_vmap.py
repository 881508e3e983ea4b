"""The vmap engine's batched gradient on a dense network written out by hand, without
``torch.func`` or autograd: the ``vmap`` engine's and the seed-batched runs' call for the
models ``linear``, ``mlp`` and ``sigmoid_mlp`` on the CPU (:func:`dense.dense_activations`).

Beside its products, ``vmap(grad_and_value(loss))`` of such a model spends about half a
millisecond per call on the transforms' Python and the graph (docs/performance.md, "The vmap
engine's dense networks by hand"). :class:`DenseVmap` runs the kernels the transform runs for
these models, in its order and on operands of the same shapes and strides: per layer ``bmm``
of the inputs with the transposed weights (views of the rows) and the bias added after the
product; ``_log_softmax``, the ``gather`` backward's ``scatter_add`` into zeros,
``_log_softmax_backward_data``; per layer ``bmm`` of the output gradient with the weights for
the layer below, ``bmm`` of its transpose with the layer's input for the weights, ``sum`` over
the samples for the bias, ``threshold_backward`` / ``sigmoid_backward``: the same numbers, bit
for bit (``tests/test_dense.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from .dense import ACTIVATIONS
from .models import FlatModel


class DenseVmap:
    """What ``vmap(grad_and_value(loss))`` gives for the dense network ``model`` with the
    activations ``acts``, at m rows of parameters, row i on its own mini-batch ``inputs[i]``
    (b, ...), ``targets[i]`` (b,), weights ``w[i]`` (b,): :meth:`param_grads` parameter by
    parameter (the engine's local steps), the call itself as one (m, d) tensor."""

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
        """The gradients (m, d) at the rows of X, concatenated into ``out`` where given, and
        the losses (m,)."""
        grads, losses = self.param_grads(self.model.params(X), inputs, targets, w)
        flat = [g.reshape(len(X), -1) for g in grads.values()]
        return torch.cat(flat, 1, out=out), losses

    def param_grads(
        self,
        params: dict[str, torch.Tensor],
        inputs: torch.Tensor,
        targets: torch.Tensor,
        w: torch.Tensor,
    ) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """The gradients (m, *shape) of the parameters ``params`` (weight (m, o, i), bias
        (m, o), ... : views of the rows), each a tensor of its own as the transform makes it
        (a product written into a strided view of a row may take another kernel), and the
        losses."""
        m, b = targets.shape
        tensors = list(params.values())
        weights, biases, acts = tensors[0::2], tensors[1::2], self.acts
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
        grads: list[torch.Tensor] = []
        for l in range(len(weights) - 1, -1, -1):
            dh = torch.bmm(dz, weights[l]) if l else None
            grads[:0] = [torch.bmm(dz.transpose(1, 2), below[l]), torch.sum(dz, 1)]
            if dh is not None:
                dz = acts[l - 1][1](dh, below[l], torch.empty_like(dh))
        return dict(zip(params, grads)), losses
