"""``engine=auto``: pick the gradient engine by timing both on the run's own model, shapes and
device, and remember the choice.

At start-up :func:`choose` times a few real ``Oracle.grad`` steps of each engine -- on
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
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

import torch

from .atomic import atomic_write_text, read_text

MAX_CLIENTS = 32   # clients per timed step (the engines' per-client costs are flat beyond this)
REPEATS = 3        # timed steps per engine (best kept)
BUDGET_S = 2.0     # stop timing after this long (at least one timed step per engine)
TIMED = ("loop", "vmap")


def cache_file() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or "~/.cache").expanduser() / "fedprox_cli" / "engine.json"


def device_name(device: torch.device) -> str:
    """The GPU's name, or the CPU's model name with its family/model numbers and vector width
    (one name such as "AMD EPYC" covers several generations)."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    info: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            k, _, v = line.partition(":")
            info.setdefault(k.strip(), v.strip())
    except OSError:
        import platform
        return platform.processor() or platform.machine()
    flags = info.get("flags", "").split()
    vec = "avx512" if "avx512f" in flags else "avx2" if "avx2" in flags else ""
    return " ".join(x for x in (info.get("model name", ""), f"family {info.get('cpu family', '?')}",
                                f"model {info.get('model', '?')}", vec) if x)


def cache_key(oracle, clients: int) -> str:
    data = oracle.data
    key = {"model": hashlib.sha1(repr(oracle.model.module).encode()).hexdigest()[:16],
           "d": oracle.model.d, "input": list(data.x.shape[1:]), "B": oracle.B, "clients": clients,
           "dtype": str(data.x.dtype), "device": oracle.device.type,
           "device_name": device_name(oracle.device), "threads": torch.get_num_threads(),
           "torch": torch.__version__}
    return json.dumps(key, sort_keys=True)


def _clock(device: torch.device):
    """CPU time of this process for one-thread CPU runs (robust to other processes on a shared
    machine), else wall time."""
    return time.process_time if device.type == "cpu" and torch.get_num_threads() == 1 else time.perf_counter


def time_engines(oracle, clients: int) -> dict[str, float]:
    """Best seconds per client-step of each engine: ``Oracle.grad`` on the first ``clients``
    clients at the initial model, engines interleaved."""
    ids = torch.arange(clients, device=oracle.device)
    X = oracle.model.flat().expand(clients, -1).contiguous()
    G = torch.empty_like(X)
    clock, sync = _clock(oracle.device), (torch.cuda.synchronize if oracle.device.type == "cuda" else lambda: None)
    saved = oracle.engine, oracle.grad_evals

    def step(engine: str, k: int) -> float:
        oracle.engine = engine
        sync()
        start = clock()
        oracle.grad(X, 0, k, ids, out=G)
        sync()
        return clock() - start

    try:
        for e in TIMED:
            step(e, 0)  # warm-up: first-call costs (vmap imports torch._dynamo, allocations)
        best, start = {e: float("inf") for e in TIMED}, time.perf_counter()
        for r in range(REPEATS):
            if r and time.perf_counter() - start > BUDGET_S:
                break
            for e in TIMED:
                best[e] = min(best[e], step(e, r + 1))
    finally:
        oracle.engine, oracle.grad_evals = saved
    return {e: s / clients for e, s in best.items()}


def _read(path: Path) -> dict:
    try:
        cache = json.loads(read_text(path))
        return cache if isinstance(cache, dict) else {}
    except (OSError, ValueError):
        return {}  # no cache yet, or an unreadable one: measure (and rewrite it)


def choose(oracle, engine: str) -> dict:
    """The engine record for ``engine`` (``auto`` measured or cached; others forced)."""
    if engine != "auto":
        return {"engine": engine, "source": "forced"}
    clients = max(1, min(oracle.data.n, oracle.chunk, MAX_CLIENTS))
    key, path = cache_key(oracle, clients), cache_file()
    hit = _read(path).get(key)
    if _valid(hit):
        return {**hit, "source": "cache", "cache": str(path)}
    timings = time_engines(oracle, clients)
    record = {"engine": min(TIMED, key=timings.__getitem__), "s_per_client_step": timings,
              "clients_timed": clients, "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S")}
    cache = _read(path)
    if _valid(cache.get(key)):  # another process (a parallel sweep job) measured meanwhile:
        return {**cache[key], "source": "cache", "cache": str(path)}  # the first one wins
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps({**cache, key: record}, indent=1, sort_keys=True))
    except OSError:
        pass  # an unwritable cache folder: the run goes on, the next one measures again
    return {**record, "source": "measured", "cache": str(path)}


def _valid(record) -> bool:
    return isinstance(record, dict) and record.get("engine") in TIMED and \
        isinstance(record.get("s_per_client_step"), dict)
