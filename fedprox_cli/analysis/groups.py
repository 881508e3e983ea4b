"""Runs grouped by their configs, and the labels that tell the groups apart.

Runs whose configs differ only in replicate keys (``seed`` and every ``*.seed``) and in run-control
keys that cannot change the numbers (:func:`is_run_control`) form a *group*, aggregated as mean +-
std over its runs. Every other config difference keeps runs apart: nothing is ever pooled. A
group's label names only the config keys that tell the groups apart (e.g. ``algorithm=fedcanon,
partition.alpha=0.1``). When a run folder has Hydra's record (``.hydra/hydra.yaml``), its
config-group choices (e.g. ``algorithm=fedcanon_fig2/fedavg``) join the keys, so runs that
resolve to the same numbers but were chosen differently stay apart.

A run is counted once: folders holding the same run (same settings and seeds: a sweep re-run
into its folder under an older folder layout, a copy) are one run (:func:`once`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from ..common.errors import require
from ..config import keys
from .run import CHOICE, Run, is_replicate

Settings = tuple[tuple[str, Any], ...]  # a run's config keys that decide its numbers, sorted


@dataclass
class Group:
    key: Settings  # the config without replicate / run-control keys, sorted (key, value)
    runs: list[Run]
    label: str = ""
    label_values: dict[str, Any] = field(default_factory=dict)

    @property
    def config(self) -> dict[str, Any]:
        return dict(self.key)


def is_run_control(key: str, final: str | None = None) -> bool:
    """Keys that cannot change the compared numbers: checkpointing, resume, data location,
    oracle chunking, Hydra and logger settings, and ``eval_every`` when the compared value is
    the last evaluation (``final="last"``; with ``"tail"`` the cadence decides which
    evaluations are averaged)."""
    return keys.is_run_control(key) or (final == "last" and key == "eval_every")


def settings(run: Run, final: str | None = None, ignore: Collection[str] = ()) -> dict[str, Any]:
    """The config keys of ``run`` that decide its numbers (no replicate, run-control or
    ``ignore`` keys)."""
    return {
        k: v
        for k, v in run.config.items()
        if not is_replicate(k) and not is_run_control(k, final) and k not in ignore
    }


def identity(run: Run) -> tuple[object, ...]:
    """What makes a run the run it is: its :func:`settings` and its seeds. Two folders with one
    identity hold the same run (a sweep re-run into another folder layout, a copied folder)."""
    return tuple(sorted(settings(run).items())) + run.seed


def _preference(run: Run) -> tuple[bool, int, str]:
    return (run.status != "finished", -len(run.metrics), str(run.path))


def once(runs: list[Run], warn: Callable[[str], None] = lambda _: None) -> list[Run]:
    """``runs`` with each run counted once: of the folders of one :func:`identity` the one kept
    is finished if one is, else the one with the most evaluations (then the first by path);
    one ``warn`` line names each folder left out."""
    by_id: dict[tuple[object, ...], list[Run]] = {}
    for r in runs:
        by_id.setdefault(identity(r), []).append(r)
    kept = {id(min(same, key=_preference)) for same in by_id.values()}
    for same in by_id.values():
        best = min(same, key=_preference)
        for r in same:
            if r is not best:
                warn(
                    f"note: {r.path} and {best.path} have the same settings and seeds; "
                    f"counted once, from {best.path}"
                )
    return [r for r in runs if id(r) in kept]


def config_key(runs: list[Run], key: str) -> str:
    """``key`` as the runs know it: a dotted config key, else a config-group choice."""
    return key if any(key in r.config for r in runs) else f"{CHOICE}{key}"


def split(runs: list[Run], keys: list[str]) -> dict[str, list[Run]]:
    """Runs split by their values of ``keys`` (the panels of a figure), titled ``k=v, ...``."""
    keys = [config_key(runs, k) for k in keys]
    for k in keys:
        require(any(k in r.config for r in runs), f"no run has a config key {short(k)!r}")
    out: dict[tuple[Any, ...], list[Run]] = {}
    for r in runs:
        out.setdefault(tuple(r.config.get(k, "-") for k in keys), []).append(r)
    return {
        ", ".join(f"{short(k)}={fmt(v)}" for k, v in zip(keys, values)): out[values]
        for values in sorted(out, key=order)
    }


def order(values: Iterable[object]) -> tuple[tuple[int, float, str], ...]:
    """A sort key for tuples of config values: numbers by size, before strings."""
    return tuple((0, v, "") if is_number(v) else (1, 0, str(v)) for v in values)


def is_number(v: object) -> TypeGuard[int | float]:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def matches(value: object, text: str) -> bool:
    """``value`` is ``text``, or one of its comma-separated alternatives (``K=10,20,40``)."""
    if "," in text:
        return any(matches(value, t) for t in text.split(","))
    if is_number(value):
        try:
            return math.isclose(float(value), float(text), rel_tol=1e-9)
        except ValueError:
            return False
    return str(value) == text


def group(
    runs: list[Run],
    ignore: Collection[str] = (),
    final: str | None = None,
    shown: Sequence[str] = (),
) -> list[Group]:
    """Runs grouped by :func:`settings` (so only seeds and run control differ within a group),
    labelled by the keys that tell the groups apart beyond the ``shown`` ones (a figure's
    panel keys). ``final`` as in :func:`is_run_control`."""
    groups: dict[Settings, Group] = {}
    for r in runs:
        key = tuple(sorted(settings(r, final, ignore).items(), key=lambda kv: kv[0]))
        groups.setdefault(key, Group(key, [])).runs.append(r)
    out = list(groups.values())
    keys = label_keys([g.config for g in out], given=shown)
    for g in out:
        g.label_values = {k: g.config[k] for k in keys if k in g.config}
        name = columns(keys)
        g.label = ", ".join(f"{name[k]}={fmt(v)}" for k, v in g.label_values.items()) or "all runs"
    return sorted(out, key=lambda g: order(g.config.get(k, "") for k in [*shown, *keys]))


def _priority(key: str) -> tuple[int, str]:
    if key.startswith(CHOICE):
        return (3, key)
    if "." not in key:
        return (1, key)
    return (0 if key.endswith(".name") else 2, key)


def differing(configs: list[dict[str, Any]]) -> list[str]:
    keys = {k for c in configs for k in c}
    return [k for k in keys if len({repr(c.get(k)) for c in configs}) > 1]


def _classes(configs: list[dict[str, Any]], keys: Sequence[str]) -> int:
    return len({tuple(repr(c.get(k)) for k in keys) for c in configs})


def shared(runs: list[Run]) -> dict[str, Any]:
    """The :func:`settings` all ``runs`` share (a figure's caption)."""
    first = {k: repr(v) for k, v in settings(runs[0]).items()}
    for r in runs[1:]:  # each run's settings made once
        mine = settings(r)
        first = {k: v for k, v in first.items() if repr(mine.get(k)) == v}
    return {k: v for k, v in settings(runs[0]).items() if k in first}


def label_keys(
    configs: list[dict[str, Any]],
    given: Sequence[str] = (),
    last: Callable[[str], bool] = lambda k: False,
) -> list[str]:
    """The keys that tell ``configs`` apart beyond the ``given`` ones: names first, then
    top-level keys, then the rest, then group choices (keys for which ``last`` holds after
    all of them); a key is kept only if it splits configs the kept keys do not."""
    kept: list[str] = []
    for k in sorted(set(differing(configs)) - set(given), key=lambda k: (last(k), _priority(k))):
        if _classes(configs, [*given, *kept, k]) > _classes(configs, [*given, *kept]):
            kept.append(k)
    return kept


def _function_of(configs: list[dict[str, Any]], key: str, keys: Sequence[str]) -> bool:
    """Whether ``key``'s value is fixed by the values of ``keys`` across ``configs``."""
    return _classes(configs, [*keys, key]) == _classes(configs, keys)


def _namespace(key: str) -> str:
    return key.removeprefix(CHOICE).split(".")[0]


def table_keys(configs: list[dict[str, Any]], column: str | None) -> tuple[list[str], list[str]]:
    """A table's row keys and header keys: the keys that, with ``column``, tell ``configs``
    apart. The column's own parameters (keys in its namespace, e.g. ``algorithm.*`` for
    ``algorithm.name``) name no rows when the column and the row keys fix them; another key
    fixed by the column alone is a header key; any other difference is a row key of its own."""
    given = [column] if column else []
    ns = _namespace(column) if column else None

    def own(k: str) -> bool:
        return _namespace(k) == ns

    rows, header = label_keys(configs, given=given, last=own), list[str]()
    for k in sorted(set(differing(configs)) - {column, *rows}, key=_priority):
        if own(k) or _function_of(configs, k, rows):
            continue
        (header if column and _function_of(configs, k, [column]) else rows).append(k)
    return rows, header


def short(key: str) -> str:
    key = key.removeprefix(CHOICE)
    return key.removesuffix(".name")


def columns(keys: Iterable[str], reserved: Iterable[str] = ()) -> dict[str, str]:
    """Each config key's column (or label) name in an output beside the ``reserved`` columns
    (a table's statistics, a report's status): its :func:`short` name where that names it
    alone, else the key in full (``choice:algorithm`` beside ``algorithm.name``), else
    ``config:KEY``. No two keys, and no key and reserved column, share a name, so an output's
    every column holds one thing's values (a config key ``n`` is never a seed count)."""
    keys, reserved = list(keys), set(reserved)
    shorts = [short(k) for k in keys]
    out = {}
    for k, s in zip(keys, shorts):
        if shorts.count(s) == 1 and s not in reserved:
            out[k] = s
        else:
            out[k] = k if k not in reserved else f"config:{k}"
    return out


def fmt(v: object) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)
