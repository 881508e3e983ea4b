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

Engines (:class:`base.Engine`): ``loop`` (:mod:`loop`) evaluates one client after another,
``vmap`` (:mod:`vmap`) chunks of clients at once; ``auto`` times both on the run's model,
shapes and device at start-up -- rounds as ``probe`` runs them: the run's algorithm's (given
by the runs layer), else plain local SGD -- and caches the choice (:mod:`choice`). The engine
is chosen once, when the oracle is built (``Oracle.engine``); ``Oracle.engine_choice``
records how.

``compile`` (true | false | auto) compiles the vmap engine's batched call with torch.compile
(:mod:`compile`; ``client_steps``, the run's planned client-steps, weighs the compile time for
``auto``); ``Oracle.compile_choice`` records it.

Nothing in ``grad`` reads a tensor value on the host, so on CUDA a round runs without host
synchronization.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, overload

import torch
import torch.nn.functional as F

from ..common.draws import generator, to_device
from ..common.errors import UserError, require
from . import choice as engine_choice
from . import compile as compile_choice
from . import memory
from .base import At, Batch, Engine, Update, cross_entropy
from .client_data import ClientData
from .loop import FlatModule, LoopEngine
from .models import FlatModel
from .vmap import VmapEngine

if TYPE_CHECKING:
    from .lockstep import Lockstep

ENGINES = ("loop", "vmap", "auto")


class Oracle:
    """Gradients and losses of the clients' objectives (see module docstring)."""

    def __init__(
        self,
        model: FlatModel,
        data: ClientData,
        B: int | None,
        seed: int,
        engine: str = "vmap",
        chunk: int | None = None,
        eval_batch: int = 4096,
        train_samples: int | None = None,
        compile: bool | str = False,
        client_steps: int | None = None,
        probe: engine_choice.Probe | None = None,
    ) -> None:
        require(engine in ENGINES, f"engine must be one of {', '.join(ENGINES)}, got '{engine}'")
        self.model, self.data, self.B, self.seed = model, data, B, seed
        self.device = data.x.device
        self._sizes = data.sizes.cpu()  # for drawing mini-batch positions on the CPU
        if self.device.type == "cpu":
            memory.keep_freed_memory()
        self.chunk = chunk or data.n
        self.eval_batch = eval_batch
        self.grad_evals = 0  # stochastic (mini-batch) gradients computed so far
        self.work = FlatModule(
            model
        )  # the evaluation passes' (and the loop engine's) working module
        self.engines: dict[str, Engine] = {
            "loop": LoopEngine(model, data, self.work),
            "vmap": VmapEngine(model, data.samples, self.chunk, dense=self.device.type == "cpu"),
        }
        self.probe = probe or engine_choice.LocalSGD()  # the round engine=auto times
        self.engine: Engine = self.engines["vmap"]  # until chosen
        self.engine_choice = engine_choice.choose(self, engine)  # engine, how chosen, timings
        self.engine = self.engines[self.engine_choice["engine"]]
        self.compile_choice = compile_choice.choose(
            self, compile, client_steps
        )  # may compile vmap's call
        self._eval_ids, self._eval_w = data.sample_weights(train_samples, seed)

    def join(self, lockstep: Lockstep) -> None:
        """Make this oracle's vmap calls through a :class:`lockstep.Lockstep` (the engine must
        be vmap): inside its rounds they are computed together with the other runs' calls."""
        if not isinstance(self.engine, VmapEngine):
            raise UserError("seed-batched runs compute their gradients with the vmap engine")
        self.engine = self.engine.wrapped(lockstep.member)

    def batch_ids(self, t: int, k: int, clients: torch.Tensor) -> torch.Tensor:
        """Sample ids (m, B) of the listed clients' mini-batches at local step k of round t:
        positions drawn on the CPU for all n clients (the same on every device), then moved to
        the device and looked up in the clients' index table there."""
        assert self.B is not None  # mini-batches: batches() asks for them only with B set
        u = torch.rand(self.data.n, self.B, generator=generator(self.seed, t, k))
        pos = (u * self._sizes[:, None]).long().clamp_max_(self._sizes[:, None] - 1)
        return self.data.index.gather(1, to_device(pos, self.device))[clients]

    def batches(self, t: int, k: int, clients: torch.Tensor) -> Batch:
        """(ids, weights) of shape (m, b) at local step k of round t: mini-batches, or each
        client's full data."""
        if self.B is not None:
            ids = self.batch_ids(t, k, clients)
            return ids, torch.full(
                ids.shape, 1.0 / self.B, dtype=self.data.x.dtype, device=self.device
            )
        ids = self.data.index[clients]
        sizes = self.data.sizes[clients]
        valid = torch.arange(ids.shape[1], device=self.device) < sizes[:, None]
        return ids, valid.to(self.data.x.dtype) / sizes[:, None].to(self.data.x.dtype)

    def _listed(self, clients: torch.Tensor | None) -> torch.Tensor:
        return torch.arange(self.data.n, device=self.device) if clients is None else clients

    def grad(
        self,
        X: torch.Tensor,
        t: int,
        k: int,
        clients: torch.Tensor | None = None,
        out: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Stochastic gradients G (m, d) at the rows of X and the batch losses (m,). With
        ``out`` (an (m, d) tensor), G is written there: a local loop that passes the same
        buffer every step allocates no (m, d) tensor per step (a fresh one page-faults its
        memory in whenever the heap has to grow)."""
        clients = self._listed(clients)
        ids, w = self.batches(t, k, clients)
        self.grad_evals += len(clients)
        return self.engine.grad(X, ids, w, out)

    def sgd_steps(
        self,
        X: torch.Tensor,
        t: int,
        K: int,
        beta: float,
        shift: torch.Tensor | float = 0.0,
        clients: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """K corrected SGD steps on the rows of X, in place: x_i <- x_i - beta (g_i(x_i) + s_i)
        at steps k = 0..K-1 of round t, with ``shift`` s a scalar, one row (d,) or rows (m, d).
        The same mini-batches and arithmetic as K calls of :meth:`grad` with the update after
        each, but client by client or chunk by chunk (:meth:`base.Engine.sgd_steps`)."""
        clients = self._listed(clients)
        batches = [self.batches(t, k, clients) for k in range(K)]
        self.grad_evals += K * len(clients)
        self.engine.sgd_steps(X, batches, beta, shift)
        return X

    def local_steps(
        self, X: torch.Tensor, t: int, K: int, at: At, update: Update, clients: torch.Tensor | None
    ) -> torch.Tensor:
        """K local steps on the rows of X, in place: at step k of round t the gradients at
        ``at(rows, k)`` on step k's mini-batches, then ``update(rows, G, slice, k)``, client by
        client or chunk by chunk (:meth:`base.Engine.local_steps`): the numbers of K
        :meth:`grad` calls on all rows with the same updates after each."""
        clients = self._listed(clients)
        batches = [self.batches(t, k, clients) for k in range(K)]
        self.grad_evals += K * len(clients)
        self.engine.local_steps(X, batches, at, update)
        return X

    @overload
    def full(
        self, x: torch.Tensor, with_grad: Literal[True] = True
    ) -> tuple[torch.Tensor, torch.Tensor]: ...
    @overload
    def full(
        self, x: torch.Tensor, with_grad: bool
    ) -> tuple[torch.Tensor, torch.Tensor | None]: ...
    def full(
        self, x: torch.Tensor, with_grad: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """f(x) = (1/n) sum_i f_i(x) and grad f(x) (or None), exact over all training data (or
        estimated on the fixed ``train_samples`` subset): one forward (and backward) pass per
        ``eval_batch`` samples."""
        self.work.load(x)
        loss = x.new_zeros(())
        g = torch.zeros_like(x) if with_grad else None
        for s in range(0, len(self._eval_ids), self.eval_batch):
            inputs, targets = self.data.samples(self._eval_ids[s : s + self.eval_batch])
            w = self._eval_w[s : s + self.eval_batch]
            if g is not None:  # with_grad
                lc, grads = self.work.loss_grad(inputs, targets, w)
                for acc, gc in zip(self.model.params(g).values(), grads):
                    acc.add_(gc)
            else:
                with torch.no_grad():
                    lc = cross_entropy(self.work.module(inputs), targets, w)
            loss += lc
        return loss, g

    @torch.no_grad()
    def test(
        self, x: torch.Tensor, test_x: torch.Tensor, test_y: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean loss and accuracy of the model x on a held-out set."""
        self.work.load(x)
        loss, correct = x.new_zeros(()), x.new_zeros(())
        for s in range(0, len(test_y), self.eval_batch):
            logits = self.work.module(test_x[s : s + self.eval_batch])
            yb = test_y[s : s + self.eval_batch]
            loss += F.cross_entropy(logits, yb, reduction="sum")
            correct += (logits.argmax(1) == yb).sum()
        return loss / len(test_y), correct / len(test_y)
