"""A claim's evidence: its runs read from the results folders (through :mod:`..analysis.results`'
loaders) and each :class:`~.declare.Test` evaluated unit by unit.

A *unit* is one seed in one panel (the test's ``panels`` keys), one benchmark row for ``source:
bench``, and for ``ratio`` one compared value within that. Definitions used by every claim:
- *tail*: the mean of a run's last 10% of evaluations, at least one (``Run.final``);
- a run that diverged (its objective or metric non-finite from some round on) counts as the
  worst in every comparison (from that round on; a round a run lacks without having diverged is
  not compared, and :mod:`.validate` names such a run), and "diverged after round r" means the
  first non-finite evaluation
  is at round r;
- ``at: every`` holds when the ordering holds at every evaluation from ``from_round`` on (to
  ``to_round``); the
  *onset* is the first round from which it holds at every later evaluation (None: not at the end);
- a unit with a finished run whose ``trained_metric`` ends below ``trained_min`` is no evidence
  (nothing trained: a collapse to the zero model, chance accuracy).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import numpy as np

from ..analysis import groups, results, stats
from ..analysis.run import Run, direction
from ..common.errors import UserError, require
from ..common.run_files import read_summary
from . import sensitivity, validate
from .declare import Claim, RunSet, Test

PRESENT = ("finished", "diverged")  # a run that counts as made; others are resumed by `run`


@dataclass
class Unit:
    label: str
    value: float  # the unit's number: the first value's final metric, a slope, drop or ratio
    holds: bool | None  # None: no evidence (nothing trained)
    onset: int | None = None  # with at: every
    note: str = ""  # shown instead of the value ("diverged after round 15")
    raw: bool | None = None  # the test's result where the unit is no evidence (holds None)


@dataclass
class Outcome:
    test: Test
    units: list[Unit]

    @property
    def conclusive(self) -> list[Unit]:
        return [u for u in self.units if u.holds is not None]

    @property
    def held(self) -> int:
        return sum(bool(u.holds) for u in self.units)


@dataclass
class Evidence:
    runset: RunSet
    present: int
    declared: int
    missing: list = field(default_factory=list)  # (point, seed) of the declared runs not made
    extra: list = field(default_factory=list)  # seeds of the claim's runs that it does not declare
    seeds: tuple = ()
    T: int | None = None
    devices: tuple = ()
    minutes: float = 0.0  # job-minutes of the runs present
    outcomes: list = field(default_factory=list)
    findings: list = field(
        default_factory=list
    )  # one line per run that is not evidence (.validate)
    diverged: dict = field(default_factory=dict)  # grid point (shown) -> (runs diverged, runs made)
    trained: dict = field(
        default_factory=dict
    )  # grid point (shown) -> its runs' final trained_metric
    choices: list = field(
        default_factory=list
    )  # with open choices: (values, outcomes, present, declared, diverged)


def key_of(runs: list[Run], key: str) -> str:
    return groups.config_key(runs, key)


def _is(value, want) -> bool:
    if isinstance(want, list):
        return any(_is(value, w) for w in want)
    return groups.matches(value, groups.fmt(want) if isinstance(want, float) else str(want))


def _point(run: Run, runs, rs: RunSet) -> tuple | None:
    """The run's declared grid point (the keys of the first listed point it matches, then the
    grid's), or None when it is outside the declaration."""
    grid = tuple((k, run.config.get(key_of(runs, k))) for k in rs.grid)
    if not all(any(_is(v, w) for w in rs.grid[k]) for k, v in grid):
        return None
    for p in rs.points or ({},):
        got = tuple((k, run.config.get(key_of(runs, k))) for k in p)
        if all(_is(v, p[k]) for k, v in got):
            return got + grid
    return None


def _declared_key(point: tuple) -> tuple:
    return tuple((k, canon(v)) for k, v in point)


def canon(v) -> str:
    return (
        groups.fmt(float(v)) if isinstance(v, (int, float)) and not isinstance(v, bool) else str(v)
    )


def _minutes(run: Run) -> float:
    """A run's job-minutes from its summary (started to ended), else its training time."""
    try:
        s = read_summary(run.path)
        return (
            datetime.fromisoformat(s["ended"]) - datetime.fromisoformat(s["started"])
        ).total_seconds() / 60
    except (OSError, ValueError, KeyError, TypeError):
        return float(run.metrics["time_s"].iloc[-1]) / 60 if "time_s" in run.metrics else 0.0


def _device(run: Run) -> str:
    try:
        return str(read_summary(run.path).get("device", "cpu"))
    except (OSError, ValueError):
        return "cpu"


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
    runs, found = validate.fixed(claim, rs, runs, _is)  # every run in its folders
    for k, want in rs.where.items():
        runs = [r for r in runs if _is(r.config.get(key_of(runs, k)), want)]
    point = {id(r): _point(r, runs, rs) for r in runs}
    # a run outside the declaration is another figure's, unless its config.yaml was edited out
    # of it: its record (.hydra/config.yaml) names it
    found += [
        f"claim {claim.id}: {r.path}: {why}"
        for r in runs
        if point[id(r)] is None and (why := validate.recorded(r))
    ]
    kept, more = validate.check(
        claim, [r for r in runs if point[id(r)] is not None], lambda r: point[id(r)]
    )
    return kept, findings + found + more


@functools.lru_cache(maxsize=32)
def _cached(folders: tuple) -> tuple[list[Run], list[str]]:
    skipped: list[str] = []

    def note(
        m: str,
    ) -> None:  # a folder that cannot be read; not a run that stopped before its rows
        if m.startswith("skipped ") and not re.search(
            r"no metrics.csv \(status: (?!finished|diverged)", m
        ):
            skipped.append(m[len("skipped ") :])

    return results.load(folders, warn=note, count_once=False), skipped


def _read(folders: tuple) -> tuple[list[Run], list[str]]:
    """The runs under ``folders`` (every folder, duplicates too) and a line per folder that
    cannot be read, read once per process (claims share folders)."""
    runs, skipped = _cached(folders)
    return list(runs), list(skipped)


def gather(
    claim: Claim, rs: RunSet, root: Path, warn: Callable[[str], None], strict: bool = True
) -> Evidence:
    """The evidence of one run set: runs present against declared, and every test's units
    (none while runs are missing). ``strict``: a folder without the claim's runs is a user error."""
    if not rs.folders:  # a benchmark file
        files = [root / t.file for t in claim.tests]
        if not strict and not all(f.is_file() for f in files):
            return Evidence(rs, 0, 1, devices=(rs.device,))
        outcomes = [Outcome(t, bench_units(t, root, claim)) for t in claim.tests]
        return Evidence(rs, 1, 1, outcomes=outcomes, devices=(rs.device,))
    runs, findings = load_runs(claim, rs, root, warn, strict)
    extra = sorted({r.config.get("seed") for r in runs} - set(rs.seeds))
    runs = [r for r in runs if r.config.get("seed") in rs.seeds]
    declared = {(_declared_key(p), s) for p, s in rs.declared()}
    made = [r for r in runs if r.status in PRESENT]
    have = {(_declared_key(_point(r, runs, rs)), r.config.get("seed")) for r in made}
    missing = sorted(declared - have, key=lambda ps: (ps[1], ps[0]))
    require(
        made or not strict or rs.choices,
        f"claim {claim.id}: no finished or diverged run of the claim under "
        f"{', '.join(str(root / f) for f in rs.folders)}",
    )
    ev = Evidence(
        rs,
        len(declared & have),
        len(declared),
        missing,
        extra,
        tuple(sorted({r.config.get("seed") for r in made})),
        made[0].config.get("T") if made else rs.T,
        tuple(sorted({_device(r) for r in made})),
        sum(_minutes(r) for r in made),
        findings=findings,
    )
    for r in made:
        name = (
            ", ".join(
                shown(v) if k == "algorithm" else f"{groups.short(k).rsplit('.', 1)[-1]}={shown(v)}"
                for k, v in _point(r, runs, rs)
            )
            or "all"
        )
        d, n = ev.diverged.get(name, (0, 0))
        ev.diverged[name] = (d + (r.status == "diverged"), n + 1)
        if claim.trained_metric and r.has(claim.trained_metric):
            ev.trained.setdefault(name, []).append(r.final(claim.trained_metric))
    if rs.choices:  # read per combination of the open choices (.sensitivity), never as a whole
        for values in sensitivity.combos(rs):
            at = [r for r in made if all(_is(r.config.get(key_of(runs, k)), v) for k, v in values)]
            want = [d for d in declared if all((k, canon(v)) in d[0] for k, v in values)]
            outcomes = (
                [Outcome(t, units(t, at, claim)) for t in claim.tests]
                if len(at) >= len(want)
                else []
            )
            ev.choices.append(
                (
                    values,
                    [o for o in outcomes if o.units],
                    len(at),
                    len(want),
                    sum(r.status == "diverged" for r in at),
                )
            )
    elif not missing:
        ev.outcomes = [Outcome(t, units(t, made, claim)) for t in claim.tests]
    return ev


# ------------------------------------------------------------------------------------ tests


def diverged_after(run: Run, metric: str) -> int | None:
    """The round of the run's first non-finite evaluation of ``metric`` or of its objective
    ("diverged after round r"), None if every evaluation is finite."""
    bad = ~np.isfinite(run.column(metric))
    if run.has("objective"):
        bad |= ~np.isfinite(run.column("objective"))
    return int(run.metrics["round"].to_numpy()[bad][0]) if bad.any() else None


def _worst(v: float) -> float:
    return v if math.isfinite(v) else math.inf


def shown(v) -> str:
    """A config value as tables show it: a preset's algorithm choice by its method's name."""
    text = groups.fmt(v)
    return (
        text.rsplit("/", 1)[-1]
        if isinstance(v, str) and ("_fig" in text or "_table" in text)
        else text
    )


def _label(panel: tuple, seed) -> str:
    return ", ".join(
        [*(f"{groups.short(k).rsplit('.', 1)[-1]}={shown(v)}" for k, v in panel), f"seed {seed}"]
    )


def _where(t: Test, runs: list[Run]) -> list[Run]:
    """The runs whose config has every value of the test's ``where``."""
    for k, want in t.where.items():
        runs = [r for r in runs if _is(r.config.get(key_of(runs, k)), want)]
    return runs


def _cells(t: Test, runs: list[Run]) -> dict:
    """(panel, seed) -> {index of the run's value of t.key in t.values (or base: -1): run}."""
    runs = _where(t, runs)
    key = key_of(runs, t.key)
    panels = [key_of(runs, p) for p in t.panels]
    out: dict = {}
    for r in runs:
        v = r.config.get(key)
        wanted = [*t.values, *([t.base] if t.base is not None else [])]
        idx = next((i for i, w in enumerate(wanted) if _is(v, w)), None)
        if idx is None:
            continue
        cell = (tuple((p, r.config.get(p)) for p in panels), r.config.get("seed"))
        out.setdefault(cell, {})[idx if idx < len(t.values) else -1] = r
    return dict(sorted(out.items(), key=_cell_order))


def _cell_order(item) -> tuple:
    """Cells ((panel, seed), ...) by panel values, then seed."""
    (panel, seed), _ = item
    return (groups.order([v for _, v in panel]), seed)


def _trained(claim: Claim, runs) -> bool:
    if not claim.trained_metric:
        return True
    for r in runs:
        if r.status == "finished":
            v = r.final(claim.trained_metric)
            if math.isfinite(v) and v < claim.trained_min:
                return False
    return True


def _ordered(s: list[float], mode: str) -> bool:
    """``s`` (smaller is better, best-first order) holds the ordering of ``mode``."""
    if mode == "best":
        return all(s[0] < x for x in s[1:])
    return all(a < b for a, b in zip(s, s[1:]))


def _order_unit(t: Test, got: dict) -> tuple[float, bool, int | None]:
    sign = direction(t.metric).sign
    runs = [got[i] for i in range(len(t.values))]
    if t.at == "bytes":
        budget = min(float(r.column("bytes")[-1]) for r in runs)
        at = [at_bytes(r, t.metric, budget) for r in runs]
        return at[0], _ordered([_worst(sign * v) for v in at], t.mode), None
    first = runs[0].final(t.metric, "last" if t.at == "every" else t.at)
    if t.at != "every":
        return first, _ordered([_worst(sign * r.final(t.metric, t.at)) for r in runs], t.mode), None
    curves = []
    for r in runs:
        rounds = r.metrics["round"].to_numpy()
        curves.append(dict(zip(rounds.tolist(), (sign * r.column(t.metric)).tolist())))
    ends = [max(c) if r.status == "diverged" else math.inf for c, r in zip(curves, runs)]
    rounds = sorted(set.union(*(set(c) for c in curves)))  # a round one run lacks and did not
    rounds = [
        x
        for x in rounds
        if t.from_round <= x <= (math.inf if t.to_round is None else t.to_round)
        # diverge before is not compared
        and all(x in c or x > e for c, e in zip(curves, ends))
    ]
    ok = [_ordered([_worst(c.get(x, math.inf)) for c in curves], t.mode) for x in rounds]
    onset = None
    for x, good in zip(reversed(rounds), reversed(ok)):
        if not good:
            break
        onset = x
    return first, all(ok), onset


def at_bytes(run: Run, metric: str, budget: float) -> float:
    """``metric`` at the run's last evaluation with at most ``budget`` bytes sent (up + down);
    non-finite when it had diverged by then."""
    sent, v = run.column("bytes"), run.column(metric)
    return float(v[sent <= budget][-1]) if (sent <= budget).any() else math.nan


def final_of(t: Test, run: Run) -> float:
    return run.final(t.metric, "last" if t.at in ("every", "bytes") else t.at)


def units(t: Test, runs: list[Run], claim: Claim) -> list[Unit]:
    """The units of test ``t`` over ``runs`` (a unit missing one of the compared runs is left
    out)."""
    out = []
    if t.kind == "slope":
        return slope_units(t, runs, claim)
    for (panel, seed), got in _cells(t, runs).items():
        need = (
            range(len(t.values))
            if t.kind in ("order", "drop")
            else []
            if t.kind == "level"
            else [-1]
        )
        others = list(_rest(t, runs, panel, seed)) if t.kind == "drop" else [None]
        if not all(i in got for i in need) or not others:
            continue
        trained = _trained(claim, got.values())
        label = _label(panel, seed)
        if t.kind == "order":
            value, holds, onset = _order_unit(t, got)
            r = diverged_after(got[0], t.metric)
            out.append(
                Unit(
                    label,
                    value,
                    holds if trained else None,
                    onset if trained else None,
                    f"diverged after round {r}" if r is not None else "",
                    None if trained else holds,
                )
            )
        elif t.kind == "drop":  # points (x100) by which values[0] trails the best of the others
            sign = direction(t.metric).sign
            value = 100 * (
                _worst(sign * got[0].final(t.metric, t.at))
                - min(_worst(sign * r.final(t.metric, t.at)) for r in others)
            )
            out.append(_measured(label, value, t, trained))
        elif t.kind == "level":  # each value's final metric, one unit each
            for i, v in enumerate(t.values):
                if i in got:
                    r = diverged_after(got[i], t.metric)
                    u = _measured(f"{shown(v)}, {label}", final_of(t, got[i]), t, trained)
                    u.note = f"diverged after round {r}" if r is not None else ""
                    out.append(u)
        else:  # ratio
            base = got[-1].final(t.metric, t.at)
            for i, v in enumerate(t.values):
                if i in got:
                    value = got[i].final(t.metric, t.at) / base if base else math.inf
                    out.append(_measured(f"{shown(v)}, {label}", value, t, trained))
    return out


def _rest(t: Test, runs, panel, seed):
    """For ``drop``: the runs of the same panel and seed at the other values of ``t.key``."""
    runs = _where(t, runs)
    key = key_of(runs, t.key)
    for r in runs:
        if (
            r.config.get("seed") == seed
            and all(r.config.get(p) == v for p, v in panel)
            and not any(_is(r.config.get(key), w) for w in t.values)
        ):
            yield r


def _measured(label: str, value: float, t: Test, trained: bool) -> Unit:
    """A unit of a number tested against ``t.holds`` (no evidence where nothing trained)."""
    holds = _within(value, t.holds)
    return Unit(label, value, holds, raw=None) if trained else Unit(label, value, None, raw=holds)


def _within(value: float, holds: dict) -> bool:
    return math.isfinite(value) and holds.get("min", -math.inf) <= value <= holds.get(
        "max", math.inf
    )


def slope_units(t: Test, runs, claim: Claim) -> list[Unit]:
    """Per panel and seed: the slope of log(final metric) on log(key)."""
    runs = _where(t, runs)
    key = key_of(runs, t.key)
    panels = [key_of(runs, p) for p in t.panels]
    cells: dict = {}
    for r in runs:
        cells.setdefault(
            (tuple((p, r.config.get(p)) for p in panels), r.config.get("seed")), []
        ).append(r)
    out = []
    for (panel, seed), rs in sorted(cells.items(), key=_cell_order):
        pts = [(float(r.config[key]), r.final(t.metric, t.at)) for r in rs]
        if len({x for x, _ in pts}) < 2:
            continue
        if all(math.isfinite(y) and y > 0 for _, y in pts):
            value = stats.fit_line(np.log([x for x, _ in pts]), np.log([y for _, y in pts]))[0]
        else:
            value = math.nan
        out.append(_measured(_label(panel, seed), value, t, _trained(claim, rs)))
    return out


BENCH_ROW = re.compile(r"^(\S+)\s+[\d,]+\s+[\d.]+\s+(.*)$")


def bench_units(t: Test, root: Path, claim: Claim) -> list[Unit]:
    """Units of a benchmark table (``scripts/bench_prox.py``'s output): one per model of
    ``t.values``, its value the ``(r x)`` ratio in ``t.metric``'s column."""
    path = root / t.file
    require(path.is_file(), f"claim {claim.id}: no benchmark file {path}")
    header, rows = None, {}
    for line in path.read_text().splitlines():
        if line.startswith("Models"):
            header = re.split(r"\s{2,}", line.strip())[3:]
        elif header and (m := BENCH_ROW.match(line)):
            ratios = [float(x) for x in re.findall(r"\(([\d.]+)x\)", m.group(2))]
            rows.setdefault(m.group(1), dict(zip(header, ratios)))
    out = []
    for model in t.values:
        require(
            model in rows and t.metric in rows[model],
            f"claim {claim.id}: {path} has no {t.metric} ratio for {model}",
        )
        value = rows[model][t.metric]
        out.append(Unit(str(model), value, _within(value, t.holds)))
    return out


def forget() -> None:
    """Drop the runs read so far (a command reads its folders afresh)."""
    _cached.cache_clear()
