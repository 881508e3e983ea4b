"""One client's gradient on a dense network written out by hand, without autograd: the loop
engine's path for ``Sequential(Flatten(), Linear, (ReLU | Sigmoid, Linear)*)`` -- the models
``linear``, ``mlp`` and ``sigmoid_mlp``.

With autograd, most of such a step's time went to what surrounds its few matrix products
(docs/performance.md, "Per-op account of a local step"): the graph's bookkeeping, a fresh tensor
for every activation, gradient and gathered mini-batch, a copy of each gradient into its row.
:class:`DenseNet` runs the kernels autograd runs for this model, in its order and on the same
operands -- ``addmm`` forward, ``_log_softmax``, the ``gather`` backward's ``scatter_add_``
into zeros, ``_log_softmax_backward_data``, ``mm(dz.t(), h)`` for a weight, ``dz.sum(0)`` for a
bias, ``mm(dz, W)`` and ``threshold_backward`` / ``sigmoid_backward`` for the layer below
(torch's ``mm_mat1_backward`` / ``mm_mat2_backward`` for ``linear``'s ``addmm`` with a
transposed weight) -- into buffers allocated once per mini-batch size, a client's K
mini-batches gathered in one call and the loss's gradient w.r.t. the log-softmax made for all K
at once (it reads no parameter), the gradient written straight into its destination: the same
numbers, bit for bit (``tests/test_dense.py``).

Any other module -- other layers, these layers' subclasses, a plugin's own ``forward`` --
goes through autograd.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn

from .base import nll
from .models import FlatModel

Backward = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
"""An activation's backward (grad of its output, its output, out) -> grad of its input."""

ACTIVATIONS: dict[type[nn.Module], tuple[Callable[[torch.Tensor], torch.Tensor], Backward]] = {
    nn.ReLU: (
        torch.relu_,
        lambda g, a, out: torch.ops.aten.threshold_backward.grad_input(g, a, 0, grad_input=out),
    ),
    nn.Sigmoid: (
        torch.sigmoid_,
        lambda g, a, out: torch.ops.aten.sigmoid_backward.grad_input(g, a, grad_input=out),
    ),
}


def dense_activations(module: nn.Module) -> list[type[nn.Module]] | None:
    """The activations between the linear layers of ``module`` where it is exactly
    ``Sequential(Flatten(), Linear, (ReLU | Sigmoid, Linear)*)`` (these classes themselves,
    the linear layers with biases), else None."""
    if type(module) is not nn.Sequential or len(module) < 2:
        return None
    flatten, *body = list(module)
    if type(flatten) is not nn.Flatten or (flatten.start_dim, flatten.end_dim) != (1, -1):
        return None
    linears, acts = body[0::2], body[1::2]
    if len(body) % 2 != 1 or any(type(m) is not nn.Linear or m.bias is None for m in linears):
        return None
    if any(type(a) not in ACTIVATIONS for a in acts):
        return None
    return [type(a) for a in acts]


ALIGN = 64
"""Bytes to which the CPU allocator aligns a tensor. A float32 product's last bits depend on
where its operands and its result start (here: an input or a result off a 16-byte boundary
sums in another order for some shapes, e.g. a (2, 30) weight's gradient: docs/performance.md),
so every product reads and writes tensors that start where autograd's do: a client's
mini-batches gathered in one call are taken as one buffer only where every one of them starts
so aligned, as a mini-batch gathered alone does; parameters are read from a row only where it
starts so aligned, as the working buffer autograd reads does (:meth:`LoopEngine._row`); a
gradient is written into its destination only where that starts so aligned, as autograd's
fresh gradient does, else into a buffer of its own and copied (:meth:`DenseNet.step`)."""

GATHER_BYTES = 16 * 2**20
"""The most input bytes of one client's K mini-batches gathered in one call (K up to 83 at
B = 64 on MNIST's shape); beyond, each step gathers its own, so that the buffer stays one
mini-batch's (e.g. ``B=full``: a client's whole data at every step)."""


class DenseNet:
    """Gradients of one client's weighted loss on a dense network (module docstring), its
    mini-batches gathered from the training set ``x``, ``y`` into buffers of its own:
    :meth:`gather` takes all of a client's K mini-batches at once, :meth:`step` the gradient
    on the k-th of them (one ``index_select`` of K B rows per client instead of one per step,
    and no loss where no one reads it); :meth:`grad` is both for one mini-batch."""

    def __init__(
        self, model: FlatModel, acts: Sequence[type[nn.Module]], x: torch.Tensor, y: torch.Tensor
    ) -> None:
        self.acts = [ACTIVATIONS[a] for a in acts]
        self.x, self.y = x, y
        self.widths = [s[0] for s in model.shapes[0::2]]  # each linear layer's outputs
        self._b = -1  # the mini-batch size the buffers are allocated for
        self._rows = self._input_rows = self._slot_b = 0  # what the gather buffers hold
        self.row_bytes = x[0].numel() * x.element_size()
        self.ids: torch.Tensor | None = None  # the ids (K, b) each step gathers, or None
        self._transposed_of: Sequence[torch.Tensor] | None = None  # see _transposed
        self._aligned_of: Sequence[torch.Tensor] | None = None  # see _aligned

    def _new(self, *shape: int, dtype: torch.dtype | None = None) -> torch.Tensor:
        return torch.empty(*shape, dtype=dtype or self.x.dtype, device=self.x.device)

    def _buffers(self, b: int) -> None:
        """The buffers of a mini-batch of ``b`` samples (allocated again only for another b)."""
        if b == self._b:
            return
        new, classes = self._new, self.widths[-1]
        self.outs = [new(b, o) for o in self.widths]  # z_l, activated in place (but the logits)
        self.dz = [new(b, o) for o in self.widths]  # gradients of the pre-activations
        self.dz_t = [d.t() for d in self.dz]
        self.dh = [new(b, o) for o in self.widths[:-1]]  # gradients of the activations
        self.lsm = new(b, classes)
        self._b = b

    def gather(self, ids: torch.Tensor, w: torch.Tensor) -> None:
        """Gather one client's mini-batches: sample ids (K, b) and weights (K, b), step k's in
        row k; the samples' inputs in one call where each mini-batch's start stays aligned
        (:data:`ALIGN`) and they fit :data:`GATHER_BYTES`, else each at its :meth:`step`."""
        K, b = ids.shape
        self._buffers(b)
        at_once = K == 1 or (
            (b * self.row_bytes) % ALIGN == 0 and K * b * self.row_bytes <= GATHER_BYTES
        )
        input_rows = K * b if at_once else b
        if b != self._slot_b or K * b > self._rows or input_rows > self._input_rows:
            self._slots(K, b, input_rows)
        flat = ids.reshape(-1)
        self.ids = None if at_once else ids
        if at_once:
            torch.index_select(self.x, 0, flat, out=self.all_inputs[: K * b])
        targets = torch.index_select(self.y, 0, flat, out=self.all_targets[: K * b].view(-1))
        neg_w = torch.neg(w.reshape(-1, 1), out=self.all_neg_w[: K * b])
        # the loss's gradient w.r.t. the log-softmax: -w_s at y_s, else 0 (it reads no parameter)
        self.all_dlsm[: K * b].zero_().scatter_add_(1, targets.view(-1, 1), neg_w)

    def _slots(self, K: int, b: int, input_rows: int) -> None:
        """Buffers for K mini-batches of b samples (the inputs of ``input_rows`` of them), and
        each mini-batch's views of them (made once, not per step)."""
        new = self._new
        self.all_inputs = new(input_rows, *self.x.shape[1:])
        self.all_targets = new(K * b, 1, dtype=self.y.dtype)
        self.all_neg_w = new(K * b, 1)
        self.all_dlsm = new(K * b, self.widths[-1])
        rows = [slice(k * b, (k + 1) * b) for k in range(K)]
        self.input_slots = [self.all_inputs[r].view(b, -1) for r in rows[: input_rows // b]]
        self.target_slots = [self.all_targets[r] for r in rows]
        self.dlsm_slots = [self.all_dlsm[r] for r in rows]
        self._rows, self._input_rows, self._slot_b = K * b, input_rows, b

    def step(self, params: Sequence[torch.Tensor], k: int, grads: Sequence[torch.Tensor]) -> None:
        """The gradient of ``sum_s w_s CE(model(x_s), y_s)`` over the k-th mini-batch of the
        last :meth:`gather` at the parameters ``params`` (weight, bias, weight, ... : views),
        written into ``grads`` (views of the same shapes)."""
        if self.ids is None:
            h = self.input_slots[k]
        else:  # into the first mini-batch's buffer, aligned as the allocator aligns it
            torch.index_select(self.x, 0, self.ids[k], out=self.all_inputs[: self._b])
            h = self.input_slots[0]
        self.targets = self.target_slots[k]
        outs, dz, dz_t, acts = self.outs, self.dz, self.dz_t, self.acts
        weights_t = self._transposed(params)
        grads = self._aligned(grads)
        below = [h, *outs]  # each layer's input
        for l, z in enumerate(outs):
            torch.addmm(params[2 * l + 1], below[l], weights_t[l], out=z)
            if l < len(acts):
                acts[l][0](z)
        torch._log_softmax(outs[-1], -1, False, out=self.lsm)
        torch._log_softmax_backward_data(
            self.dlsm_slots[k], self.lsm, -1, self.lsm.dtype, out=dz[-1]
        )
        for l in range(len(outs) - 1, -1, -1):
            torch.mm(dz_t[l], below[l], out=grads[2 * l])
            torch.sum(dz[l], 0, out=grads[2 * l + 1])
            if l:
                torch.mm(dz[l], params[2 * l], out=self.dh[l - 1])
                acts[l - 1][1](self.dh[l - 1], outs[l - 1], dz[l - 1])
        for dest, g in self._copies:
            dest.copy_(g)

    def _aligned(self, grads: Sequence[torch.Tensor]) -> Sequence[torch.Tensor]:
        """Where :meth:`step` computes each gradient of ``grads``: the view itself where it
        starts on :data:`ALIGN`, else a buffer of its own, copied into the view after the
        step (:attr:`_copies`; made again only for another ``grads`` object: local SGD passes
        the same views at every step)."""
        if grads is not self._aligned_of:
            self._aligned_to = [
                g if g.data_ptr() % ALIGN == 0 else torch.empty_like(g) for g in grads
            ]
            self._copies = [(g, a) for g, a in zip(grads, self._aligned_to) if a is not g]
            self._aligned_of = grads
        return self._aligned_to

    def _transposed(self, params: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """The weights of ``params`` transposed (views), made again only for another
        ``params`` object: a client's local SGD steps pass the same views at every step."""
        if params is not self._transposed_of:
            self._weights_t = [w.t() for w in params[0::2]]
            self._transposed_of = params
        return self._weights_t

    def grad(
        self,
        params: Sequence[torch.Tensor],
        ids: torch.Tensor,
        w: torch.Tensor,
        grads: Sequence[torch.Tensor],
    ) -> None:
        """:meth:`step` on the one mini-batch of sample ids ``ids`` (b,), weights ``w`` (b,)."""
        self.gather(ids[None], w[None])
        self.step(params, 0, grads)

    def loss(self, w: torch.Tensor) -> torch.Tensor:
        """The weighted loss of the last :meth:`grad`'s mini-batch (its weights ``w``)."""
        return nll(self.lsm, self.targets.view(-1), w)
