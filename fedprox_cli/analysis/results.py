"""Results folders -> runs (:class:`~.run.Run`): the logic behind reading what ``fedrun-plot``,
``fedrun-table`` and the claims compare.

Each path given is a run folder or a folder searched for them (a sweep). A run folder that cannot
be read (empty or cut ``metrics.csv``, unreadable ``config.yaml``) is skipped with a warning
through the ``warn`` callback of :func:`load`; folders holding the same run count once
(:func:`.groups.once`).
"""

from __future__ import annotations

import csv
import math
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import pandas as pd

from ..common import guarded, run_files
from ..common.errors import require
from ..common.flatten import flatten
from ..config.keys import complete
from ..runs.code_record import mixed
from ..runs.outputs import effective_status, model_metrics_only, read_summary
from .groups import config_key, is_run_control, matches, once
from .jobrecords import records
from .run import CHOICE, Run, status_text

PROGRESS_RUNS, PROGRESS_S = 100, 5.0  # more runs than this: a line every PROGRESS_S while read


class BrokenRun(Exception):
    """A run folder that cannot be read; its message says why in a few words."""


def first_line(e: Exception) -> str:
    """The first line of ``e``'s message, or its type's name."""
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


def _choices(run_dir: Path) -> dict:
    hydra_yaml = run_dir / run_files.HYDRA / run_files.HYDRA_RECORD
    if not hydra_yaml.exists():
        return {}
    try:
        choices = guarded.read_mapping(hydra_yaml)["hydra"]["runtime"]["choices"]
        require(isinstance(choices, dict), "hydra.runtime.choices is not a mapping")
    except guarded.Unreadable as e:
        raise BrokenRun(f".hydra/hydra.yaml is unreadable: {e.why}") from None
    except Exception as e:  # noqa: BLE001 -- any unreadable record is one broken run
        raise BrokenRun(f".hydra/hydra.yaml is unreadable ({first_line(e)})") from None
    return {
        f"{CHOICE}{g}": c
        for g, c in choices.items()  # no option chosen = a group not offered
        if c is not None and not g.startswith("hydra/") and not is_run_control(g)
    }


def find_runs(paths, warn: Callable[[str], None] = lambda _: None) -> list[Path]:
    """Run folders among ``paths``: each is a run folder or a folder searched recursively. A
    folder with a ``summary.json`` or ``config.yaml`` but no ``metrics.csv`` (a run that stopped
    before its first evaluation) is named through ``warn``."""
    found = []
    for p in map(Path, paths):
        require(p.exists(), f"no such results folder: {p}")
        if (p / run_files.METRICS).exists() or (p / run_files.SUMMARY).exists():
            dirs = [p]
        else:
            dirs = sorted(
                {
                    m.parent
                    for name in (run_files.METRICS, run_files.SUMMARY)
                    for m in p.rglob(name)
                },
                key=launch_order(p),
            )
        for d in dirs:
            if (d / run_files.METRICS).exists():
                found.append(d)
            else:
                warn(f"skipped {d}: no metrics.csv (status: {status_text(_status(d)[0])})")
    found = list(dict.fromkeys(found))
    require(found, f"no run folders (config.yaml + metrics.csv) under {', '.join(map(str, paths))}")
    return found


def moved_job(sweep: Path, recorded: str) -> Path:
    """Where a job folder recorded as ``recorded`` (an absolute path where the sweep ran) is now
    that its sweep is ``sweep``: the part below the sweep's own name, under ``sweep`` -- so a
    copied or cloned results folder keeps its launch order."""
    parts = Path(recorded).parts
    at = [k for k, p in enumerate(parts) if p == sweep.name]
    return Path(os.path.abspath(sweep.joinpath(*parts[at[-1] + 1 :]))) if at else Path(recorded)


def launch_order(folder: Path) -> Callable[[Path], tuple]:
    """A sort key for the run folders under ``folder``: a sweep's jobs named by config in the
    order its last command launched them (its job records, :mod:`.jobrecords`; a ``seed_<s>``
    run by its job's), the others after them by path."""
    num = {
        moved_job(m.parent, r.folder): r.num
        for m in Path(folder).rglob(".fedrun")
        for r in records(m.parent)
    }

    def key(run_dir: Path) -> tuple:
        here = Path(os.path.abspath(run_dir))
        n = next((num[a] for a in (here, *here.parents) if a in num), math.inf)
        return (n, run_dir)

    return key


def _status(run_dir: Path) -> tuple[str, str, dict]:
    """The run's effective status (``dead`` for a recorded ``running`` whose process
    is gone: :func:`outputs.effective_status`), its error message and its code record;
    :class:`BrokenRun` for a summary.json that cannot be read."""
    try:
        summary = read_summary(run_dir)
    except guarded.Unreadable as e:
        raise BrokenRun(f"summary.json is unreadable: {e.why}") from None
    except (OSError, ValueError):
        summary = {}
    return effective_status(run_dir), str(summary.get("error", "")), summary.get("code", {})


def _numbers(column: pd.Series) -> pd.Series:
    """A column of number strings as numbers; ``nan`` and ``inf`` (a diverged run's last row, as
    ``repr`` writes them), which ``pd.to_numeric`` refuses, through ``float``."""
    try:
        return pd.to_numeric(column)
    except ValueError:
        return column.map(float)


def _checked(lines: Iterable[str]) -> list[str]:
    """The header of a metrics.csv's ``lines`` once every row is checked to have its fields,
    row by row (no copy of the table is made: a file of a million rows is read in the memory
    of its numbers); :class:`BrokenRun` for a cut row, no rows, a stray quote."""
    rows = csv.reader(lines)
    try:
        header = next(rows)
        n = 0
        for n, row in enumerate(rows, 1):
            if len(row) != len(header):
                raise BrokenRun(
                    f"metrics.csv is cut (line {n + 1} has {len(row)} of {len(header)} fields)"
                )
    except csv.Error as e:  # a cell over the csv module's field limit (128 KB), a stray quote
        raise BrokenRun(f"metrics.csv is unreadable ({first_line(e)})") from None
    if not n:
        raise BrokenRun("metrics.csv has a header and no rows")
    return header


def _table(data: bytes, header: list[str], lines: Iterable[str]) -> pd.DataFrame:
    """The checked rows of a metrics.csv as numbers: pandas' C reader, every cell as written
    (no "NA" taken for missing); a column it leaves as text (``nan``, ``inf``, or not numbers)
    through :func:`_numbers`. A header naming a column twice: cell by cell."""
    if len(set(header)) != len(header):
        header, *rows = list(csv.reader(lines))
        return pd.DataFrame(rows, columns=header).apply(_numbers)
    df = guarded.parse_csv(data, keep_default_na=False, na_values=[])
    for c in df.columns:
        if not pd.api.types.is_numeric_dtype(df[c]) or pd.api.types.is_bool_dtype(df[c]):
            df[c] = _numbers(df[c].astype(str))
    return df


def read_metrics(path: Path) -> pd.DataFrame:
    """``metrics.csv`` as numbers; :class:`BrokenRun` if it is empty, cut (a row with fewer
    fields than the header, or no end of line after the last row), or not numbers. Read in
    about the memory of its bytes and its numbers (:func:`_checked`)."""
    try:
        data = guarded.read_bytes(path, guarded.TABLE_BYTES)
        if not data.strip():
            raise BrokenRun("metrics.csv is empty")
        if not data.endswith(b"\n"):
            raise BrokenRun("metrics.csv is cut (no end of line after its last row)")
        header = _checked(guarded.lines(path, data))
        if "round" not in header:
            raise BrokenRun(f"metrics.csv has no column 'round' (columns: {', '.join(header)})")
        table = _table(data, header, guarded.lines(path, data))
    except guarded.Unreadable as e:
        raise BrokenRun(f"metrics.csv is unreadable: {e.why}") from None
    except OSError as e:
        raise BrokenRun(f"metrics.csv is unreadable ({first_line(e)})") from None
    except ValueError as e:
        raise BrokenRun(
            f"metrics.csv holds a value that is not a number ({first_line(e)})"
        ) from None
    return model_metrics_only(table)


def load_run(run_dir: Path) -> Run:
    """One run folder; :class:`BrokenRun` when its config or metrics cannot be read."""
    try:
        cfg = guarded.read_mapping(run_dir / run_files.CONFIG)
    except guarded.Unreadable as e:
        raise BrokenRun(f"config.yaml is unreadable: {e.why}") from None
    except Exception as e:  # noqa: BLE001 -- yaml, OmegaConf and OS errors alike
        raise BrokenRun(f"config.yaml is unreadable ({first_line(e)})") from None
    if not isinstance(cfg, dict) or not cfg:
        raise BrokenRun("config.yaml is empty or not a mapping")
    metrics = read_metrics(run_dir / run_files.METRICS)
    status, error, code = _status(run_dir)
    return Run(
        run_dir, {**complete(flatten(cfg)), **_choices(run_dir)}, metrics, status, error, code
    )


def load(
    paths,
    where: list[str] = (),
    warn: Callable[[str], None] = lambda _: None,
    count_once: bool = True,
) -> list[Run]:
    """All readable runs under ``paths`` whose config matches every ``KEY=VALUE`` in ``where``;
    each unreadable one is skipped with one ``warn`` line naming it. ``count_once``: folders
    holding the same run count once (:func:`.groups.once`; for figures and tables), else every
    folder is listed."""
    runs, found = [], find_runs(paths, warn)
    started = last = time.monotonic()
    for i, p in enumerate(found, 1):
        try:
            runs.append(load_run(p))
        except BrokenRun as e:
            warn(f"skipped {p}: {e}")
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
    return runs


def having(runs: list[Run], columns, warn: Callable[[str], None] = lambda _: None) -> list[Run]:
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
            warn(f"skipped {r.path}: metrics.csv has no column {', '.join(map(repr, missing))}")
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
