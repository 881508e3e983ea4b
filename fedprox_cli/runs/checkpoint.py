"""Checkpoints (``checkpoint.pt`` in the run folder) and the rules for resuming a run.

A checkpoint after round t holds everything the next rounds depend on: the algorithm's state
dict of tensors, the counters (``grad_evals`` of the oracle; ``bytes_up``, ``bytes_down``,
``prox_calls`` of the Env), the training time so far, the metrics rows logged so far the
fingerprint of the data it trained on (:mod:`provenance`, compared on resume) and what the
numbers depend on beyond the config (:mod:`numerics`: engine, threads; used again on resume). No
random-generator state is needed: mini-batches (``Oracle.batch_ids``), participating clients
(``Env.start_round``) and compressor draws (``Env.up``) come from generators seeded by
``stream_seed(seed, round, step)``, the initial model from ``torch.manual_seed(seed)`` and the
partition from ``partition.seed`` -- all rebuilt from the config -- and algorithms never draw
from the global generators (tested for every registered algorithm).

A run folder holds a *prior run* when it has a checkpoint or its ``summary.json`` has any
status but ``error``. Re-running into it with ``resume=true`` compares the resolved configs
(the folder's ``config.yaml`` against the new one) minus :func:`may_differ`, the keys that
may differ: ``T`` (extended, or not below the rounds done) and the run-control keys of
:mod:`keys` (checkpoint cadence, data location, memory knobs, progress cadence, ``dry_run``).
Any other difference is refused; a finished run with the same
T is left as it is (see ``runner.run``).
"""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from ..algorithms import Env, State
from ..common import guarded, run_files
from ..common import metric_table as mt
from ..common.console import say
from ..common.errors import UserError, require
from ..common.files import atomic_write
from ..common.flatten import flatten
from ..common.package import VERSION
from ..common.run_files import read_summary
from ..config.forms import Plain
from ..config.keys import ADDED, canonical, complete, is_run_control

FORMAT = 2  # 2: with the config digest


def may_differ(key: str) -> bool:
    """A key a resumed run may change: run control (:mod:`keys`) and ``T`` (extended)."""
    return key == "T" or is_run_control(key)


# A seed-batched run (``seeds`` > 1) computes with the vmap engine, uncompiled, whichever of
# these values it was given (others are refused): naming fedrun's own choice is no change.
BATCHED = {"engine": ("auto", "vmap"), "compile": (False, "auto")}


def variants(flat: dict[str, Any]) -> list[dict[str, Any]]:
    """A flattened resolved config and, for a seed-batched one, the same with every other
    :data:`BATCHED` value: the configs that compute what it computes."""
    seeds = flat.get("seeds", 1)
    if not (isinstance(seeds, int) and seeds > 1):
        return [flat]
    return [flat] + [
        {**flat, "engine": e, "compile": c}
        for e in BATCHED["engine"]
        for c in BATCHED["compile"]
        if (e, c) != (flat.get("engine"), flat.get("compile"))
    ]


COUNTERS = (mt.GRAD_EVALS.name, mt.PROX_CALLS.name, mt.BYTES_UP.name, mt.BYTES_DOWN.name)


@dataclass
class Checkpoint:
    round: int  # rounds done
    state: State  # the algorithm's state after that round
    counters: dict[str, int]  # COUNTERS after that round
    train_time: float
    rows: list[dict[str, float]]  # metrics rows logged so far
    digest: str  # of the config that determines the numbers (:func:`digest`)
    data: dict[str, Any] | None = (
        None  # the fingerprint of the data it trained on (:mod:`provenance`)
    )
    numerics: dict[str, Any] | None = (
        None  # what its numbers depend on beyond the config (:mod:`numerics`)
    )


def counters(env: Env) -> dict[str, int]:
    """The cumulative counters of an :class:`~fedprox_cli.algorithms.Env` and its oracle."""
    return dict(
        zip(COUNTERS, (env.oracle.grad_evals, env.prox_calls, env.bytes_up, env.bytes_down))
    )


def restore_counters(env: Env, c: dict[str, int]) -> None:
    env.oracle.grad_evals, env.prox_calls, env.bytes_up, env.bytes_down = (c[k] for k in COUNTERS)


def save(path: Path, ckpt: Checkpoint) -> None:
    """Write ``ckpt`` atomically and durably (temp file, fsync, rename)."""
    atomic_write(path, lambda f: torch.save({"format": FORMAT, **asdict(ckpt)}, f), fsync=True)


def digest(config: Plain) -> str:
    """A fingerprint of a resolved config without :func:`may_differ`: two runs with the same
    digest compute the same numbers, so a checkpoint of one can continue the other."""
    return _digest(flatten(config))


def digests(config: Plain) -> dict[str, tuple[str, ...]]:
    """The :func:`digest` of every config that computes what ``config`` does (:func:`variants`),
    also as an older fedprox_cli recorded it (:func:`as_older`): a checkpoint with one of them
    continues a run of ``config``. Each digest maps to the added keys its config lacks
    (none: this version's own)."""
    out: dict[str, tuple[str, ...]] = {}
    for lacking, flat in as_older(flatten(config)):
        for v in variants(flat):
            out.setdefault(_digest(v), lacking)
    return out


def as_older(flat: dict[str, Any]) -> list[tuple[tuple[str, ...], dict[str, Any]]]:
    """``flat`` (a flattened resolved config), then the same without each set of the keys added
    since runs were recorded (:data:`keys.ADDED`) that hold their default value here: the config
    as a version of fedprox_cli before those keys recorded it. Each with the keys it lacks."""
    at_default = [k for k, d in ADDED.items() if k in flat and canonical({k: flat[k]})[k] == d]
    return [
        (lacking, {k: v for k, v in flat.items() if k not in lacking})
        for r in range(len(at_default) + 1)
        for lacking in itertools.combinations(at_default, r)
    ]


def _digest(flat: dict[str, Any]) -> str:
    kept = {k: v for k, v in sorted(canonical(flat).items()) if not may_differ(k)}
    return hashlib.sha256(json.dumps(kept, default=str).encode()).hexdigest()[:16]


def load(
    path: Path, device: torch.device, expected: dict[str, tuple[str, ...]] | None = None
) -> Checkpoint:
    """The checkpoint at ``path``; with ``expected`` (:func:`digests`), refused unless it is
    a checkpoint of that config -- one written by an older fedprox_cli, whose config lacked keys
    added since, is read with a note naming them (they take their defaults). A checkpoint
    whose format or digest this version does not know is refused naming the version that
    wrote the run (its summary.json) when that is another one (the folder's config.yaml was
    found to be this run's before: :func:`check_same_run`), else as another run's."""
    d = _read(path, device)
    if not (isinstance(d, dict) and d.get("format") == FORMAT):
        written = d.get("format") if isinstance(d, dict) else "?"
        raise UserError(
            f"{path} was written by {_writer(path) or 'another checkout'}, in checkpoint format "
            f"{written}; this fedprox_cli ({VERSION}) reads format {FORMAT} only: resume it with "
            f"the version that wrote it, or set resume=false to start over with this one"
        )
    ckpt = Checkpoint(
        **{k: d[k] for k in ("round", "state", "counters", "train_time", "rows", "digest")},
        data=d.get("data"),
        numerics=d.get("numerics"),
    )
    if expected is not None:
        _check_digest(path, ckpt, expected)
    return ckpt


def _read(path: Path, device: torch.device) -> object:
    """What ``torch.load`` reads from the checkpoint file at ``path`` (tensors only); a file that
    cannot be read is a :class:`UserError` saying whether it is kept (the file system's fault)
    or to be deleted (not a checkpoint)."""
    try:
        with guarded.opened(path) as f:  # a regular file (a FIFO never hangs)
            return torch.load(f, map_location=device, weights_only=True)
    except (OSError, guarded.Unreadable) as e:
        cause = e if isinstance(e, OSError) else e.os_error
        if cause is not None:  # the file system's fault (EIO, EACCES, ...): the file may be fine
            raise UserError(
                f"cannot read checkpoint {path} ({cause.strerror or type(cause).__name__}); it is "
                f"kept "
                f"as it is: re-run the same command once the file can be read again"
            ) from None
        raise UserError(
            f"cannot read checkpoint {path} ({getattr(e, 'why', e)}); delete it or set "
            f"resume=false to start over"
        ) from None
    except Exception as e:  # any unreadable file: truncated, not a checkpoint, ...
        raise UserError(
            f"cannot read checkpoint {path} ({type(e).__name__}); delete it or set "
            f"resume=false to start over"
        ) from None


def _check_digest(path: Path, ckpt: Checkpoint, expected: dict[str, tuple[str, ...]]) -> None:
    """Refuse ``ckpt`` unless its digest is one of ``expected`` (:func:`digests`); one written
    by an older fedprox_cli is read with a note naming the keys its config lacked."""
    if ckpt.digest not in expected:
        writer = _writer(path)
        raise UserError(
            f"{path} is a checkpoint of another run (its config differs from this folder's "
            f"config.yaml); delete it or set resume=false to start over"
            if writer is None
            else f"{path} was written by {writer}, whose fingerprint of the run's settings "
            f"this fedprox_cli ({VERSION}) does not reproduce (config.yaml holds this run's "
            f"settings): resume it with {writer}, or set resume=false to start over"
        )
    lacking = expected[ckpt.digest]
    if lacking:
        say(
            f"{path} was written by {_writer(path) or 'an older checkout'}, before "
            f"{', '.join(lacking)} existed: "
            f"read with {'their defaults' if len(lacking) > 1 else 'its default'} "
            f"({', '.join(f'{k}={ADDED[k]}' for k in lacking)}), the settings that run "
            f"computed with",
            "note",
        )


def _writer(path: Path) -> str | None:
    """``fedprox_cli 0.0.9``: the other version that wrote the run in the checkpoint's folder
    (its summary.json), ``an older fedprox_cli`` when none is recorded, None when it is this
    version."""
    try:
        v = read_summary(path.parent).get("versions", {}).get("fedprox_cli")
    except (OSError, ValueError, AttributeError):
        v = None
    if not isinstance(v, str):
        return "an older fedprox_cli (no version recorded)"
    return None if v == VERSION else f"fedprox_cli {v}"


def check_fits(path: Path, ckpt: Checkpoint, template: State, T: int) -> None:
    """Refuse (:class:`UserError`) a checkpoint that cannot continue this run although its
    digest matches (a file edited or forged): its round outside 0..T, its state's keys, shapes
    or dtypes unlike ``template`` (the algorithm's initial state), counters or rows missing."""

    def shape(state: object) -> dict[str, object] | None:
        return (
            {
                k: (tuple(v.shape), v.dtype) if isinstance(v, torch.Tensor) else type(v).__name__
                for k, v in state.items()
            }
            if isinstance(state, dict)
            else None
        )

    ok = (
        isinstance(ckpt.round, int)
        and not isinstance(ckpt.round, bool)
        and 0 <= ckpt.round <= T
        and shape(ckpt.state) == shape(template)
        and isinstance(ckpt.counters, dict)
        and set(ckpt.counters) == set(COUNTERS)
        and all(isinstance(v, int) for v in ckpt.counters.values())
        and isinstance(ckpt.rows, list)
        and len(ckpt.rows) > 0
        and all(
            isinstance(r, dict) and r.get(mt.ROUND.name, T + 1) <= ckpt.round for r in ckpt.rows
        )
    )
    require(
        ok,
        f"{path} does not fit this run (its round, state, counters or rows are not those "
        f"of a checkpoint of this config); delete it or set resume=false to start over",
    )


def differences(old: Plain, new: Plain) -> list[str]:
    """``key: old -> new`` for every key of two resolved configs that differs, run-control
    keys excepted; none when ``old`` is one of ``new``'s :func:`variants`."""
    a, b = complete(flatten(old)), complete(flatten(new))
    keys = sorted(k for k in set(a) | set(b) if not may_differ(k))
    if any(all(a.get(k, "(unset)") == v.get(k, "(unset)") for k in keys) for v in variants(b)):
        return []
    return [
        f"{k}: {a.get(k, '(unset)')} -> {b.get(k, '(unset)')}"
        for k in keys
        if a.get(k, "(unset)") != b.get(k, "(unset)")
    ]


def check_same_run(out: Path, resolved: Plain) -> Plain:
    """The folder's prior config; refuses (:class:`UserError`) when ``resolved`` (a resolved
    config) differs from it in more than :func:`may_differ`."""
    try:
        old = run_files.read_config(out)
    except run_files.RunFileError as e:  # missing or unparsable
        missing = isinstance(e.os_error, FileNotFoundError)
        why = "there is none" if missing else e.why
        now = e.os_error is not None and not missing  # EIO, EACCES: the file may be fine
        raise UserError(
            f"run folder {out} holds a run whose config.yaml cannot be read ({why}); "
            + (
                "nothing in the folder was changed: re-run once it can be read"
                if now
                else "choose another run folder"
            )
        ) from None
    diff = differences(old, resolved)
    require(
        not diff,
        f"run folder {out} holds a run of a different config ({'; '.join(diff)}); "
        f"choose another run folder, or set resume=false to start it over",
    )
    return old
