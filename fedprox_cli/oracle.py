"""The gradient oracle: the only place that knows the model and the data.

Client states are rows of one tensor X (m, d). ``Oracle.grad(X, t, k, clients)`` returns the
stochastic gradients g_i(x_i) of the listed clients at local step k of round t, each on its own
mini-batch of B samples; ``Oracle.full(x)`` returns the exact f(x) and grad f(x) with
f = (1/n) sum_i f_i (f_i the mean loss over client i's samples).

Mini-batches: B draws, uniform with replacement, from the client's own samples (the i.i.d.
sampling of the papers' analyses). The draws of step (t, k) come from a generator seeded by
(seed, t, k) and are made for all n clients at once, then the listed clients' rows are taken:
results do not depend on the engine, client order, chunking, participation or resumption.
``B = None`` ("full") gives exact local gradients.

Engines: ``loop`` evaluates one client after another; ``vmap`` evaluates chunks of clients at
once with ``torch.func.vmap`` over ``functional_call``. Both compute the same function.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch.func import grad_and_value, vmap

from .errors import require
from .models import FlatModel

ENGINES = ("loop", "vmap", "auto")


def stream_seed(*key: int) -> int:
    """A 63-bit seed from an integer key, e.g. (seed, round, step)."""
    h = hashlib.blake2b(",".join(map(str, key)).encode(), digest_size=8).digest()
    return int.from_bytes(h, "little") & ((1 << 63) - 1)


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

    def sample_weights(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(ids, w): every assigned sample id with weight 1/(n |D_i|), so f = sum_s w_s l_s."""
        mask = torch.arange(self.index.shape[1], device=self.index.device) < self.sizes[:, None]
        ids = self.index[mask]
        w = (1.0 / (self.n * self.sizes.to(self.x.dtype)))[:, None].expand_as(self.index)[mask]
        return ids, w


def cross_entropy(logits: torch.Tensor, y: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """sum_s w_s CE(logits_s, y_s)."""
    return (w * F.cross_entropy(logits, y, reduction="none")).sum()


class Oracle:
    def __init__(self, model: FlatModel, data: ClientData, B: int | None, seed: int,
                 engine: str = "vmap", chunk: int | None = None, eval_batch: int = 4096):
        require(engine in ENGINES, f"engine must be one of {', '.join(ENGINES)}, got '{engine}'")
        self.model, self.data, self.B, self.seed = model, data, B, seed
        self.engine = "vmap" if engine == "auto" else engine
        self.chunk = chunk or data.n
        self.eval_batch = eval_batch
        self.device = data.x.device
        self.grad_evals = 0  # stochastic (mini-batch) gradients computed so far
        self._client_grad = grad_and_value(self._loss)
        self._batched_grad = vmap(self._client_grad)
        self._eval_ids, self._eval_w = data.sample_weights()

    def _loss(self, x, inputs, targets, weights):
        return cross_entropy(self.model(x, inputs), targets, weights)

    def batch_ids(self, t: int, k: int, clients: torch.Tensor) -> torch.Tensor:
        """Sample ids (m, B) of the listed clients' mini-batches at local step k of round t."""
        gen = torch.Generator(device=self.device).manual_seed(stream_seed(self.seed, t, k))
        u = torch.rand(self.data.n, self.B, generator=gen, device=self.device)
        pos = (u * self.data.sizes[:, None]).long().clamp_max_(self.data.sizes[:, None] - 1)
        return self.data.index.gather(1, pos)[clients]

    def _batches(self, t, k, clients):
        """(ids, weights) of shape (m, b): mini-batches, or each client's full data."""
        if self.B is not None:
            ids = self.batch_ids(t, k, clients)
            return ids, torch.full(ids.shape, 1.0 / self.B, dtype=self.data.x.dtype, device=self.device)
        ids = self.data.index[clients]
        sizes = self.data.sizes[clients]
        valid = torch.arange(ids.shape[1], device=self.device) < sizes[:, None]
        return ids, valid.to(self.data.x.dtype) / sizes[:, None].to(self.data.x.dtype)

    def grad(self, X: torch.Tensor, t: int, k: int, clients: torch.Tensor | None = None):
        """Stochastic gradients G (m, d) at the rows of X and the batch losses (m,)."""
        if clients is None:
            clients = torch.arange(self.data.n, device=self.device)
        ids, w = self._batches(t, k, clients)
        self.grad_evals += len(clients)
        if self.engine == "loop":
            out = [self._client_grad(X[i], self.data.x[ids[i]], self.data.y[ids[i]], w[i])
                   for i in range(len(clients))]
            return torch.stack([g for g, _ in out]), torch.stack([l for _, l in out])
        G, L = [], []
        for s in range(0, len(clients), self.chunk):
            sl = slice(s, s + self.chunk)
            g, l = self._batched_grad(X[sl], self.data.x[ids[sl]], self.data.y[ids[sl]], w[sl])
            G.append(g)
            L.append(l)
        return torch.cat(G), torch.cat(L)

    def full(self, x: torch.Tensor, with_grad: bool = True):
        """Exact f(x) = (1/n) sum_i f_i(x) over all training data, and grad f(x) (or None)."""
        loss = x.new_zeros(())
        g = torch.zeros_like(x) if with_grad else None
        for s in range(0, len(self._eval_ids), self.eval_batch):
            ids = self._eval_ids[s:s + self.eval_batch]
            args = (self.data.x[ids], self.data.y[ids], self._eval_w[s:s + self.eval_batch])
            if with_grad:
                gc, lc = self._client_grad(x, *args)
                g += gc
            else:
                with torch.no_grad():
                    lc = self._loss(x, *args)
            loss += lc
        return loss, g

    @torch.no_grad()
    def test(self, x: torch.Tensor, test_x: torch.Tensor, test_y: torch.Tensor):
        """Mean loss and accuracy of the model x on a held-out set."""
        loss, correct = x.new_zeros(()), x.new_zeros(())
        for s in range(0, len(test_y), self.eval_batch):
            logits = self.model(x, test_x[s:s + self.eval_batch])
            yb = test_y[s:s + self.eval_batch]
            loss += F.cross_entropy(logits, yb, reduction="sum")
            correct += (logits.argmax(1) == yb).sum()
        return loss / len(test_y), correct / len(test_y)
