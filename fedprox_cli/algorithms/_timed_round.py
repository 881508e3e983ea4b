"""The round ``engine=auto`` times (registers nothing): the run's own algorithm, regularizer
and uplink, so that an engine is chosen by what a round costs with it -- its local steps and
the algorithm's corrections, prox calls and updates around them -- and not by a gradient step
alone (:mod:`fedprox_cli.engine.choice`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..engine.choice import PROBE_K, Timed
from ..engine.oracle import Oracle
from ..operators.compressors import Compressor
from ..operators.regularizers import Regularizer
from . import contract
from .base import Algorithm, Env


@dataclass(frozen=True)
class TimedRound:
    """Round 0 of ``alg`` (h and the uplink ``compressor`` as the run has them) on m clients
    with K local steps, from ``init``'s state at the oracle's initial model: a
    :class:`~fedprox_cli.engine.choice.Probe`. ``K`` is the run's K, at most
    :data:`~fedprox_cli.engine.choice.PROBE_K` (a round's steps are alike). The algorithm is
    called through :mod:`contract`: a plugin's failure is its one line, as in round 1."""

    alg: Algorithm[Any]
    h: Regularizer
    compressor: Compressor
    run_K: int
    T: int
    seed: int = 0

    @property
    def K(self) -> int:
        return min(self.run_K, PROBE_K)

    @property
    def name(self) -> str:
        """What is timed, as the cache key holds it: the algorithm (its step sizes do not change
        what a round computes), the regularizer and the uplink."""
        return f"{self.alg.name} (h {self.h.name}, uplink {self.compressor.name})"

    def start(self, oracle: Timed, m: int, K: int) -> Callable[[], object]:
        assert isinstance(oracle, Oracle)  # the oracle this probe was made for
        env = Env(oracle, self.h, self.compressor, m, K, self.T, 1.0, self.seed)
        state = contract.init(self.alg, oracle.model.flat(), m)
        return lambda: contract.round(self.alg, state, env, 0)
