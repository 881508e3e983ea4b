"""``engine=auto``: pick the gradient engine by timing the run's own rounds with each engine on
its model, shapes and device, and remember the choice.

What is timed is a round as the run takes it (:class:`Probe`): the local steps of the clients
*and* what the algorithm does around them -- its corrections, prox calls and updates between
steps, which an engine may run row by row (loop) or chunk by chunk (vmap) -- not a gradient
step alone, which misses them (FedNMap's round is faster with ``loop`` while its gradient step
alone is faster with ``vmap``). The run's probe (``algorithms.TimedRound``) runs its
algorithm's round from the initial state; without one, the oracle times rounds of plain local
SGD (:class:`LocalSGD`). At start-up :func:`choose` runs, on ``min(n, chunk, MAX_CLIENTS)``
clients, a warm-up round of one local step per engine, then rounds of ``probe.K`` local steps
(the run's K, at most :data:`PROBE_K`) with both engines in turn until each has
:data:`REPEATS` timings or :data:`BUDGET_S` has passed, keeping each engine's best, and picks
the faster. The choice and the timings (seconds per client-step of such a round) are cached
in ``$XDG_CACHE_HOME/fedprox_cli/engine.json`` (default ``~/.cache``) under a key of everything
the timing depends on: the round timed (the algorithm, regularizer and uplink: the probe's
``name``) and its local steps, the model's architecture, the number of parameters, the input
shape, the mini-batch size, the clients timed, dtype, device and its name (CPU model or GPU),
threads, the torch version and how each engine computes. A later run with the same key reuses
the choice without timing, and the first choice written for a key stays (a run that measured
while another wrote it takes the written one), so runs of one config on one machine use one
engine. The record (``Oracle.engine_choice``) says which engine runs, whether it was
``measured``, read from the ``cache`` or ``forced`` (``engine=loop|vmap``), the round timed and
the seconds per client-step of each engine.

Neither engine has a start-up cost worth weighing: the vmap engine's first call takes a few
milliseconds (:mod:`batched`: it does not import ``torch._dynamo``).
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeGuard

import numpy as np
import torch

from ..common import guarded
from ..common.errors import is_overflow
from ..common.files import atomic_write_text, cache_folder
from .base import Batch, Engine
from .client_data import ClientData
from .device import device_name
from .models import FlatModel

Record = dict[str, Any]
"""A choice's record as it is stored (JSON: the cache, the run's summary)."""


class Timed(Protocol):
    """What the engine and compile choices read (and, choosing, set) of the oracle they are
    made for (:class:`oracle.Oracle`)."""

    model: FlatModel
    data: ClientData
    B: int | None
    device: torch.device
    chunk: int
    engines: dict[str, Engine]
    engine: Engine
    engine_choice: Record
    probe: Probe
    grad_evals: int

    def batches(self, t: int, k: int, clients: torch.Tensor) -> Batch: ...


class Probe(Protocol):
    """The round ``engine=auto`` times: ``name`` says what it runs (the cache key holds it),
    ``K`` its local steps (:data:`PROBE_K` at most)."""

    @property
    def name(self) -> str: ...

    @property
    def K(self) -> int: ...

    def start(self, oracle: Timed, m: int, K: int) -> Callable[[], object]:
        """Round 0 on the first ``m`` clients with ``K`` local steps through ``oracle`` (its
        engine as set), from the initial state: made here, run by the call returned."""
        ...


MAX_CLIENTS = 32  # clients per timed round (the engines' per-client costs are flat beyond this)
PROBE_K = 4  # local steps per timed round, at most (a round's steps are alike)
REPEATS = 3  # timed rounds per engine (best kept)
BUDGET_S = 2.0  # stop timing after this long (at least one timed round per engine)
TIMED = ("loop", "vmap")
BETA = 1e-3  # the step of :class:`LocalSGD`'s rounds (its numbers are not kept)


@dataclass(frozen=True)
class LocalSGD:
    """Rounds of ``K`` plain local SGD steps from the initial model, mini-batches drawn as the
    oracle draws them: the probe of an oracle made without an algorithm's round."""

    K: int = PROBE_K
    name: str = "local sgd"

    def start(self, oracle: Timed, m: int, K: int) -> Callable[[], object]:
        ids = torch.arange(m, device=oracle.device)
        X = oracle.model.flat().expand(m, -1).contiguous()
        engine = oracle.engine
        return lambda: engine.sgd_steps(X, [oracle.batches(0, k, ids) for k in range(K)], BETA, 0.0)


def cache_file() -> Path:
    return cache_folder() / "engine.json"


def cache_key(oracle: Timed, clients: int) -> str:
    data = oracle.data
    key = {
        "round": oracle.probe.name,
        "K_timed": oracle.probe.K,
        "model": hashlib.sha1(repr(oracle.model.module).encode()).hexdigest()[:16],
        "d": oracle.model.d,
        "input": list(data.x.shape[1:]),
        "B": oracle.B,
        "clients": clients,
        "dtype": str(data.x.dtype),
        "device": oracle.device.type,
        "device_name": device_name(oracle.device),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "kinds": {name: e.kind for name, e in sorted(oracle.engines.items())},
    }
    return json.dumps(key, sort_keys=True)


def _clock(device: torch.device) -> Callable[[], float]:
    """CPU time of this process for one-thread CPU runs (robust to other processes on a shared
    machine), else wall time."""
    return (
        time.process_time
        if device.type == "cpu" and torch.get_num_threads() == 1
        else time.perf_counter
    )


def time_engines(oracle: Timed, clients: int) -> dict[str, float]:
    """Best seconds per client-step of each engine in the rounds of ``oracle.probe`` on the
    first ``clients`` clients, engines interleaved."""
    return time_rounds(oracle, clients, {e: oracle.engines[e] for e in TIMED})[0]


def time_rounds(
    oracle: Timed, clients: int, variants: dict[str, Engine], repeats: int = REPEATS
) -> tuple[dict[str, float], dict[str, float]]:
    """:func:`_time_rounds` of the oracle's probe; where the run's own round overflows the
    run's number type at its steps (a step the run itself will diverge on, in round 1), the
    oracle's probe becomes :class:`LocalSGD`'s rounds of as many steps, timed instead (the
    record's ``timed`` and cache key say so)."""
    try:
        return _time_rounds(oracle, clients, variants, repeats)
    except (RuntimeError, OverflowError) as e:
        if not is_overflow(e) or isinstance(oracle.probe, LocalSGD):
            raise
    oracle.probe = LocalSGD(K=oracle.probe.K)
    return _time_rounds(oracle, clients, variants, repeats)


def _time_rounds(
    oracle: Timed, clients: int, variants: dict[str, Engine], repeats: int
) -> tuple[dict[str, float], dict[str, float]]:
    """Time the round ``oracle.probe`` runs on the first ``clients`` clients with each variant
    (an engine: eager, or vmap with a compiled call) as the oracle's engine, interleaved: the
    best seconds per client-step of ``repeats`` rounds of ``probe.K`` local steps (or as many
    as :data:`BUDGET_S` allows, at least one), and the wall seconds of each variant's first,
    warm-up round of one local step (first-call costs: a compiled call compiles). Each round
    starts from the initial state, made before its clock starts. The oracle's engine and
    counters and the global random generators are left as they were."""
    probe, clock = oracle.probe, _clock(oracle.device)
    sync: Callable[[], None] = (
        torch.cuda.synchronize if oracle.device.type == "cuda" else lambda: None
    )
    engine, grad_evals = oracle.engine, oracle.grad_evals

    def run(variant: str, K: int, clock: Callable[[], float] = clock) -> float:
        oracle.engine = variants[variant]
        go = probe.start(oracle, clients, K)
        sync()
        start = clock()
        go()
        sync()
        return clock() - start

    generators = _global_generators()
    try:
        first = {
            v: run(v, 1, time.perf_counter) for v in variants
        }  # wall: a compiler runs as child processes
        best, start = {v: float("inf") for v in variants}, time.perf_counter()
        for r in range(repeats):
            if r and time.perf_counter() - start > BUDGET_S:
                break
            for v in variants:
                best[v] = min(best[v], run(v, probe.K))
    finally:
        oracle.engine, oracle.grad_evals = engine, grad_evals
        _restore(generators)
    return {v: s / (clients * probe.K) for v, s in best.items()}, first


Generators = tuple[torch.Tensor, list[torch.Tensor] | None, Any, Any]
"""The states of torch's CPU and CUDA, numpy's and Python's global generators."""


def _global_generators() -> Generators:
    """The global generators' states: a timed round may draw from them (an algorithm that
    should not, which fedrun-check-algorithm reports), and the run must start from them as they
    were."""
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None  # type: ignore[no-untyped-call]  # torch: untyped
    return torch.get_rng_state(), cuda, np.random.get_state(), random.getstate()


def _restore(generators: Generators) -> None:
    cpu, cuda, numpy_state, python_state = generators
    torch.set_rng_state(cpu)
    if cuda is not None:
        torch.cuda.set_rng_state_all(cuda)
    np.random.set_state(numpy_state)
    random.setstate(python_state)


def read_cache(path: Path) -> dict[str, Any]:
    try:
        cache = guarded.read_json(path)
        return cache if isinstance(cache, dict) else {}
    except (OSError, ValueError):
        return {}  # no cache yet, or an unreadable one: measure (and rewrite it)


def choose(oracle: Timed, engine: str) -> Record:
    """The engine record for ``engine`` (``auto`` measured or cached; others forced)."""
    if engine != "auto":
        return {"engine": engine, "source": "forced"}
    clients = max(1, min(oracle.data.n, oracle.chunk, MAX_CLIENTS))
    key, path = cache_key(oracle, clients), cache_file()
    hit = read_cache(path).get(key)
    if _valid(hit):
        return {**hit, "source": "cache", "cache": str(path)}
    timings = time_engines(oracle, clients)
    key = cache_key(oracle, clients)  # the probe timed (LocalSGD where the run's round overflows)
    record = {
        "engine": min(TIMED, key=timings.__getitem__),
        "s_per_client_step": timings,
        "timed": f"{oracle.probe.name} rounds, K={oracle.probe.K}",
        "clients_timed": clients,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    return {**_store(path, key, record), "cache": str(path)}


def _store(path: Path, key: str, record: Record) -> Record:
    """Write ``record`` under ``key`` (unless another process, a parallel sweep job, wrote one
    meanwhile: the first one wins) and return the record in force, with its source
    (``measured`` or ``cache``)."""
    cache = read_cache(path)
    if _valid(cache.get(key)):
        return {**cache[key], "source": "cache"}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps({**cache, key: record}, indent=1, sort_keys=True))
    except OSError:
        pass  # an unwritable cache folder: the run goes on, the next one measures again
    return {**record, "source": "measured"}


def line(record: Record) -> str | None:
    """The run's line about ``auto``'s choice and both timings (None for a forced engine)."""
    if record.get("source") not in ("measured", "cache"):
        return None
    times = ", ".join(
        f"{e} {1e3 * s:.3g} ms" for e, s in sorted(record["s_per_client_step"].items())
    )
    how = (
        "measured"
        if record["source"] == "measured"
        else f"from the cache (measured {record.get('measured_at', '?')})"
    )
    rounds = f" of {record['timed']}" if "timed" in record else ""
    return f"{record['engine']} (engine=auto, {how}: {times} per client-step{rounds})"


def _valid(record: object) -> TypeGuard[Record]:
    return (
        isinstance(record, dict)
        and record.get("engine") in TIMED
        and isinstance(record.get("s_per_client_step"), dict)
    )
