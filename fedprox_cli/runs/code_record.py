"""Which code made a run: per config group (algorithm, regularizer, compressor, model,
dataset), the object the run used, its package, version and a digest of its module's source
(``summary.json``'s ``code``), and the comparison of a recorded record with the current code
(:func:`changed`), which resume, "finished already" and the analysis commands use.

A built-in's record names fedprox_cli's version; a plugin's its distribution's. The digest is
of the source file that defines the object: editing a plugin (or fedprox_cli's module of a
built-in) changes it; a run recorded before this record existed has none and is compared with
nothing.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
from collections.abc import Callable
from importlib.metadata import packages_distributions, version
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import plugin_defaults

if TYPE_CHECKING:  # the schema loads torch; the analysis commands read code records without it
    from ..config.schema import RunConfig

GROUPS = tuple(plugin_defaults.GROUPS)  # algorithm, regularizer, compressor, model, dataset
DIGEST_CHARS = 16


@functools.cache
def _distributions() -> dict[str, list[str]]:
    """Top-level module -> distributions, scanned once a process (~0.4 s with many packages)."""
    return dict(packages_distributions())


def of_object(obj: type[object] | Callable[..., object]) -> dict[str, Any]:
    """``{"object", "package", "version", "digest"}`` of a class or function."""
    module = inspect.getmodule(obj)
    top = (module.__name__ if module else obj.__module__).split(".")[0]
    dist = (
        top if top == __name__.split(".")[0] else (_distributions().get(top) or [top])[0]
    )  # built-ins: no scan
    try:
        v = version(dist)
    except Exception:  # noqa: BLE001 -- a module on PYTHONPATH, not installed: no version
        v = None
    try:
        source = inspect.getsourcefile(obj)
        digest = (
            hashlib.sha256(Path(source).read_bytes()).hexdigest()[:DIGEST_CHARS] if source else None
        )
    except (OSError, TypeError):
        digest = None
    return {
        "object": f"{obj.__module__}.{getattr(obj, '__qualname__', obj.__class__.__name__)}",
        "package": dist,
        "version": v,
        "digest": digest,
    }


def record(choices: dict[str, tuple[str, str | None]]) -> dict[str, Any]:
    """The code record of a run: ``choices`` maps each group to ``(name, target or None)``."""
    return {
        g: {"name": name, **of_object(plugin_defaults.lookup(g)(name, target))}
        for g, (name, target) in choices.items()
    }


def of_config(cfg: RunConfig) -> dict[str, Any]:
    """The code record of a typed run config (:class:`config.schema.RunConfig`)."""
    return record(
        {g: (getattr(cfg, g).name, getattr(cfg, g).params.get("_target_")) for g in GROUPS}
    )


def changed(recorded: dict[str, Any] | None, current: dict[str, Any] | None) -> list[str]:
    """What differs between a recorded code record and the current one, one phrase per group
    (``algorithm fedprox: code 1a2b3c4d5e6f7a8b -> 9c0d1e2f3a4b5c6d``); empty when either has
    no record."""
    if not recorded or not current:
        return []
    out = []
    for g in GROUPS:
        a, b = recorded.get(g) or {}, current.get(g) or {}
        if a and b and a.get("digest") and b.get("digest") and a["digest"] != b["digest"]:
            out.append(f"{g} {b.get('name')}: code {a['digest']} -> {b['digest']}")
    return out


def mixed(records: list[dict[str, Any]]) -> list[str]:
    """The plugins that ``records`` (of runs put side by side) say were made by different code:
    one phrase each (``algorithm fedprox: 2 versions of its code (1a2b..., 9c0d...)``)."""
    seen: dict[tuple[str, str], set[str]] = {}
    for r in records:
        for g in GROUPS:
            e = (r or {}).get(g) or {}
            if e.get("digest"):
                seen.setdefault((g, str(e.get("name"))), set()).add(e["digest"])
    return [
        f"{g} {name}: {len(d)} versions of its code ({', '.join(sorted(d))})"
        for (g, name), d in sorted(seen.items())
        if len(d) > 1
    ]


UNRECORDED = "an older version of fedprox_cli, which recorded no code"  # a folder without one


def stale(recorded: dict[str, Any] | None, cfg: RunConfig) -> list[str]:
    """:func:`changed` between the code ``recorded`` in a run's summary.json and the code the
    typed config ``cfg`` would run now: a finished run made by other code is stale, and so is
    one without a record (made by an older version: :data:`UNRECORDED`)."""
    return changed(recorded, of_config(cfg)) if recorded else [UNRECORDED]


def stale_line(out: Path, why: list[str]) -> str:
    """What fedrun says of a finished run made by other code instead of "already finished"."""
    return (
        f"the run in {out} is stale: it was made by other code ({'; '.join(why)}); it is kept "
        f"as it is: to re-run it, add resume=false"
    )


def mixed_line(history: object) -> str | None:
    """What a run's ``code_history`` (summary.json, written when a run was continued with
    ``mixed_code=true``) says: ``mixed code: algorithm fedavg: code 1a2b... -> 9c0d... after
    round 5``; None for a run made by one code."""
    if not isinstance(history, list) or len(history) < 2:
        return None
    steps = [
        f"{'; '.join(changed(a.get('code'), b.get('code')) or [_other(a)])} after round "
        f"{b.get('from_round')}"
        for a, b in zip(history, history[1:])
        if isinstance(a, dict) and isinstance(b, dict)
    ]
    return f"mixed code: {', then '.join(steps)}"


def _other(entry: dict[str, Any]) -> str:
    return "other code" if entry.get("code") else f"code of {UNRECORDED} -> this code"
