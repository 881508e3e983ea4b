"""Results folders -> runs (:class:`~.run.Run`): the logic behind reading what ``fedrun-plot``,
``fedrun-table`` and the claims compare.

Each path given is a run folder or a folder searched for them (a sweep). A run folder that cannot
be read (empty or cut ``metrics.csv``, unreadable ``config.yaml``) is skipped with a warning
through the ``warn`` callback of :func:`load`; folders holding the same run count once
(:func:`.groups.once`).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from ..common import run_files
from ..common.errors import require
from ..common.files import StrPath
from ..common.flatten import flatten
from ..config.keys import complete
from ..runs import view
from ..runs.code_record import mixed, mixed_line
from . import jobrecords
from .groups import config_key, is_run_control, matches, once
from .run import CHOICE, Run, status_text

PROGRESS_RUNS, PROGRESS_S = 100, 5.0  # more runs than this: a line every PROGRESS_S while read


def _choices(run: view.RunView) -> dict[str, Any]:
    """The config groups chosen, as ``choice:<group>`` keys (a group with no option chosen, a
    Hydra group and a run-control group left out)."""
    return {
        f"{CHOICE}{g}": c
        for g, c in run.choices().items()
        if c is not None and not g.startswith("hydra/") and not is_run_control(g)
    }


class Skipped(NamedTuple):
    """A folder that :func:`load` leaves out: its path, why (a few words), and for a run that
    wrote no ``metrics.csv`` its status (:attr:`runs.view.RunView.status`; None: it cannot be
    read)."""

    path: Path
    why: str
    status: str | None = None

    def line(self) -> str:
        return f"skipped {self.path}: {self.why}"


def find_runs(
    paths: Sequence[StrPath],
    warn: Callable[[str], None] = lambda _: None,
    skipped: Callable[[Skipped], None] | None = None,
) -> list[Path]:
    """Run folders among ``paths``, each a run folder or a folder searched recursively
    (:func:`runs.view.find`: a folder that cannot be listed is named through ``warn`` and the
    others read), a sweep's jobs in the order it launched them (:func:`launch_order`). Every
    run folder without a ``metrics.csv`` (a run that stopped before its first evaluation) and
    every job a sweep recorded that holds no run (not started: a lock and a log but no
    ``summary.json``, or no folder) goes to ``skipped`` (default: its line through ``warn``,
    :func:`_without_rows`)."""
    skip = skipped or (lambda s: warn(s.line()))
    found: list[Path] = []
    for p in map(Path, paths):
        require(os.path.lexists(p), f"no such results folder: {p}")
        held = list(view.find([p], warn))
        recorded = [
            (r.num, where)
            for s, names in held
            if view.is_sweep(names)
            for r, where in jobrecords.held(s, warn)
        ]
        runs: list[tuple[Path, frozenset[str] | None]] = [
            (d, names) for d, names in held if view.is_run(names)
        ]
        holding = {a for d, _ in runs for a in (_abs(d), *_abs(d).parents)}  # hold a run
        runs += [(where, _listed(where)) for _, where in recorded if _abs(where) not in holding]
        order = launch_order({_abs(where): num for num, where in recorded})
        for d, names in sorted(runs, key=lambda dn: order(dn[0])):
            if names is not None and run_files.METRICS in names:
                found.append(d)
            else:
                skip(_without_rows(d, names))
    found = list(dict.fromkeys(found))
    require(found, f"no run folders (config.yaml + metrics.csv) under {', '.join(map(str, paths))}")
    return found


def _abs(p: Path) -> Path:
    return Path(os.path.abspath(p))


def _listed(folder: Path) -> frozenset[str] | None:
    """What ``folder`` holds (None: no such folder, or one that cannot be listed)."""
    try:
        return frozenset(os.listdir(folder))
    except OSError:
        return None


def _without_rows(run_dir: Path, names: frozenset[str] | None) -> Skipped:
    """A run folder (``names``: what it holds; None: a recorded job without a folder) without
    ``metrics.csv``, and why: a run that stopped before its first evaluation (its status), or
    one not started, without a summary (a sweep's job stopped before it began or not yet
    begun, a run stopped before its summary was written: only its lock and log)."""
    status = view.read(run_dir).status if names is not None and view.is_run(names) else None
    if status not in (None, view.MISSING):
        return Skipped(run_dir, f"no metrics.csv (status: {status_text(status)})", status)
    holds = (
        "no folder"
        if names is None
        else f"its folder holds {', '.join(sorted(names)) if names else 'nothing'}"
    )
    return Skipped(run_dir, f"{view.NOT_STARTED}: no summary.json ({holds})", view.MISSING)


def launch_order(jobs: dict[Path, int]) -> Callable[[Path], tuple[float, Path]]:
    """A sort key for run folders: a sweep's jobs (``jobs``: each job's folder, absolute, and
    its number from its sweep's records, :func:`.jobrecords.held`; a ``seed_<s>`` run by its
    job's) in the order its last command launched them, the others after them by path."""

    def key(run_dir: Path) -> tuple[float, Path]:
        here = _abs(run_dir)
        n = next((jobs[a] for a in (here, *here.parents) if a in jobs), math.inf)
        return (n, run_dir)

    return key


def load_run(run_dir: Path) -> Run:
    """One run folder, a view of its files (:mod:`runs.view`); :class:`run_files.RunFileError`
    when its config, metrics or summary cannot be read (a summary holding a field of another
    type included: corrupt)."""
    run = view.read(run_dir)
    cfg = run.config()
    metrics = run.metrics()
    if run.fault is not None:
        raise run.fault
    return Run(
        run_dir,
        {**complete(flatten(cfg)), **_choices(run)},
        metrics,
        run.status,
        run.error,
        run.summary.get("code", {}),
        mixed_line(run.summary.get("code_history")) or "",
        run.summary,
    )


def load(
    paths: Sequence[StrPath],
    where: Sequence[str] = (),
    warn: Callable[[str], None] = lambda _: None,
    count_once: bool = True,
    skipped: Callable[[Skipped], None] | None = None,
) -> list[Run]:
    """All readable runs under ``paths`` whose config matches every ``KEY=VALUE`` in ``where``;
    each folder left out goes to ``skipped`` (:class:`Skipped`; default: one ``warn`` line
    naming it). ``count_once``: folders holding the same run count once (:func:`.groups.once`;
    for figures and tables), else every folder is listed."""
    skip = skipped or (lambda s: warn(s.line()))
    runs, found = [], find_runs(paths, warn, skip)
    started = last = time.monotonic()
    for i, p in enumerate(found, 1):
        try:
            runs.append(load_run(p))
        except run_files.RunFileError as e:
            skip(Skipped(p, str(e)))
        now = time.monotonic()
        if len(found) > PROGRESS_RUNS and now - last >= PROGRESS_S:
            warn(f"read {i} of {len(found)} run folders ({now - started:.0f} s)")
            last = now
    require(runs, f"no readable run under {', '.join(map(str, paths))}")
    if count_once:
        runs = once(runs, warn)
    for cond in where:
        require("=" in cond, f"--where takes KEY=VALUE, got {cond!r}")
        k, v = cond.split("=", 1)
        k = config_key(runs, k)
        runs = [r for r in runs if matches(r.config.get(k), v)]
        require(runs, f"no run has {cond}")
    for line in mixed([r.code for r in runs]):
        warn(f"note: runs made by different code side by side: {line}")
    for r in runs:
        if r.mixed:
            warn(f"note: {r.path} was continued with other code ({r.mixed})")
    return runs


def having(
    runs: list[Run], columns: Iterable[str], warn: Callable[[str], None] = lambda _: None
) -> list[Run]:
    """The runs whose ``metrics.csv`` has every column in ``columns`` (``round``/``time``/
    ``bytes`` or a metric); the others are skipped with a ``warn`` line each. None having one
    is a user error."""
    for c in columns:
        require(
            any(r.has(c) for r in runs),
            f"metrics.csv has no column {c!r} in any run (columns: "
            f"{', '.join(runs[0].metrics.columns)})",
        )
    kept = []
    for r in runs:
        missing = [c for c in columns if not r.has(c)]
        if missing:
            names = ", ".join(map(repr, missing))
            warn(f"skipped {r.path}: {Path(r.path) / run_files.METRICS} has no column {names}")
        else:
            kept.append(r)
    return kept


def left_out(
    runs: list[Run], metric: str | None = None, how: str = "last"
) -> list[tuple[Run, str]]:
    """(run, reason) for each run that does not enter a mean of ``metric``; the reason carries
    the summary's error message when there is one."""
    out = []
    for r in runs:
        why = r.problem(metric, how)
        if why is not None:
            out.append((r, f"{why}: {r.error}" if r.error else why))
    return out


def note_runs(
    runs: list[Run], metric: str | None, final: str | None, warn: Callable[[str], None]
) -> None:
    """One ``warn`` line per run left out of the means of ``metric``."""
    for r, why in left_out(runs, metric, final or "last"):
        warn(f"left out of the mean: {r.path} ({why})")
