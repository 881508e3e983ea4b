"""``engine=auto``: pick the gradient engine by timing both on the run's own model, shapes and
device, and remember the choice.

At start-up :func:`choose` times a few real gradient steps of each engine -- on
``min(n, chunk, MAX_CLIENTS)`` clients, one warm-up step each, then steps of both engines in
turn until each has :data:`REPEATS` timings or :data:`BUDGET_S` has passed, keeping each
engine's best -- and picks the faster. The choice and the timings are cached in
``$XDG_CACHE_HOME/fedprox_cli/engine.json`` (default ``~/.cache``) under a key of everything
the timing depends on: the model's architecture, the number of parameters, the input shape, the
mini-batch size, the clients timed, dtype, device and its name (CPU model or GPU), threads and
the torch version. A later run with the same key reuses the choice without timing, and the
first choice written for a key stays (a run that measured while another wrote it takes the
written one), so runs of one config on one machine use one engine. The record
(``Oracle.engine_choice``) says which engine runs, whether it was ``measured``, read from the
``cache`` or ``forced`` (``engine=loop|vmap``), and the seconds per client-step of each engine.

Neither engine has a start-up cost worth weighing: the vmap engine's first call takes a few
milliseconds (:mod:`batched`: it does not import ``torch._dynamo``).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TypeGuard

import torch

from ..common import guarded
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

    def batches(self, t: int, k: int, clients: torch.Tensor) -> Batch: ...


MAX_CLIENTS = 32  # clients per timed step (the engines' per-client costs are flat beyond this)
REPEATS = 3  # timed steps per engine (best kept)
BUDGET_S = 2.0  # stop timing after this long (at least one timed step per engine)
TIMED = ("loop", "vmap")


def cache_file() -> Path:
    return cache_folder() / "engine.json"


def cache_key(oracle: Timed, clients: int) -> str:
    data = oracle.data
    key = {
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
    """Best seconds per client-step of each engine: a gradient step on the first ``clients``
    clients at the initial model, engines interleaved."""
    return time_steps(oracle, clients, {e: oracle.engines[e] for e in TIMED})[0]


def time_steps(
    oracle: Timed, clients: int, variants: dict[str, Engine], repeats: int = REPEATS
) -> tuple[dict[str, float], dict[str, float]]:
    """Time a gradient step as ``Oracle.grad`` takes it (the mini-batches drawn, then the
    engine's call) on the first ``clients`` clients at the initial model with each variant (an
    engine: eager, or vmap with a compiled call), interleaved: the best seconds per client-step
    of ``repeats`` steps (or as many as :data:`BUDGET_S` allows, at least one), and the wall
    seconds of each variant's first, warm-up step (first-call costs: a compiled call compiles).
    The oracle's counters are not touched."""
    ids = torch.arange(clients, device=oracle.device)
    X = oracle.model.flat().expand(clients, -1).contiguous()
    G = torch.empty_like(X)
    clock = _clock(oracle.device)
    sync: Callable[[], None] = (
        torch.cuda.synchronize if oracle.device.type == "cuda" else lambda: None
    )

    def step(variant: str, k: int, clock: Callable[[], float] = clock) -> float:
        sync()
        start = clock()
        variants[variant].grad(X, *oracle.batches(0, k, ids), out=G)
        sync()
        return clock() - start

    first = {
        v: step(v, 0, time.perf_counter) for v in variants
    }  # wall: a compiler runs as child processes
    best, start = {v: float("inf") for v in variants}, time.perf_counter()
    for r in range(repeats):
        if r and time.perf_counter() - start > BUDGET_S:
            break
        for v in variants:
            best[v] = min(best[v], step(v, r + 1))
    return {v: s / clients for v, s in best.items()}, first


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
    record = {
        "engine": min(TIMED, key=timings.__getitem__),
        "s_per_client_step": timings,
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
    return f"{record['engine']} (engine=auto, {how}: {times} per client-step)"


def _valid(record: object) -> TypeGuard[Record]:
    return (
        isinstance(record, dict)
        and record.get("engine") in TIMED
        and isinstance(record.get("s_per_client_step"), dict)
    )
