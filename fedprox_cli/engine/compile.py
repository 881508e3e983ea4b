"""``compile``: the vmap engine's batched gradient call compiled with ``torch.compile``, and
``compile=auto``'s choice by measurement.

What is compiled: the one call every algorithm's local steps go through,
``vmap(grad_and_value(loss))(X, inputs, targets, w)`` (the ``call`` of
:class:`vmap.VmapEngine`, which its ``grad`` and ``sgd_steps`` make), with static shapes
(``dynamic=False``: one compiled program per row count, i.e. per chunk size; the arguments are
made contiguous, so rows given as one expanded vector do not compile another). Mini-batch ids are
drawn as before, on the CPU from the
run's counter-based streams (:mod:`device`) and gathered on the device outside the compiled
call, so a compiled run takes the same mini-batches as an eager one and its numbers differ
only by float rounding (fused kernels sum in another order). On CUDA the mode is
``reduce-overhead`` (the call is replayed as a CUDA graph; each call starts a new graph step
and its outputs are cloned out of the graph's memory pool, so a caller may keep them); on
the CPU the inductor C++ backend (it needs a C++ compiler). Nothing in the call reads a value
on the host.

``compile=false`` leaves the engines as they are; ``true`` compiles (with ``engine=auto`` the
engine is then vmap; ``engine=loop`` is refused); ``auto`` (the default) takes compiled rounds
where the run's client-steps repay the compile (:func:`pays`: ``compile seconds + steps x
compiled step < steps x eager step``, eager being the run's engine, chosen or forced). Its
inputs come from ``compile.json`` beside ``engine.json`` (the compiled and eager steps' seconds
and the compile seconds, under the engine choice's key plus the mode and the engines timed);
without a record, a trial compile times the compiled call against the eager engines (like
:mod:`choice`) and is cached, but only where it could repay itself (:func:`may_pay`): the run's
eager seconds times the best speedup measured on such a device must save more than the least
compile time measured there (:func:`prior`: this device's records, else the numbers shipped in
``compile_priors.json`` for its type). A trial's compile is paid by then, so its compiled call is
kept wherever it is the faster. On this project's CPU that means eager for all but very long
runs; on a GPU, compiled for runs of a few thousand client-steps. A compile that fails (no C++
compiler, an unsupported platform) gives ``compile=auto`` the eager engines and
``compile=true`` a clear error. ``Oracle.compile_choice`` records the outcome: the seconds used
and where they came from (``measured``, ``cache``, or ``not tried`` with the prior), the run's
client-steps and the choice.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeGuard

import torch

from ..common.console import say
from ..common.errors import UserError
from ..common.files import atomic_write_text, open_regular
from . import choice as engine_choice
from .base import GradCall
from .choice import Record, Timed
from .vmap import VmapEngine

# Per device type, the best speedup of a compiled call over the eager engines and the least
# compile seconds measured there (where, in the file), for a device without records of its own.
PRIORS = Path(__file__).with_name("compile_priors.json")


def mode(device: torch.device) -> str:
    """torch.compile's mode: CUDA graphs on CUDA, inductor's default elsewhere."""
    return "reduce-overhead" if device.type == "cuda" else "default"


def _not_trace_bookkeeping(record: logging.LogRecord) -> bool:
    """False for a line of torch's compile-trace recorder (``ChromiumEventLogger: Detected
    overlapping events, fixing stack``): it mends its own record of compile events after a
    compile was interrupted (a stopped run), which is nothing a user can act on."""
    return not record.getMessage().startswith("ChromiumEventLogger:")


def compiled(fn: GradCall, device: torch.device) -> GradCall:
    """``fn`` compiled for ``device`` with static shapes (see module docstring)."""
    m = mode(device)
    # On a CPU-only torch beside a CUDA toolkit, inductor's C++ build warns once that it found no
    # CUDA runtime: true and of no use to a CPU run, and a line the user did not ask for.
    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
    dynamo = logging.getLogger("torch._dynamo.utils")  # the trace recorder's logger, its lines
    if _not_trace_bookkeeping not in dynamo.filters:
        dynamo.addFilter(_not_trace_bookkeeping)
    fast = torch.compile(fn, dynamic=False, mode=m)

    def call(*args: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Contiguous arguments: one program for rows given as an expanded vector too."""
        return fast(*(a.contiguous() for a in args))

    if m != "reduce-overhead":
        return call

    def graphed(*args: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        torch.compiler.cudagraph_mark_step_begin()  # type: ignore[no-untyped-call]  # torch: untyped
        G, L = call(*args)
        return G.clone(), L.clone()

    return graphed


def cache_file() -> Path:
    return engine_choice.cache_file().with_name("compile.json")


def pays(eager_s: float, compiled_s: float, compile_s: float, client_steps: int) -> bool:
    """Whether compiled rounds repay their compile over ``client_steps`` client-steps:
    ``compile_s + client_steps * compiled_s < client_steps * eager_s`` (seconds per
    client-step of the run's eager engine and of the compiled call)."""
    return compile_s + client_steps * compiled_s < client_steps * eager_s


def may_pay(eager_s: float, client_steps: int, prior: Record) -> bool:
    """Whether a trial compile could repay itself: compiled steps ``prior["speedup"]`` times
    as fast as eager ones (the best measured on such a device) save ``client_steps * eager_s *
    (1 - 1 / speedup)`` seconds, and compiling takes at least ``prior["compile_s"]`` (the
    least measured)."""
    speedup: float = prior["speedup"]
    compile_s: float = prior["compile_s"]
    return speedup > 1 and client_steps * eager_s * (1 - 1 / speedup) > compile_s


def prior(key: Record, cache: Record) -> Record | None:
    """What compiling gave on this device before: the best speedup of a compiled call over the
    eager engines and the least compile seconds among ``cache``'s records (compile.json) of
    this device (its type and name in ``key``, :func:`choice.cache_key`); without one, those
    measured on a device of its type and shipped with the package (:data:`PRIORS`: a GPU's and
    this project's CPU's, each with where it was measured); None for another device type."""
    mine: list[tuple[float, float]] = []
    for k, rec in cache.items():
        try:
            other = json.loads(k)["engine"]
        except (ValueError, KeyError, TypeError):
            continue
        if _valid(rec) and all(other.get(f) == key[f] for f in ("device", "device_name")):
            times = rec["s_per_client_step"]
            eager = min(v for e, v in times.items() if e != "compiled")
            mine.append((eager / times["compiled"], rec["compile_s"]))
    if mine:
        return {
            "speedup": max(s for s, _ in mine),
            "compile_s": min(c for _, c in mine),
            "from": f"{len(mine)} record{'s' if len(mine) > 1 else ''} of this device",
        }
    shipped = json.loads(PRIORS.read_text()).get(key["device"])
    return None if shipped is None else {**shipped, "from": "shipped"}


def choose(oracle: Timed, setting: bool | str, client_steps: int | None = None) -> Record:
    """Decide ``setting`` (true, false or auto) for ``oracle`` and make the vmap engine with the
    compiled call its engine if chosen; return the record. ``client_steps``: the client-steps
    the run will compute (None: the compile time is not counted)."""
    if setting is False:
        return {"compiled": False, "source": "forced"}
    if oracle.engine_choice["source"] == "forced" and oracle.engine.name == "loop":
        if setting is True:
            raise UserError(
                "compile=true compiles the vmap engine; use engine=vmap or auto, or compile=false"
            )
        return {"compiled": False, "source": "engine=loop (only the vmap engine compiles)"}
    clients = max(1, min(oracle.data.n, oracle.chunk))
    record: Record = {"mode": mode(oracle.device)}
    try:
        if setting is True:
            fast = _fast(oracle)
            record["compile_s"] = _warm_up(oracle, fast, clients)
            return _use(oracle, fast, {**record, "compiled": True, "source": "forced"})
        return _auto(oracle, clients, client_steps, record)
    except UserError:
        raise
    except Exception as e:  # noqa: BLE001 (inductor's many failure types: no compiler, unsupported op)
        if setting is True:
            raise UserError(
                f"compile=true: torch.compile failed here ({type(e).__name__}: "
                f"{str(e).splitlines()[0] if str(e) else ''}); use compile=false"
            ) from None
        return {"compiled": False, "source": f"unavailable ({type(e).__name__})"}


def _auto(oracle: Timed, clients: int, client_steps: int | None, record: Record) -> Record:
    """``compile=auto``: from compile.json's record of the run's key, compiled rounds where
    they repay the compile (:func:`pays`); without one, a trial compile where it could repay
    itself (:func:`may_pay` on the run's eager step and :func:`prior`), kept where its
    compiled steps are faster (its compile is paid by then), and cached; else eager, untried."""
    engine_key, key = _keys(oracle, clients, record)
    cache = engine_choice.read_cache(cache_file())
    asked = dict(record)
    record.update(client_steps=client_steps, cache=str(cache_file()))
    eager = oracle.engine.name
    if _valid(cache.get(key)):
        return _recorded(oracle, clients, client_steps, {**record, **cache[key]})
    eager_s = _eager_s(oracle, clients)
    p = prior(engine_key, cache)
    if client_steps is not None and p is not None and not may_pay(eager_s, client_steps, p):
        return {
            **record,
            "compiled": False,
            "source": "not tried (it cannot repay its compile)",
            "s_per_client_step": {eager: eager_s},
            "prior": p,
        }
    with _trial(key):  # one trial per key at a time: a sweep's jobs of one shape share it
        cache = engine_choice.read_cache(cache_file())
        if _valid(cache.get(key)):  # measured by another run while this one waited
            return _recorded(oracle, clients, client_steps, {**record, **cache[key]})
        about = f"about {p['compile_s']:.0f} s" if p is not None else "its time unknown here"
        say(f"trying compiled rounds, {about} (a trial, once for this model and shapes)", "compile")
        fast = _fast(oracle)
        record.update(_measure(oracle, fast, clients), source="measured")
        _store(
            _keys(oracle, clients, asked)[1],  # the probe timed (LocalSGD where a round overflows)
            {
                k: record[k]
                for k in ("s_per_client_step", "compile_s", "clients_timed", "measured_at")
            },
        )
    times = record["s_per_client_step"]
    if times["compiled"] < times[eager]:
        return _use(oracle, fast, {**record, "compiled": True})
    return {**record, "compiled": False}


def _keys(oracle: Timed, clients: int, asked: Record) -> tuple[dict[str, Any], str]:
    """The engine's cache key of the oracle's probe (parsed) and compile.json's key of the
    ``asked`` compile settings on it."""
    engine_key = json.loads(engine_choice.cache_key(oracle, clients))
    return engine_key, json.dumps(
        {"engine": engine_key, **asked, "timed": _engines(oracle)}, sort_keys=True
    )


def _recorded(oracle: Timed, clients: int, client_steps: int | None, record: Record) -> Record:
    """``compile=auto`` from compile.json's ``record`` of the run's key: compiled rounds where
    they repay the compile (:func:`pays`; faster steps, where ``client_steps`` is None)."""
    record["source"] = "cache"
    times = record["s_per_client_step"]
    eager = oracle.engine.name
    if (
        times["compiled"] < times[eager]
        if client_steps is None  # the compile time not counted
        else pays(times[eager], times["compiled"], record["compile_s"], client_steps)
    ):
        fast = _fast(oracle)
        _warm_up(oracle, fast, clients)  # compiled now, not in round 1's time
        return _use(oracle, fast, {**record, "compiled": True})
    return {**record, "compiled": False}


@contextmanager
def _trial(key: str) -> Iterator[None]:
    """Held while this process runs the trial compile of ``key``: an exclusive lock on a file of
    the key beside compile.json, so runs started together (a sweep's jobs) trial each shape
    once; one that waits says so. Without a lock file (an unwritable cache), no waiting."""
    folder = cache_file().with_name("compile.locks")
    name = hashlib.sha1(key.encode()).hexdigest()[:16]
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd = open_regular(folder / name, os.O_RDWR | os.O_CREAT)
    except OSError:  # NotRegular too: a link or a folder in its place
        yield
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say("waiting for another run's trial compile of the same model and shapes", "compile")
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _eager_s(oracle: Timed, clients: int) -> float:
    """Seconds per client-step of the run's eager engine: ``engine=auto``'s timing (this run's,
    or cached by an earlier run of the same key for a forced engine), else one round timed now."""
    name = oracle.engine.name
    timed: dict[str, float] = oracle.engine_choice.get("s_per_client_step", {})
    if name not in timed:
        c = max(1, min(clients, engine_choice.MAX_CLIENTS))
        cached = engine_choice.read_cache(engine_choice.cache_file())
        found = (cached.get(engine_choice.cache_key(oracle, c)) or {}).get("s_per_client_step")
        if isinstance(found, dict) and isinstance(found.get(name), (int, float)):
            timed = found
        else:
            timed = engine_choice.time_rounds(oracle, c, {name: oracle.engine}, repeats=1)[0]
    return timed[name]


def line(record: Record) -> str | None:
    """The run's line about ``compile=auto``'s measured or cached decision (None otherwise)."""
    if record.get("source") not in ("measured", "cache"):
        return None
    times = record["s_per_client_step"]
    eager = ", ".join(f"{e} {1e3 * s:.3g} ms" for e, s in sorted(times.items()) if e != "compiled")
    how = (
        "measured"
        if record["source"] == "measured"
        else f"from the cache (measured {record.get('measured_at', '?')})"
    )
    steps = record.get("client_steps")
    return (
        f"{'compiled' if record['compiled'] else 'eager'} rounds (compile=auto, {how}: compiled "
        f"{1e3 * times['compiled']:.3g} ms against {eager} per client-step, compiling "
        f"{record['compile_s']:.1f} s"
        + (f"; the run's {steps:,} client-steps" if steps else "")
        + ")"
    )


def _fast(oracle: Timed) -> VmapEngine:
    """The vmap engine with its call compiled (torch.compile loads only here)."""
    vmap = oracle.engines["vmap"]
    assert isinstance(vmap, VmapEngine)  # the oracle's engines by name
    return vmap.wrapped(lambda call: compiled(call, oracle.device), transform=True)


def _engines(oracle: Timed) -> list[str]:
    """The eager engines timed: the run's engine (what the compiled call must beat) and vmap
    (what it compiles)."""
    return sorted({oracle.engine.name, "vmap"})


def _use(oracle: Timed, fast: VmapEngine, record: Record) -> Record:
    """The compiled call runs: the engine is vmap (recorded where ``engine=auto`` chose loop)."""
    if oracle.engine.name != "vmap":
        oracle.engine_choice = {
            **oracle.engine_choice,
            "engine": "vmap",
            "note": f"compile: the compiled vmap call runs instead of {oracle.engine.name}",
        }
    oracle.engine = fast
    return record


def _warm_up(oracle: Timed, fast: VmapEngine, clients: int) -> float:
    """Seconds of the first round with the compiled call (its compilation) at the run's row
    count."""
    return engine_choice.time_rounds(oracle, clients, {"compiled": fast}, repeats=0)[1]["compiled"]


def _measure(oracle: Timed, fast: VmapEngine, clients: int) -> Record:
    variants = {e: oracle.engines[e] for e in _engines(oracle)}
    variants["compiled"] = fast
    best, first = engine_choice.time_rounds(oracle, clients, variants)
    return {
        "s_per_client_step": best,
        "compile_s": first["compiled"],
        "clients_timed": clients,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }


def _store(key: str, record: Record) -> None:
    path = cache_file()
    cache = engine_choice.read_cache(path)
    if _valid(cache.get(key)):
        return  # another process measured meanwhile: the first record stays
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps({**cache, key: record}, indent=1, sort_keys=True))
    except OSError:
        pass  # an unwritable cache folder: the next run measures again


def _valid(record: object) -> TypeGuard[Record]:
    return (
        isinstance(record, dict)
        and isinstance(record.get("s_per_client_step"), dict)
        and "compiled" in record["s_per_client_step"]
        and isinstance(record.get("compile_s"), (int, float))
    )
