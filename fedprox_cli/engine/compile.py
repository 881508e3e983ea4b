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

``compile=false`` (default) leaves the engines as they are; ``true`` compiles (with
``engine=auto`` the engine is then vmap; ``engine=loop`` is refused); ``auto`` compiles at
start-up and times real gradient steps of the compiled call against the run's eager
engine and vmap's eager call, like :mod:`choice`, and keeps the compiled call only if
``compile seconds / planned client-steps + seconds per compiled client-step`` beats the
run's engine (chosen or forced): the compile time counts against the run's own length. The
timings and the compile seconds are cached in ``compile.json`` beside ``engine.json`` under
the engine choice's key (plus the mode and the engines timed); a cached record decides
without timing (the run still compiles, once, at start-up). A compile that fails (no C++
compiler, an unsupported platform) gives ``compile=auto`` the eager engines and
``compile=true`` a clear error. ``Oracle.compile_choice`` records the outcome.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import torch

from ..common.errors import UserError
from ..common.files import atomic_write_text
from . import choice as engine_choice
from .vmap import VmapEngine


def mode(device: torch.device) -> str:
    """torch.compile's mode: CUDA graphs on CUDA, inductor's default elsewhere."""
    return "reduce-overhead" if device.type == "cuda" else "default"


def compiled(fn: Callable, device: torch.device) -> Callable:
    """``fn`` compiled for ``device`` with static shapes (see module docstring)."""
    m = mode(device)
    fast = torch.compile(fn, dynamic=False, mode=m)

    def call(*args):
        """Contiguous arguments: one program for rows given as an expanded vector too."""
        return fast(*(a.contiguous() for a in args))

    if m != "reduce-overhead":
        return call

    def graphed(*args):
        torch.compiler.cudagraph_mark_step_begin()
        return tuple(o.clone() for o in call(*args))

    return graphed


def cache_file():
    return engine_choice.cache_file().with_name("compile.json")


def choose(oracle, setting, client_steps: int | None = None) -> dict:
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
    fast = oracle.engines["vmap"].wrapped(lambda call: compiled(call, oracle.device))
    clients = max(1, min(oracle.data.n, oracle.chunk))
    record = {"mode": mode(oracle.device)}
    try:
        if setting is True:
            record["compile_s"] = _warm_up(oracle, fast, clients)
            return _use(oracle, fast, {**record, "compiled": True, "source": "forced"})
        key = json.dumps(
            {
                "engine": json.loads(engine_choice.cache_key(oracle, clients)),
                **record,
                "timed": _engines(oracle),
            },
            sort_keys=True,
        )
        cached = engine_choice.read_cache(cache_file()).get(key)
        if _valid(cached):
            record.update(cached, source="cache", cache=str(cache_file()))
        else:
            record.update(
                _measure(oracle, fast, clients), source="measured", cache=str(cache_file())
            )
            _store(
                key,
                {
                    k: record[k]
                    for k in ("s_per_client_step", "compile_s", "clients_timed", "measured_at")
                },
            )
        times = record["s_per_client_step"]
        per_step = record["compile_s"] / client_steps if client_steps else 0.0
        if times["compiled"] + per_step < times[oracle.engine.name]:
            if record["source"] == "cache":
                _warm_up(oracle, fast, clients)  # compiled now, not in round 1's time
            return _use(oracle, fast, {**record, "compiled": True})
    except UserError:
        raise
    except Exception as e:  # noqa: BLE001 (inductor's many failure types: no compiler, unsupported op)
        if setting is True:
            raise UserError(
                f"compile=true: torch.compile failed here ({type(e).__name__}: "
                f"{str(e).splitlines()[0] if str(e) else ''}); use compile=false"
            ) from None
        return {"compiled": False, "source": f"unavailable ({type(e).__name__})"}
    return {**record, "compiled": False}


def _engines(oracle) -> list[str]:
    """The eager engines timed: the run's engine (what the compiled call must beat) and vmap
    (what it compiles)."""
    return sorted({oracle.engine.name, "vmap"})


def _use(oracle, fast: VmapEngine, record: dict) -> dict:
    """The compiled call runs: the engine is vmap (recorded where ``engine=auto`` chose loop)."""
    if oracle.engine.name != "vmap":
        oracle.engine_choice = {
            **oracle.engine_choice,
            "engine": "vmap",
            "note": f"compile: the compiled vmap call runs instead of {oracle.engine.name}",
        }
    oracle.engine = fast
    return record


def _warm_up(oracle, fast: VmapEngine, clients: int) -> float:
    """Seconds of the first compiled call (the compilation) at the run's row count."""
    return engine_choice.time_steps(oracle, clients, {"compiled": fast}, repeats=0)[1]["compiled"]


def _measure(oracle, fast: VmapEngine, clients: int) -> dict:
    variants = {e: oracle.engines[e] for e in _engines(oracle)}
    variants["compiled"] = fast
    best, first = engine_choice.time_steps(oracle, clients, variants)
    return {
        "s_per_client_step": best,
        "compile_s": first["compiled"],
        "clients_timed": clients,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }


def _store(key: str, record: dict) -> None:
    path = cache_file()
    cache = engine_choice.read_cache(path)
    if _valid(cache.get(key)):
        return  # another process measured meanwhile: the first record stays
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps({**cache, key: record}, indent=1, sort_keys=True))
    except OSError:
        pass  # an unwritable cache folder: the next run measures again


def _valid(record) -> bool:
    return (
        isinstance(record, dict)
        and isinstance(record.get("s_per_client_step"), dict)
        and "compiled" in record["s_per_client_step"]
        and isinstance(record.get("compile_s"), (int, float))
    )
