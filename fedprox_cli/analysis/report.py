"""Result folders -> grouped curves and tables (the logic behind ``fedrun-plot`` and ``fedrun-table``).

A *run* is a folder holding ``config.yaml`` (the resolved config) and ``metrics.csv``. Runs whose
configs differ only in replicate keys (``seed`` and every ``*.seed``) and in run-control keys
that cannot change the numbers (:func:`is_run_control`) form a *group*, aggregated as mean +- std
over its runs. Every other config difference keeps runs apart: nothing is ever pooled. A group's
label names only the config keys that tell the groups apart (e.g. ``algorithm=fedcanon,
partition.alpha=0.1``). When a run folder has Hydra's record (``.hydra/hydra.yaml``), its
config-group choices (e.g. ``algorithm=fedcanon_fig2/fedavg``) join the keys, so runs that
resolve to the same numbers but were chosen differently stay apart.

A run is counted once: folders holding the same run (same settings and seeds: a sweep re-run
into its folder under an older folder layout, a copy) are one run (:func:`once`).

Only finished runs with a finite value enter a mean; the others (diverged, interrupted, running,
error, no summary, non-finite) are counted and shown beside it (:class:`Cell`). A run folder that
cannot be read (empty or cut ``metrics.csv``, unreadable ``config.yaml``) is skipped with a
warning through the ``warn`` callback of :func:`load`.
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple
from pathlib import Path

import numpy as np
import pandas as pd
from omegaconf import OmegaConf

from ..common import guarded
from ..common import streams
from ..common.errors import UserError, describe, require
from ..config import keys
from ..common.flatten import flatten
from ..config.keys import complete
from ..runs.outputs import LOWER_IS_BETTER, effective_status, model_metrics_only, read_summary
from ..runs.code_record import mixed

CHOICE = "choice:"           # prefix of config-group choice keys (choice:algorithm)
X_AXES = {"round": "round", "time": "wall time (s, training only)",
          "bytes": "communication (bytes, up + down)"}
X_COLUMNS = {"round": ("round",), "time": ("time_s",), "bytes": ("bytes_up", "bytes_down")}
LOG_Y = {"stationarity"}     # metrics the papers draw on a log scale
FINALS = ("last", "tail")    # final value: the last evaluation, or the mean of the last 10%


class Direction(NamedTuple):
    """How a metric improves: the sign that makes better values smaller, and its words."""
    sign: int
    best: str       # "lowest"
    improves: str   # "falls"
    beyond: str     # "below": a better value lies below the other
    ends: str       # "lower"


def direction(metric: str) -> Direction:
    """Lower is better for the metrics of :data:`LOWER_IS_BETTER`, higher for the others."""
    if metric in LOWER_IS_BETTER:
        return Direction(1, "lowest", "falls", "below", "lower")
    return Direction(-1, "highest", "rises", "above", "higher")


def status_text(status: str) -> str:
    """A summary status as a cell shows it (``missing`` -> ``no summary``)."""
    return "no summary" if status == "missing" else status


class BrokenRun(Exception):
    """A run folder that cannot be read; its message says why in a few words."""


@dataclass(eq=False)
class Run:
    path: Path
    config: dict            # flat: dotted keys -> scalars, plus choice:<group> keys
    metrics: pd.DataFrame
    status: str             # summary.json's status; "missing" without a readable summary
    error: str = ""         # summary.json's error message, if any
    code: dict = field(default_factory=dict)  # summary.json's code record (runs.code_record)

    def column(self, name: str) -> np.ndarray:
        if name == "bytes":
            return (self.metrics["bytes_up"] + self.metrics["bytes_down"]).to_numpy(float)
        if name == "time":
            return self.metrics["time_s"].to_numpy(float)
        return self.metrics[name].to_numpy(float)

    def has(self, name: str) -> bool:
        return all(c in self.metrics for c in X_COLUMNS.get(name, (name,)))

    def final(self, name: str, how: str = "last") -> float:
        """The last value of ``name`` (``how="last"``), or the mean of its last 10% of
        evaluations, at least one (``how="tail"``)."""
        v = self.column(name)
        k = 1 if how == "last" else max(1, len(v) // 10)
        return float(np.mean(v[-k:]))

    def problem(self, metric: str | None = None, how: str = "last") -> str | None:
        """Why this run must not enter a mean of ``metric`` (None: it may)."""
        if self.status != "finished":
            return status_text(self.status)
        if metric is not None and not math.isfinite(self.final(metric, how)):
            return "non-finite"
        return None

    @property
    def seed(self) -> tuple:
        return tuple(sorted((k, v) for k, v in self.config.items() if is_replicate(k)))


@dataclass
class Group:
    key: tuple              # the config without replicate / run-control keys, sorted (key, value)
    runs: list[Run]
    label: str = ""
    label_values: dict = field(default_factory=dict)

    @property
    def config(self) -> dict:
        return dict(self.key)


@dataclass
class Cell:
    """The runs of one group summarised for one metric: the values of the runs that count, and
    how many were left out and why."""
    values: list[float]
    left_out: dict[str, int]

    @classmethod
    def of(cls, runs: list[Run], metric: str, how: str = "last") -> "Cell":
        values, left = [], {}
        for r in runs:
            why = r.problem(metric, how)
            if why is None:
                values.append(r.final(metric, how))
            else:
                left[why] = left.get(why, 0) + 1
        return cls(values, left)

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def total(self) -> int:
        return self.n + sum(self.left_out.values())

    @property
    def mean(self) -> float:
        return float(np.mean(self.values)) if self.values else math.nan

    @property
    def std(self) -> float:
        return float(np.std(self.values, ddof=1)) if self.n > 1 else math.nan

    def text(self, spec: str = ".4f") -> str:
        """``0.8100 ± 0.0100 (n=3)``, ``0.8100 (n=1)``, ``0.8100 (n=2; diverged 1 of 3)``,
        ``diverged (1 of 1)``: ``±`` only with two or more runs, left-out runs always named."""
        left = ", ".join(f"{why} {c}" for why, c in sorted(self.left_out.items()))
        if not self.values:
            if len(self.left_out) == 1:
                (why, c), = self.left_out.items()
                return f"{why} ({c} of {self.total})"
            return f"{left} (of {self.total})"
        value = f"{self.mean:{spec}}" + (f" ± {self.std:{spec}}" if self.n > 1 else "")
        return f"{value} (n={self.n}" + (f"; {left} of {self.total})" if left else ")")


# ------------------------------------------------------------------------------------ loading


def _choices(run_dir: Path) -> dict:
    hydra_yaml = run_dir / ".hydra" / "hydra.yaml"
    if not hydra_yaml.exists():
        return {}
    try:
        choices = OmegaConf.to_container(guarded.read_config(hydra_yaml).hydra.runtime.choices)
    except guarded.Unreadable as e:
        raise BrokenRun(f".hydra/hydra.yaml is unreadable: {e.why}") from None
    except Exception as e:  # noqa: BLE001 -- any unreadable record is one broken run
        raise BrokenRun(f".hydra/hydra.yaml is unreadable ({_first_line(e)})") from None
    return {f"{CHOICE}{g}": c for g, c in choices.items()  # no option chosen = a group not offered
            if c is not None and not g.startswith("hydra/") and not is_run_control(g)}


def _first_line(e: Exception) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


def find_runs(paths, warn: Callable[[str], None] = lambda _: None) -> list[Path]:
    """Run folders among ``paths``: each is a run folder or a folder searched recursively. A
    folder with a ``summary.json`` or ``config.yaml`` but no ``metrics.csv`` (a run that stopped
    before its first evaluation) is named through ``warn``."""
    found = []
    for p in map(Path, paths):
        require(p.exists(), f"no such results folder: {p}")
        if (p / "metrics.csv").exists() or (p / "summary.json").exists():
            dirs = [p]
        else:
            dirs = sorted({m.parent for name in ("metrics.csv", "summary.json") for m in p.rglob(name)},
                          key=launch_order(p))
        for d in dirs:
            if (d / "metrics.csv").exists():
                found.append(d)
            else:
                warn(f"skipped {d}: no metrics.csv (status: {status_text(_status(d)[0])})")
    found = list(dict.fromkeys(found))
    require(found, f"no run folders (config.yaml + metrics.csv) under {', '.join(map(str, paths))}")
    return found


def launch_order(folder: Path) -> Callable[[Path], tuple]:
    """A sort key for the run folders under ``folder``: a sweep's jobs named by config in the
    order its last command launched them (its job records, :mod:`sweep`; a ``seed_<s>`` run
    by its job's), the others after them by path."""
    from ..cli.sweep import records
    num = {Path(r.folder): r.num for m in Path(folder).rglob(".fedrun") for r in records(m.parent)}

    def key(run_dir: Path) -> tuple:
        here = Path(os.path.abspath(run_dir))
        n = next((num[a] for a in (here, *here.parents) if a in num), math.inf)
        return (n, run_dir)
    return key


def _status(run_dir: Path) -> tuple[str, str, dict]:
    """The run's effective status (``dead`` / ``stale`` for a recorded ``running`` whose process
    is gone or silent: :func:`outputs.effective_status`), its error message and its code record;
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


def read_metrics(path: Path) -> pd.DataFrame:
    """``metrics.csv`` as numbers; :class:`BrokenRun` if it is empty, cut (a row with fewer
    fields than the header, or no end of line after the last row), or not numbers."""
    try:
        text = guarded.read_text(path, guarded.TABLE_BYTES)
    except guarded.Unreadable as e:
        raise BrokenRun(f"metrics.csv is unreadable: {e.why}") from None
    except OSError as e:
        raise BrokenRun(f"metrics.csv is unreadable ({_first_line(e)})") from None
    if not text.strip():
        raise BrokenRun("metrics.csv is empty")
    if not text.endswith("\n"):
        raise BrokenRun("metrics.csv is cut (no end of line after its last row)")
    header, *rows = list(csv.reader(io.StringIO(text)))
    for i, row in enumerate(rows, 2):
        if len(row) != len(header):
            raise BrokenRun(f"metrics.csv is cut (line {i} has {len(row)} of {len(header)} fields)")
    if not rows:
        raise BrokenRun("metrics.csv has a header and no rows")
    if "round" not in header:
        raise BrokenRun(f"metrics.csv has no column 'round' (columns: {', '.join(header)})")
    try:
        return model_metrics_only(pd.DataFrame(rows, columns=header).apply(_numbers))
    except ValueError as e:
        raise BrokenRun(f"metrics.csv holds a value that is not a number ({_first_line(e)})") from None


def load_run(run_dir: Path) -> Run:
    """One run folder; :class:`BrokenRun` when its config or metrics cannot be read."""
    try:
        cfg = OmegaConf.to_container(guarded.read_config(run_dir / "config.yaml"), resolve=False)
    except guarded.Unreadable as e:
        raise BrokenRun(f"config.yaml is unreadable: {e.why}") from None
    except Exception as e:  # noqa: BLE001 -- yaml, OmegaConf and OS errors alike
        raise BrokenRun(f"config.yaml is unreadable ({_first_line(e)})") from None
    if not isinstance(cfg, dict) or not cfg:
        raise BrokenRun("config.yaml is empty or not a mapping")
    metrics = read_metrics(run_dir / "metrics.csv")
    status, error, code = _status(run_dir)
    return Run(run_dir, {**complete(flatten(cfg)), **_choices(run_dir)}, metrics, status, error, code)


def load(paths, where: list[str] = (), warn: Callable[[str], None] = lambda _: None,
         count_once: bool = True) -> list[Run]:
    """All readable runs under ``paths`` whose config matches every ``KEY=VALUE`` in ``where``;
    each unreadable one is skipped with one ``warn`` line naming it. ``count_once``: folders
    holding the same run count once (:func:`once`; for figures and tables), else every folder
    is listed."""
    runs = []
    for p in find_runs(paths, warn):
        try:
            runs.append(load_run(p))
        except BrokenRun as e:
            warn(f"skipped {p}: {e}")
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
        require(any(r.has(c) for r in runs),
                f"metrics.csv has no column {c!r} in any run (columns: "
                f"{', '.join(runs[0].metrics.columns)})")
    kept = []
    for r in runs:
        missing = [c for c in columns if not r.has(c)]
        if missing:
            warn(f"skipped {r.path}: metrics.csv has no column {', '.join(map(repr, missing))}")
        else:
            kept.append(r)
    return kept


def left_out(runs: list[Run], metric: str | None = None, how: str = "last") -> list[tuple[Run, str]]:
    """(run, reason) for each run that does not enter a mean of ``metric``; the reason carries
    the summary's error message when there is one."""
    out = []
    for r in runs:
        why = r.problem(metric, how)
        if why is not None:
            out.append((r, f"{why}: {r.error}" if r.error else why))
    return out


def note_runs(runs: list[Run], metric: str | None, final: str | None,
              warn: Callable[[str], None]) -> None:
    """One ``warn`` line per run left out of the means of ``metric``."""
    for r, why in left_out(runs, metric, final or "last"):
        warn(f"left out of the mean: {r.path} ({why})")


def identity(run: Run) -> tuple:
    """What makes a run the run it is: its :func:`settings` and its seeds. Two folders with one
    identity hold the same run (a sweep re-run into another folder layout, a copied folder)."""
    return tuple(sorted(settings(run).items())) + run.seed


def _preference(run: Run) -> tuple:
    return (run.status != "finished", -len(run.metrics), str(run.path))


def once(runs: list[Run], warn: Callable[[str], None] = lambda _: None) -> list[Run]:
    """``runs`` with each run counted once: of the folders of one :func:`identity` the one kept
    is finished if one is, else the one with the most evaluations (then the first by path);
    one ``warn`` line names each folder left out."""
    by_id: dict[tuple, list[Run]] = {}
    for r in runs:
        by_id.setdefault(identity(r), []).append(r)
    kept = {id(min(same, key=_preference)) for same in by_id.values()}
    for same in by_id.values():
        best = min(same, key=_preference)
        for r in same:
            if r is not best:
                warn(f"note: {r.path} and {best.path} have the same settings and seeds; "
                     f"counted once, from {best.path}")
    return [r for r in runs if id(r) in kept]


def config_key(runs: list[Run], key: str) -> str:
    """``key`` as the runs know it: a dotted config key, else a config-group choice."""
    return key if any(key in r.config for r in runs) else f"{CHOICE}{key}"


def split(runs: list[Run], keys: list[str]) -> dict[str, list[Run]]:
    """Runs split by their values of ``keys`` (the panels of a figure), titled ``k=v, ...``."""
    keys = [config_key(runs, k) for k in keys]
    for k in keys:
        require(any(k in r.config for r in runs), f"no run has a config key {short(k)!r}")
    out: dict[tuple, list[Run]] = {}
    for r in runs:
        out.setdefault(tuple(r.config.get(k, "-") for k in keys), []).append(r)
    return {", ".join(f"{short(k)}={fmt(v)}" for k, v in zip(keys, values)): out[values]
            for values in sorted(out, key=order)}


def order(values) -> tuple:
    """A sort key for tuples of config values: numbers by size, before strings."""
    return tuple((0, v, "") if _number(v) else (1, 0, str(v)) for v in values)


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def matches(value, text: str) -> bool:
    """``value`` is ``text``, or one of its comma-separated alternatives (``K=10,20,40``)."""
    if "," in text:
        return any(matches(value, t) for t in text.split(","))
    if _number(value):
        try:
            return math.isclose(float(value), float(text), rel_tol=1e-9)
        except ValueError:
            return False
    return str(value) == text


# ----------------------------------------------------------------------------------- grouping


def is_replicate(key: str) -> bool:
    return key == "seed" or key.endswith(".seed")


def is_run_control(key: str, final: str | None = None) -> bool:
    """Keys that cannot change the compared numbers: checkpointing, resume, data location,
    oracle chunking, Hydra and logger settings, and ``eval_every`` when the compared value is
    the last evaluation (``final="last"``; with ``"tail"`` the cadence decides which
    evaluations are averaged)."""
    return keys.is_run_control(key) or (final == "last" and key == "eval_every")


def settings(run: Run, final: str | None = None, ignore=()) -> dict:
    """The config keys of ``run`` that decide its numbers (no replicate, run-control or
    ``ignore`` keys)."""
    return {k: v for k, v in run.config.items()
            if not is_replicate(k) and not is_run_control(k, final) and k not in ignore}


def group(runs: list[Run], ignore=(), final: str | None = None, shown=()) -> list[Group]:
    """Runs grouped by :func:`settings` (so only seeds and run control differ within a group),
    labelled by the keys that tell the groups apart beyond the ``shown`` ones (a figure's
    panel keys). ``final`` as in :func:`is_run_control`."""
    groups: dict[tuple, Group] = {}
    for r in runs:
        key = tuple(sorted(settings(r, final, ignore).items(), key=lambda kv: kv[0]))
        groups.setdefault(key, Group(key, [])).runs.append(r)
    out = list(groups.values())
    keys = label_keys([g.config for g in out], given=shown)
    for g in out:
        g.label_values = {k: g.config[k] for k in keys if k in g.config}
        g.label = ", ".join(f"{short(k)}={fmt(v)}" for k, v in g.label_values.items()) or "all runs"
    return sorted(out, key=lambda g: order(g.config.get(k, "") for k in [*shown, *keys]))


def _priority(key: str) -> tuple:
    if key.startswith(CHOICE):
        return (3, key)
    if "." not in key:
        return (1, key)
    return (0 if key.endswith(".name") else 2, key)


def differing(configs: list[dict]) -> list[str]:
    keys = {k for c in configs for k in c}
    return [k for k in keys if len({repr(c.get(k)) for c in configs}) > 1]


def _classes(configs: list[dict], keys) -> int:
    return len({tuple(repr(c.get(k)) for k in keys) for c in configs})


def shared(runs: list[Run]) -> dict:
    """The :func:`settings` all ``runs`` share (a figure's caption)."""
    first = settings(runs[0])
    return {k: v for k, v in first.items() if all(repr(settings(r).get(k)) == repr(v) for r in runs)}


def label_keys(configs: list[dict], given=(), last=lambda k: False) -> list[str]:
    """The keys that tell ``configs`` apart beyond the ``given`` ones: names first, then
    top-level keys, then the rest, then group choices (keys for which ``last`` holds after
    all of them); a key is kept only if it splits configs the kept keys do not."""
    kept: list[str] = []
    for k in sorted(set(differing(configs)) - set(given), key=lambda k: (last(k), _priority(k))):
        if _classes(configs, [*given, *kept, k]) > _classes(configs, [*given, *kept]):
            kept.append(k)
    return kept


def _function_of(configs: list[dict], key: str, keys) -> bool:
    """Whether ``key``'s value is fixed by the values of ``keys`` across ``configs``."""
    return _classes(configs, [*keys, key]) == _classes(configs, keys)


def short(key: str) -> str:
    key = key.removeprefix(CHOICE)
    return key.removesuffix(".name")


def fmt(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def band(runs: list[Run], x: str, y: str) -> pd.DataFrame:
    """Per evaluated round: mean of x, and mean / std / count of y over ``runs``.

    Runs are aligned on the round column; rounds not reached by every run use the runs that
    reached them (count says how many)."""
    frames = [pd.DataFrame({"round": r.column("round"), "x": r.column(x), "y": r.column(y)})
              for r in runs]
    stacked = pd.concat(frames, keys=range(len(frames)))
    agg = stacked.groupby("round").agg(x=("x", "mean"), mean=("y", "mean"), std=("y", "std"),
                                       count=("y", "size"))
    return agg.fillna({"std": 0.0}).reset_index()


# ------------------------------------------------------------------------------------- slopes


def fit_line(xs, ys) -> tuple[float, float, float]:
    """Least-squares slope, intercept and R^2 of ``ys`` on ``xs``."""
    xs, ys = np.asarray(xs, float), np.asarray(ys, float)
    b, a = np.polyfit(xs, ys, 1)
    ss = float(((ys - ys.mean()) ** 2).sum())
    r2 = 1.0 - float(((ys - (a + b * xs)) ** 2).sum()) / ss if ss > 0 else 1.0
    return float(b), float(a), r2


def slope(runs: list[Run], key: str, metric: str = "stationarity", final: str = "last",
          warn: Callable[[str], None] = lambda _: None) -> list[dict]:
    """Least-squares slope of log(final metric) against log(key) (FedNMap Figs. 3b, 4b), one fit
    per group of the other keys, on the means over seeds; with R^2, and with several seeds
    a fit per seed (``seed_slopes``: the slopes of the seeds present at two or more values of
    ``key``). Runs that do not count (diverged, unfinished, non-finite) leave their point's
    mean; a point with none left is dropped with a ``warn`` line."""
    require(all(key in r.config for r in runs), f"--slope {key}: some runs have no config key {key!r}")
    fits = []
    for curve in group(runs, ignore=(key, *determined_by(runs, key)), final=final):
        pts, per_seed = [], {}
        for v, rs in sorted(_by(curve.runs, key).items(), key=lambda kv: order([kv[0]])):
            cell = Cell.of(rs, metric, final)
            if cell.n == 0:
                warn(f"--slope {key}: no point at {key}={fmt(v)} ({cell.text()})")
                continue
            require(_number(v) and v > 0 and cell.mean > 0, f"--slope {key}: {key} and the final {metric} must "
                    f"be positive for a log-log fit ({key}={fmt(v)}, mean {cell.mean:g})")
            pts.append((v, cell.mean, cell.std, cell.n, cell.text(".4g")))
            for r in rs:
                if r.problem(metric, final) is None:
                    per_seed.setdefault(r.seed, []).append((v, r.final(metric, final)))
        where = f" ({curve.label})" if curve.label != "all runs" else ""
        require(len(pts) >= 2, f"--slope {key}{where}: need final {metric} at two or more values "
                f"of {key}, got {len(pts)}")
        b, a, r2 = fit_line(np.log([p[0] for p in pts]), np.log([p[1] for p in pts]))
        seed_slopes = [fit_line(np.log([p[0] for p in ps]), np.log([p[1] for p in ps]))[0]
                       for ps in per_seed.values() if len({p[0] for p in ps}) >= 2 and
                       all(p[1] > 0 for p in ps)]
        fits.append({"label": curve.label, "slope": b, "intercept": a, "r2": r2, "points": pts,
                     "seed_slopes": seed_slopes if len(seed_slopes) > 1 else []})
    return fits


def seed_interval(fit: dict) -> str:
    """``-1.44 ± 0.02 (min -1.46, max -1.42; 3 seeds)`` from a fit's per-seed slopes, or ``""``."""
    s = np.array(fit["seed_slopes"])
    if len(s) < 2:
        return ""
    return (f"{s.mean():.3f} ± {s.std(ddof=1):.3f} (min {s.min():.3f}, max {s.max():.3f}; "
            f"{len(s)} seeds)")


def determined_by(runs: list[Run], key: str) -> list[str]:
    """Config keys that vary across ``runs`` but take one value per value of ``key`` (e.g.
    FedNMap's eta_a = 1/K when K is swept): they move with ``key``, not beside it."""
    keys = {k for r in runs for k in r.config} - {key}
    by_key = _by(runs, key).values()
    return sorted(k for k in keys
                  if len({repr(r.config.get(k)) for r in runs}) > 1
                  and all(len({repr(r.config.get(k)) for r in rs}) == 1 for rs in by_key))


def _by(runs: list[Run], key: str) -> dict:
    out: dict = {}
    for r in runs:
        out.setdefault(r.config.get(key), []).append(r)
    return out


# ---------------------------------------------------------------------------------- scripts


def add_arguments(p) -> None:
    """The arguments ``fedrun-plot`` and ``fedrun-table`` share (argparse parser ``p``)."""
    p.add_argument("--where", action="append", default=[], metavar="KEY=VALUE",
                   help="keep runs whose config has KEY=VALUE (a dotted key, or a config group "
                        "such as algorithm=fedcanon_fig2/fedavg), or one of KEY=V1,V2,...; repeatable")
    p.add_argument("--final", choices=FINALS, default="last",
                   help="a run's final value: its last evaluation (last, the default) or the mean "
                        "of its last 10%% of evaluations, at least one (tail)")


def add_label_arguments(p, what: str) -> None:
    """``--label KEY=TEXT`` and ``--labels FILE``: renames of ``what`` (see :func:`relabel`)."""
    p.add_argument("--label", action="append", default=[], metavar="KEY=TEXT",
                   help=f"rename {what}: KEY a value (fedcanon=FedCanon), a config key or metric "
                        "(algorithm.beta=β) or a whole legend label; repeatable")
    p.add_argument("--labels", type=Path, metavar="FILE",
                   help="a YAML mapping of such renames (keys may hold '=': 'partition=dir/0.1': Dir(0.1))")


def names(args) -> dict[str, str]:
    """The renames of ``--labels FILE`` and ``--label KEY=TEXT`` (these win)."""
    out = {}
    if args.labels is not None:
        try:
            loaded = guarded.read_yaml(args.labels)
        except guarded.Unreadable as e:
            raise UserError(f"--labels {args.labels} is not YAML ({e.why})") from None
        require(isinstance(loaded, dict), f"--labels {args.labels} must be a mapping of label: text")
        out.update({str(k): str(v) for k, v in loaded.items()})
    for item in args.label:
        require("=" in item, f"--label takes KEY=TEXT, got {item!r}")
        k, v = item.split("=", 1)
        out[k] = v
    return out


def relabel(label: str, names: dict[str, str]) -> str:
    """A group's label ``k=v, k2=v2`` renamed by ``names``: a whole label, a part ``k=v``, a
    value ``v`` (the part reads TEXT) or a key ``k`` (the part reads ``TEXT=v``)."""
    if label in names:
        return names[label]
    parts = []
    for part in label.split(", "):
        k, eq, v = part.partition("=")
        parts.append(names.get(part) or (names[v] if eq and v in names else
                     f"{names[k]}={v}" if eq and k in names else part))
    return ", ".join(parts)


def script(prog: str, body: Callable[[Callable[[str], None]], int]) -> int:
    """Run ``body(warn)``, ``warn`` printing one ``prog: ...`` line on stderr; a user error or
    an unreadable / unwritable file is one line and exit code 2, anything else one line and
    exit code 1: never a traceback."""
    def warn(message: str) -> None:
        streams.err(f"{prog}: {message}")
    try:
        return body(warn)
    except (UserError, OSError) as e:
        warn(f"error: {describe(e)}")
        return 2
    except Exception as e:  # noqa: BLE001 -- a bug: still one line, with its type
        warn(f"error: unexpected {type(e).__name__}: {_first_line(e)}")
        return 1


# ----------------------------------------------------------------------------------- tables


@dataclass
class Table:
    row_keys: list[str]       # the config keys naming the rows
    rows: list[dict]          # per row: its values of row_keys
    cols: list                # the values of the column key
    headers: list[str]        # per column: its value, plus keys fixed by it alone
    cells: dict               # (row index, column value) -> Cell (absent: no such runs)


def _namespace(key: str) -> str:
    return key.removeprefix(CHOICE).split(".")[0]


def pivot(runs: list[Run], metric: str, column: str | None = "algorithm.name", final: str = "last",
          rows: list[str] | None = None) -> Table:
    """Final ``metric`` per row x column: the columns are the values of ``column`` (one column,
    ``""``, without one), the rows the values of ``rows`` or, by default, of the keys that, with
    the column, tell every group apart (:func:`group`), so a cell holds exactly one group and
    nothing is pooled (given ``rows`` that leave two groups in one cell are refused). The
    column's own parameters (keys in its namespace, e.g. ``algorithm.*`` for ``algorithm.name``)
    name no rows when the column and the row keys fix them; another key fixed by the column
    alone is shown in the column header; any other difference becomes a row key of its own."""
    groups = group(runs, ignore=(), final=final)
    configs = [g.config for g in groups]
    if column is not None:
        column = config_key(runs, column)
        require(all(column in r.config for r in runs), f"some runs have no config key {short(column)!r}")
    col_of = (lambda c: c[column]) if column else (lambda c: "")  # noqa: E731
    given = [column] if column else []
    ns = _namespace(column) if column else None
    own = lambda k: _namespace(k) == ns  # noqa: E731
    header_keys = []
    if rows is not None:
        row_keys = [config_key(runs, k) for k in rows]
        for k in row_keys:
            require(any(k in c for c in configs), f"no run has a config key {short(k)!r}")
        rest = label_keys(configs, given=[*given, *row_keys])
        require(not rest, f"rows {', '.join(map(short, row_keys)) or '(none)'} leave runs that differ in "
                f"{', '.join(map(short, rest))} in one cell; add them to --rows or filter with --where")
    else:
        row_keys = label_keys(configs, given=given, last=own)
        for k in sorted(set(differing(configs)) - {column, *row_keys}, key=_priority):
            if own(k) or _function_of(configs, k, row_keys):
                continue
            (header_keys if column and _function_of(configs, k, [column]) else row_keys).append(k)
    cols = list(dict.fromkeys(col_of(r.config) for r in runs))   # the sweep's order
    if all(_number(c) for c in cols):
        cols.sort()
    table_rows, cells = [], {}
    for g in groups:
        values = {k: g.config.get(k) for k in row_keys}
        if values not in table_rows:
            table_rows.append(values)
        cell = (table_rows.index(values), col_of(g.config))
        assert cell not in cells, "two groups in one cell"   # by the choice of row_keys
        cells[cell] = Cell.of(g.runs, metric, final)
    by_col = {col_of(g.config): g.config for g in groups}
    headers = [fmt(c) + (" (" + ", ".join(f"{short(k)}={fmt(by_col[c].get(k))}" for k in header_keys)
                         + ")" if header_keys else "") for c in cols]
    return Table(row_keys, table_rows, cols, headers, cells)


def markdown(header: list[str], body: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in body]
    return "\n".join(lines)
