"""The gradient oracle: the only place that knows the model and the data.

Client states are rows of one tensor X (m, d). ``Oracle.grad(X, t, k, clients)`` returns the
stochastic gradients g_i(x_i) of the listed clients at local step k of round t, each on its own
mini-batch of B samples; ``Oracle.full(x)`` returns the exact f(x) and grad f(x) with
f = (1/n) sum_i f_i (f_i the mean loss over client i's samples).

Mini-batches: B draws, uniform with replacement, from the client's own samples (the i.i.d.
sampling of the papers' analyses). The draws of step (t, k) come from a CPU generator seeded by
(seed, t, k) and are made for all n clients at once, then moved to the device and the listed
clients' rows are taken: results do not depend on the engine, client order, chunking,
participation, resumption or the device (see :mod:`device`).
``B = None`` ("full") gives exact local gradients.

Engines:

- ``loop`` evaluates one client after another with plain autograd on a private copy of the
  module whose parameters are views of one flat buffer (loading x_i is one copy; no per-call
  re-parametrization);
- ``vmap`` evaluates chunks of clients at once with ``torch.func.vmap(grad_and_value(...))`` of
  the loss of a flat parameter vector; the gradient comes out as one (chunk, d) tensor. (A
  vmapped forward with one plain backward of the summed losses measured 10% slower on the MLP:
  its weight gradients come out transposed.)
- ``auto`` times both on the run's model, shapes and device at start-up and caches the choice
  (:mod:`engine_choice`); ``Oracle.engine_choice`` records it.

``compile`` (true | false | auto) compiles the vmap engine's batched call with torch.compile
(:mod:`compile_choice`; ``client_steps``, the run's planned client-steps, weighs the compile
time for ``auto``); ``Oracle.compile_choice`` records it.

Nothing in
``grad`` reads a tensor value on the host, so on CUDA a round runs without host synchronization.
"""

from __future__ import annotations

import copy
import ctypes
import functools
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from . import compile as compile_choice, choice as engine_choice
from .batched import batched_grad
from ..common.draws import generator, to_device
from ..common.errors import require
from .models import FlatModel

ENGINES = ("loop", "vmap", "auto")


@dataclass
class ClientData:
    """The training set on the compute device, and the clients' index table."""
    x: torch.Tensor        # (N, *input_shape)
    y: torch.Tensor        # (N,)
    index: torch.Tensor    # (n, m_max) int64, row i = client i's sample ids, padded with its first
    sizes: torch.Tensor    # (n,) int64

    @classmethod
    def build(cls, x, y, clients: list[np.ndarray], device) -> "ClientData":
        sizes = torch.tensor([len(c) for c in clients], dtype=torch.int64)
        index = torch.zeros(len(clients), int(sizes.max()), dtype=torch.int64)
        for i, c in enumerate(clients):
            index[i] = torch.as_tensor(np.resize(c, index.shape[1]))
        return cls(x.to(device), y.to(device), index.to(device), sizes.to(device))

    @property
    def n(self) -> int:
        return len(self.sizes)

    def sample_weights(self, samples: int | None = None, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """(ids, w) with f = sum_s w_s l_s: every assigned sample id with weight 1/(n |D_i|); or,
        with ``samples`` < N, a fixed subset drawn without replacement and stratified by client
        (m_i = max(1, round(samples |D_i| / N)) ids of client i, weight 1/(n m_i)), on which
        sum_s w_s l_s is an unbiased estimate of f."""
        sizes = self.sizes
        if samples is None or samples >= int(sizes.sum()):
            m, order = sizes, self.index
        else:
            m = (samples * sizes / sizes.sum()).round().long().clamp(1)
            m = torch.minimum(m, sizes)
            gen = torch.Generator(device="cpu").manual_seed(seed)
            keys = torch.rand(self.index.shape, generator=gen).to(self.index.device)
            pos = torch.arange(self.index.shape[1], device=self.index.device)
            keys[pos >= sizes[:, None]] = 2.0  # padding sorts last
            order = self.index.gather(1, keys.argsort(dim=1))
        mask = torch.arange(self.index.shape[1], device=self.index.device) < m[:, None]
        w = (1.0 / (self.n * m.to(self.x.dtype)))[:, None].expand_as(self.index)[mask]
        return order[mask], w


def cross_entropy(logits: torch.Tensor, y: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """sum_s w_s CE(logits_s, y_s), with CE_s = -log_softmax(logits_s)[y_s] taken by ``gather``:
    the numbers of ``F.cross_entropy(..., reduction="none")`` and of its gradient, bit for bit,
    but under vmap without ``nll_loss``'s Python decomposition (whose first call imports sympy
    and some 480 other modules, ~0.7 s here, and which is Python work in every call)."""
    return (w * -torch.log_softmax(logits, -1).gather(-1, y.unsqueeze(-1)).squeeze(-1)).sum()


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


def shifted(g: torch.Tensor, s: torch.Tensor | float) -> torch.Tensor:
    """``g + s`` in place; ``g`` itself for the shift 0.0 (FedAvg's): one pass over the
    gradient fewer per step, with the same numbers."""
    return g if isinstance(s, float) and s == 0.0 else g.add_(s)


@functools.cache
def keep_freed_memory() -> None:
    """Have glibc serve every allocation from its heap and keep freed memory there, instead of
    mapping large blocks fresh and unmapping them on free: a round allocates and frees several
    (n, d) tensors per local step, and re-faulting their pages made a fresh elementwise op on
    (10, 199210) floats up to 10x slower than one into reused memory on this machine (the
    effect PyTorch's CPU tuning guide fixes with jemalloc/tcmalloc). The heap is never trimmed
    (M_TRIM_THRESHOLD = -1, i.e. unlimited): with a 1 GB threshold, n = 1000 MLP rounds still
    gave their freed (n, d) blocks back and faulted them in again (~0.6 s per GB here). The
    process keeps its peak memory until it exits. No effect where the C library is not glibc."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return
    M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4
    libc.mallopt(M_MMAP_MAX, 0)
    libc.mallopt(M_TRIM_THRESHOLD, -1)


class Oracle:
    def __init__(self, model: FlatModel, data: ClientData, B: int | None, seed: int,
                 engine: str = "vmap", chunk: int | None = None, eval_batch: int = 4096,
                 train_samples: int | None = None, compile: bool | str = False,
                 client_steps: int | None = None):
        require(engine in ENGINES, f"engine must be one of {', '.join(ENGINES)}, got '{engine}'")
        self.model, self.data, self.B, self.seed = model, data, B, seed
        self.device = data.x.device
        self._sizes = data.sizes.cpu()  # for drawing mini-batch positions on the CPU
        if self.device.type == "cpu":
            keep_freed_memory()
        self.chunk = chunk or data.n
        self.eval_batch = eval_batch
        self.grad_evals = 0  # stochastic (mini-batch) gradients computed so far
        self._work = FlatModule(model)
        self._batched_grad = batched_grad(self._flat_loss)
        self._eager_grad = self._batched_grad  # until compiled (compile) or joined (join)
        self._param_grads = batched_grad(self._param_loss)
        self.engine = engine
        self.engine_choice = engine_choice.choose(self, engine)  # engine, how chosen, timings
        self.engine = self.engine_choice["engine"]
        self.compile_choice = compile_choice.choose(self, compile, client_steps)
        self._eval_ids, self._eval_w = data.sample_weights(train_samples, seed)

    def join(self, lockstep) -> None:
        """Make this oracle's vmap calls through a :class:`lockstep.Lockstep` (the engine must
        be vmap): inside its rounds they are computed together with the other runs' calls."""
        require(self.engine == "vmap", "seed-batched runs compute their gradients with the vmap engine")
        self._batched_grad = lockstep.member(self._batched_grad)

    def _flat_loss(self, x, inputs, targets, weights):
        return self._param_loss(self.model.params(x), inputs, targets, weights)

    def _param_loss(self, params, inputs, targets, weights):
        return cross_entropy(self.model.apply(params, inputs), targets, weights)

    def batch_ids(self, t: int, k: int, clients: torch.Tensor) -> torch.Tensor:
        """Sample ids (m, B) of the listed clients' mini-batches at local step k of round t:
        positions drawn on the CPU for all n clients (the same on every device), then moved to
        the device and looked up in the clients' index table there."""
        u = torch.rand(self.data.n, self.B, generator=generator(self.seed, t, k))
        pos = (u * self._sizes[:, None]).long().clamp_max_(self._sizes[:, None] - 1)
        return self.data.index.gather(1, to_device(pos, self.device))[clients]

    def _batches(self, t, k, clients):
        """(ids, weights) of shape (m, b): mini-batches, or each client's full data."""
        if self.B is not None:
            ids = self.batch_ids(t, k, clients)
            return ids, torch.full(ids.shape, 1.0 / self.B, dtype=self.data.x.dtype, device=self.device)
        ids = self.data.index[clients]
        sizes = self.data.sizes[clients]
        valid = torch.arange(ids.shape[1], device=self.device) < sizes[:, None]
        return ids, valid.to(self.data.x.dtype) / sizes[:, None].to(self.data.x.dtype)

    def _samples(self, ids: torch.Tensor):
        """Inputs and targets of the sample ids (any shape), gathered in one call each."""
        flat = ids.reshape(-1)
        x = self.data.x.index_select(0, flat).view(*ids.shape, *self.data.x.shape[1:])
        return x, self.data.y.index_select(0, flat).view(ids.shape)

    def grad(self, X: torch.Tensor, t: int, k: int, clients: torch.Tensor | None = None,
             out: torch.Tensor | None = None):
        """Stochastic gradients G (m, d) at the rows of X and the batch losses (m,). With
        ``out`` (an (m, d) tensor), G is written there: a local loop that passes the same
        buffer every step allocates no (m, d) tensor per step (a fresh one page-faults its
        memory in whenever the heap has to grow: ~0.6 s per GB here)."""
        if clients is None:
            clients = torch.arange(self.data.n, device=self.device)
        ids, w = self._batches(t, k, clients)
        self.grad_evals += len(clients)
        inputs, targets = self._samples(ids)
        if self.engine == "vmap" and out is None and self.chunk >= len(clients):
            return self._batched_grad(X, inputs, targets, w)  # one call: its output is G
        G = torch.empty_like(X) if out is None else out
        L = X.new_empty(len(clients))
        if self.engine == "vmap":
            for s in range(0, len(clients), self.chunk):
                e = s + self.chunk
                G[s:e], L[s:e] = self._batched_grad(X[s:e], inputs[s:e], targets[s:e], w[s:e])
            return G, L
        for i in range(len(clients)):
            self._work.load(X[i])
            L[i], grads = self._module_grad(inputs[i], targets[i], w[i])
            for g, gi in zip(self.model.params(G[i]).values(), grads):
                g.copy_(gi)
        return G, L

    def sgd_steps(self, X: torch.Tensor, t: int, K: int, beta: float,
                  shift: torch.Tensor | float = 0.0, clients: torch.Tensor | None = None) -> torch.Tensor:
        """K corrected SGD steps on the rows of X, in place: x_i <- x_i - beta (g_i(x_i) + s_i)
        at steps k = 0..K-1 of round t, with ``shift`` s a scalar, one row (d,) or rows (m, d).
        The same mini-batches and arithmetic as K calls of :meth:`grad` with the update after
        each, but client by client (``loop``: x_i stays in the working module for its K steps,
        updated through its parameter views) or chunk by chunk (``vmap``), so a client's state,
        gradient and shift are updated while they are in cache, with no (m, d) temporaries."""
        if clients is None:
            clients = torch.arange(self.data.n, device=self.device)
        batches = [self._batches(t, k, clients) for k in range(K)]
        self.grad_evals += K * len(clients)
        rows = torch.is_tensor(shift) and shift.dim() == 2
        if self.engine == "vmap":
            by_parameter = self._batched_grad is self._eager_grad  # neither compiled nor joined
            for a in range(0, len(clients), self.chunk):
                e = a + self.chunk
                Xc, Sc = X[a:e], shift[a:e] if rows else shift
                for ids, w in batches:
                    inputs, targets = self._samples(ids[a:e])
                    if by_parameter:
                        self._param_steps(Xc, Sc, inputs, targets, w[a:e], beta)
                    else:
                        Xc.sub_(shifted(self._batched_grad(Xc, inputs, targets, w[a:e])[0], Sc), alpha=beta)
            return X
        for i in range(len(clients)):
            si = shift[i] if rows else shift
            s_views = self.model.params(si).values() if torch.is_tensor(si) else [si] * len(self._work.params)
            self._work.load(X[i])
            for ids, w in batches:
                inputs, targets = self._samples(ids[i])
                _, grads = self._module_grad(inputs, targets, w[i])
                with torch.no_grad():
                    for p, g, sp in zip(self._work.params, grads, s_views):
                        p.sub_(shifted(g, sp), alpha=beta)
            X[i].copy_(self._work.w)
        return X

    def _param_steps(self, Xc, Sc, inputs, targets, w, beta: float) -> None:
        """One step ``Xc <- Xc - beta (G + Sc)`` with the gradient taken parameter by parameter
        (vmap over the rows' parameter views) and applied to those views: the numbers of the
        flat gradient's step, bit for bit, without concatenating the parameters' gradients
        into an (m, d) tensor (~15% of a step of the MLP here)."""
        views = self.model.params(Xc)
        shifts = self.model.params(Sc) if torch.is_tensor(Sc) else dict.fromkeys(views, Sc)
        grads, _ = self._param_grads(views, inputs, targets, w)
        for name, view in views.items():
            view.sub_(shifted(grads[name], shifts[name]), alpha=beta)

    def _module_grad(self, inputs, targets, weights):
        """Loss and parameter gradients of the working module (loaded beforehand)."""
        loss = cross_entropy(self._work.module(inputs), targets, weights)
        return loss.detach(), torch.autograd.grad(loss, self._work.params)

    def full(self, x: torch.Tensor, with_grad: bool = True):
        """f(x) = (1/n) sum_i f_i(x) and grad f(x) (or None), exact over all training data (or
        estimated on the fixed ``train_samples`` subset): one forward (and backward) pass per
        ``eval_batch`` samples."""
        self._work.load(x)
        loss = x.new_zeros(())
        g = torch.zeros_like(x) if with_grad else None
        for s in range(0, len(self._eval_ids), self.eval_batch):
            inputs, targets = self._samples(self._eval_ids[s:s + self.eval_batch])
            w = self._eval_w[s:s + self.eval_batch]
            if with_grad:
                lc, grads = self._module_grad(inputs, targets, w)
                for acc, gc in zip(self.model.params(g).values(), grads):
                    acc.add_(gc)
            else:
                with torch.no_grad():
                    lc = cross_entropy(self._work.module(inputs), targets, w)
            loss += lc
        return loss, g

    @torch.no_grad()
    def test(self, x: torch.Tensor, test_x: torch.Tensor, test_y: torch.Tensor):
        """Mean loss and accuracy of the model x on a held-out set."""
        self._work.load(x)
        loss, correct = x.new_zeros(()), x.new_zeros(())
        for s in range(0, len(test_y), self.eval_batch):
            logits = self._work.module(test_x[s:s + self.eval_batch])
            yb = test_y[s:s + self.eval_batch]
            loss += F.cross_entropy(logits, yb, reduction="sum")
            correct += (logits.argmax(1) == yb).sum()
        return loss / len(test_y), correct / len(test_y)
