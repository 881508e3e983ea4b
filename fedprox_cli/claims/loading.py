"""A claim's runs read from its results folders (through :mod:`..analysis.results`' loaders, once
per process: claims share folders), each placed at its declared grid point and validated
(:mod:`.validate`)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from ..analysis import groups, results
from ..analysis.run import Run
from ..common import metric_table as mt
from ..common.errors import UserError, require
from . import validate
from .declare import Claim, Point, RunSet
from .text import canon

PRESENT = ("finished", "diverged")  # a run that counts as made; others are resumed by `run`


def key_of(runs: list[Run], key: str) -> str:
    return groups.config_key(runs, key)


def is_(value: object, want: object) -> bool:
    """``value`` (a run's config) is ``want`` (a declared value, or any of a list of them)."""
    if isinstance(want, list):
        return any(is_(value, w) for w in want)
    return groups.matches(value, groups.fmt(want) if isinstance(want, float) else str(want))


def point(run: Run, runs: list[Run], rs: RunSet) -> Point | None:
    """The run's declared grid point (the keys of the first listed point it matches, then the
    grid's), or None when it is outside the declaration."""
    grid = tuple((k, run.config.get(key_of(runs, k))) for k in rs.grid)
    if not all(any(is_(v, w) for w in rs.grid[k]) for k, v in grid):
        return None
    for p in rs.points or ({},):
        got = tuple((k, run.config.get(key_of(runs, k))) for k in p)
        if all(is_(v, p[k]) for k, v in got):
            return got + grid
    return None


def placed(run: Run, runs: list[Run], rs: RunSet) -> Point:
    """:func:`point` of a run that :func:`load_runs` kept (each is at a declared point)."""
    p = point(run, runs, rs)
    assert p is not None, f"{run.path} is at no declared point"
    return p


def declared_key(point: Point) -> tuple[tuple[str, str], ...]:
    return tuple((k, canon(v)) for k, v in point)


def minutes(run: Run) -> float:
    """A run's job-minutes from its summary (started to ended), else its training time."""
    try:
        s = run.summary
        return (
            datetime.fromisoformat(s["ended"]) - datetime.fromisoformat(s["started"])
        ).total_seconds() / 60
    except (ValueError, KeyError):
        return run.final(mt.TIME.name) / 60 if run.has(mt.TIME.name) else 0.0


def device(run: Run) -> str:
    return run.summary.get("device", "cpu")


def where(runs: list[Run], want: dict[str, Any]) -> list[Run]:
    """The runs whose config has every value of ``want``."""
    for k, w in want.items():
        runs = [r for r in runs if is_(r.config.get(key_of(runs, k)), w)]
    return runs


def load_runs(
    claim: Claim, rs: RunSet, root: Path, warn: Callable[[str], None], strict: bool = True
) -> tuple[list[Run], list[str]]:
    """The runs of ``rs`` under ``root`` (its folders, and its ``into`` folder once made) that
    match ``where`` and the grid, at any seed, validated (:func:`.validate.check`): the runs that
    are evidence and the findings (one line each: a folder that cannot be read, a run of another
    setting, rows that do not fit, a duplicate). ``strict``: a missing folder is a user error
    (else it holds no runs)."""
    folders = [root / f for f in dict.fromkeys([*rs.folders, rs.into]) if f]
    for f in folders[: len(rs.folders)]:  # a sensitivity grid's new folder may not be made yet
        require(
            f.is_dir() or not strict or (rs.choices and f.name == rs.into),
            f"claim {claim.id}: no results folder {f}",
        )
    folders = [f for f in folders if f.is_dir()]
    if not folders:
        return [], []
    try:
        runs, skipped = _read(tuple(folders))
    except UserError as e:  # folders without a readable run
        if not strict:
            return [], []
        raise UserError(f"claim {claim.id}: {e}") from None
    findings = [f"claim {claim.id}: {line}" for line in skipped]
    runs, found = validate.fixed(claim, rs, runs, is_)  # every run in its folders
    runs = where(runs, rs.where)
    at = {id(r): point(r, runs, rs) for r in runs}
    # a run outside the declaration is another figure's, unless its config.yaml was edited out
    # of it: its record (.hydra/config.yaml) names it
    found += [
        f"claim {claim.id}: {r.path}: {why}"
        for r in runs
        if at[id(r)] is None and (why := validate.recorded(r))
    ]
    kept, more = validate.check(
        claim, [r for r in runs if at[id(r)] is not None], lambda r: at[id(r)]
    )
    return kept, findings + found + more


def fixed_runs(claim: Claim, rs: RunSet, root: Path) -> list[Run]:
    """Every run in the folders of ``rs`` with the settings it fixes, at any point of its grid
    or outside it (the repeats of a measurement a ratio's noise is read over: runs at the other
    values of a key the run set selects on); unreadable folders hold none."""
    folders = tuple(f for f in (root / x for x in rs.folders) if f.is_dir())
    try:
        runs = _read(folders)[0] if folders else []
    except UserError:
        return []
    return validate.fixed(claim, rs, runs, is_)[0]


@functools.lru_cache(maxsize=32)
def _cached(folders: tuple[Path, ...]) -> tuple[list[Run], list[str]]:
    skipped: list[str] = []

    def note(s: results.Skipped) -> None:  # a folder that cannot be read, or a run that ended
        if s.status in (None, "finished", "diverged"):  # without rows; not one that stopped early
            skipped.append(f"{s.path}: {s.why}")

    return results.load(folders, count_once=False, skipped=note), skipped


def _read(folders: tuple[Path, ...]) -> tuple[list[Run], list[str]]:
    """The runs under ``folders`` (every folder, duplicates too) and a line per folder that
    cannot be read, read once per process (claims share folders)."""
    runs, skipped = _cached(folders)
    return list(runs), list(skipped)


def forget() -> None:
    """Drop the runs read so far (a command reads its folders afresh)."""
    _cached.cache_clear()
    validate.forget()
