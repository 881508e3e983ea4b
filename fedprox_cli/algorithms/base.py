"""The algorithm interface and the environment a round runs in: the stable public API that a
plugin algorithm (:mod:`fedprox_cli.common.registry`, examples/fedprox_server) implements.

An :class:`Algorithm` is a kw-only dataclass whose fields are its parameters (the YAML's keys
besides ``name``; their ranges declared on the fields, :mod:`fedprox_cli.common.ranges`:
a float that declares none is a step size, > 0), with class attributes ``name``, ``display_name``
(as the papers print it; default ``name``),
``partial_participation``, ``takes_compressor`` and ``smooth_only`` (what it is defined for:
anything else is refused before training), and

- ``init(z0, n)`` -> the state (:data:`State`): a dict of tensors (saved whole in
  checkpoints; the server model under ``"z"`` unless ``output`` says otherwise);
- ``round(state, env, t)`` -> the next state (a new dict; tensors may be updated in place).
  Everything a round needs from the run goes through ``env``; it draws no random numbers of
  its own (mini-batches, participating clients and compressors are keyed by (seed, t, k));
- ``output(state)`` -> the model x evaluated; ``stationarity_step(K)`` -> s of G_s(x);
  ``prox_steps(K, T)`` -> each prox parameter by name (checked against 1/rho of h).

An algorithm never touches modules, data loaders or devices. ``round(state, env, t)`` sees:

- ``env.grad(X, t, k, out=None)``: stochastic gradients at the rows of X (one row per
  participating client), written into ``out`` if given; ``env.sgd_steps(X, t, beta, shift)``:
  K corrected SGD steps on the rows of X in place, fused client by client;
  ``env.local_steps(X, t, at, update)``: K steps whose gradients are taken at ``at(rows, k)``
  and whose update ``update(rows, G, slice, k)`` reads each row's own numbers only, client by
  client (or chunk by chunk) too;
- ``env.prox(v, step, copies=1)``: prox_{step h}(v), counted per vector (a row = one client's
  call; ``copies`` = how many parties compute the same vector, computed once; step 0 = identity);
- ``env.up(V)``: client-to-server messages (rows), compressed by the run's uplink compressor
  (identity unless the algorithm takes one), bytes counted;
- ``env.down(*vectors)``: a server broadcast to every participating client, bytes counted;
- ``env.clients``: the participating clients' ids this round; ``env.n``, ``env.K``, ``env.T``.

The counters make the per-round communication and prox accounting a fact of the code as
written, which tests compare with the table in docs/algorithms.md: ``grad_evals`` counts one per
row of every ``grad`` call (``sgd_steps``: K per row); ``bytes_up`` what the compressor says a
row ``up`` costs (4 per dense float); ``bytes_down`` 4 per float of ``down`` per participating
client; ``prox_calls`` rows times ``copies`` of every ``prox`` call. A message the algorithm
sends without ``up``/``down`` is not counted: route every one through them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from numbers import Integral
from typing import Any, ClassVar, Generic, TypeAlias, TypeVar, cast

import torch

from ..common import ranges
from ..common.draws import generator, stream_seed, to_device
from ..common.plugin_calls import calling, returned
from ..common.registry import Registry, class_contract
from ..engine.base import At, Update
from ..engine.oracle import Oracle
from ..operators.compressors import DENSE_BYTES, Compressor
from ..operators.regularizers import Regularizer

State: TypeAlias = dict[str, torch.Tensor | float]
"""An algorithm's state: tensors by name (a plain number where one suffices, e.g. FedDA's
elapsed step), saved whole in checkpoints. Each shipped algorithm types its own as a
``TypedDict`` (``Algorithm[FedCanonState]``), so that a key's typo is a type error."""

S = TypeVar("S", bound=Mapping[str, Any])


@dataclass(kw_only=True)
class Algorithm(Generic[S]):
    """Base class: subclasses are kw-only dataclasses whose fields are the paper's parameters
    (each in its declared range, :mod:`fedprox_cli.common.ranges`); docs/extending.md lists the
    whole interface."""

    name: ClassVar[str]
    display_name: ClassVar[
        str
    ]  # the method's name as the papers print it (FedCanon, ZA1); default: name
    partial_participation: ClassVar[bool] = False  # defines rounds over a client subset
    takes_compressor: ClassVar[bool] = False  # defines a compressed uplink
    smooth_only: ClassVar[bool] = False  # defined for h = 0 only

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if (
            "display_name" not in cls.__dict__
        ):  # a class that declares none is named by its config name
            cls.display_name = str(cls.__dict__.get("name", getattr(cls, "name", cls.__name__)))

    def init(self, z0: torch.Tensor, n: int) -> S:
        raise NotImplementedError

    def round(self, state: S, env: Env, t: int) -> S:
        raise NotImplementedError

    def output(self, state: S) -> torch.Tensor:
        """The model evaluated (default: the server state z)."""
        return cast(torch.Tensor, state["z"])

    def prox_steps(self, K: int, T: int) -> dict[str, float]:
        """The largest value each prox parameter takes over T rounds, by name (validated
        against 1/rho of h before training)."""
        return {}

    def stationarity_step(self, K: int) -> float:
        """The step s of the proximal gradient mapping G_s reported as ``stationarity``."""
        raise NotImplementedError


register, names, lookup, build = (
    _REGISTRY := Registry[type[Algorithm[Any]]](
        "algorithm",
        "algorithms",
        class_contract(
            Algorithm,
            ("init", "round", "stationarity_step"),
            ("partial_participation", "takes_compressor", "smooth_only"),
        ),
        lambda alg: ranges.check(alg, "algorithm"),
    )
).calls()


class Env:
    """Oracle, counted prox and counted links for one run (see module docstring)."""

    def __init__(
        self,
        oracle: Oracle,
        h: Regularizer,
        compressor: Compressor,
        n: int,
        K: int,
        T: int,
        participation: float = 1.0,
        seed: int = 0,
    ) -> None:
        self.oracle, self.h, self.compressor = oracle, h, compressor
        self.n, self.K, self.T = n, K, T
        self.participation, self.seed = participation, seed
        self.m = max(1, round(participation * n))
        self.device = oracle.device
        self.bytes_up = self.bytes_down = self.prox_calls = 0
        self.clients = torch.arange(n, device=self.device)
        self.t = 0

    def start_round(self, t: int) -> None:
        """Draw round t's participating clients (all of them at participation 1)."""
        self.t = t
        if self.m < self.n:
            drawn = torch.randperm(self.n, generator=generator(self.seed, t, -1))[: self.m]
            self.clients = to_device(drawn.sort().values, self.device)

    def grad(
        self, X: torch.Tensor, t: int, k: int, out: torch.Tensor | None = None
    ) -> torch.Tensor:
        """G(X); written into ``out`` if given (see :meth:`Oracle.grad`)."""
        return self.oracle.grad(X, t, k, self.clients, out)[0]

    def sgd_steps(
        self, X: torch.Tensor, t: int, beta: float, shift: torch.Tensor | float = 0.0
    ) -> torch.Tensor:
        """K corrected SGD steps X <- X - beta (G(X) + shift) in place (see
        :meth:`Oracle.sgd_steps`)."""
        return self.oracle.sgd_steps(X, t, self.K, beta, shift, self.clients)

    def local_steps(self, X: torch.Tensor, t: int, at: At, update: Update) -> torch.Tensor:
        """K local steps on the rows of X in place: step k takes the gradients at
        ``at(rows, k)`` and calls ``update(rows, G, slice, k)`` (see
        :meth:`Oracle.local_steps`): for updates of each row by its own numbers alone."""
        return self.oracle.local_steps(X, t, self.K, at, update, self.clients)

    def prox(self, v: torch.Tensor, step: float, copies: int = 1) -> torch.Tensor:
        """prox_{step h}(v), counted once per row of v times ``copies`` (parties that compute
        the same vector, e.g. every client and the server); prox_0 is the identity."""
        self.prox_calls += copies * (1 if v.dim() == 1 else v.shape[0])
        return v if step == 0 else self.h.prox(v, step)

    def up(self, V: torch.Tensor) -> torch.Tensor:
        """The uplink: the rows of V as the server receives them (the run's compressor; its
        bytes counted)."""
        with calling(self.compressor, "compressor", "__call__(V, seed)"):
            sent = self.compressor(V, stream_seed(self.seed, self.t, -2))
        ok = (
            isinstance(sent, tuple)
            and len(sent) == 2
            and torch.is_tensor(sent[0])
            and sent[0].shape == V.shape
        )
        out: torch.Tensor
        out, nbytes = returned(
            self.compressor,
            "compressor",
            "__call__(V, seed)",
            sent,
            ok and isinstance(sent[1], Integral) and sent[1] >= 0,
            f"(a tensor of V's shape {tuple(V.shape)}, bytes as an int >= 0)",
        )
        self.bytes_up += nbytes
        return out

    def down(self, *vectors: torch.Tensor, scalars: int = 0) -> None:
        """Count the broadcast of ``vectors`` and of ``scalars`` host numbers (sent as they are:
        making a device tensor of one would synchronize the host with the device)."""
        self.bytes_down += (
            DENSE_BYTES * len(self.clients) * (sum(v.numel() for v in vectors) + scalars)
        )
