"""What a :class:`~.declare.Test` means: its units (one seed in one panel; for ``ratio`` one
compared pair within that; for ``level`` one run) and whether each holds.

Definitions used by every claim (docs/reproducing.md, "Readings"):
- *tail*: the mean of a run's last 10% of evaluations, at least one (``Run.final``);
- a run that diverged (its objective or metric non-finite from some round on) counts as the
  worst in every comparison beyond its last finite evaluation, and never shortens the window the
  others are read over; it is said "first non-finite at round r; above 1e3 x its start from round
  r'" (r': from where its loss stays above 1e3 times its first value, where that is earlier);
  a round a run lacks without having diverged is not compared (:mod:`.validate` names the run);
  an ordering that holds over diverged runs names them in its unit ("over diverged za2": that
  part of the win compares nothing that converged);
- ``curve: mean`` reads each setting's mean over its seeds at every evaluation (the curve a
  paper plots) as one run, a unit per panel ("mean of 10 seeds"); a seed that diverged makes
  the mean non-finite from its first non-finite evaluation;
- ``at: every`` holds when the ordering holds at every evaluation from ``from_round`` on (to
  ``to_round``); the *onset* is the first round from which it holds at every later evaluation;
- ``at: bytes`` reads each run at its last evaluation within one budget of transmitted bytes (up
  + down): the test's declared ``budget``, else the smallest total a compared run that reached T
  sent (a run that stopped early does not set it);
- a finished run whose ``trained_metric`` ends below ``trained_min`` trained nothing (a collapse
  to the zero model, chance accuracy): it is left out of each compared pair it is in, and a unit
  with fewer than two trained runs to compare (or, for ``mode: best``, an untrained first) is no
  evidence.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..analysis import groups, stats
from ..analysis.run import Run
from ..common import metric_table as mt
from .declare import Claim, Test
from .loading import is_ as is_value
from .loading import key_of, where
from .mean_curve import mean_runs
from .run_reading import (
    area,
    at_bytes,
    budget,
    final_of,
    note,
    read_at,
    trained,
    worst,
)
from .text import apart, label, num, shown, value_name

Panel = tuple[tuple[str, Any], ...]  # a unit's panel: (config key, value) pairs
Cell = tuple[Panel, Any]  # a unit's panel and seed
Got = dict[int, Run]  # a cell's runs by the index of their value in a test's values (base: -1)


@dataclass
class Unit:
    label: str
    value: float  # the unit's number: the first value's final metric, a slope, drop or ratio
    holds: bool | None  # None: no evidence (nothing trained)
    onset: int | None = None  # with at: every
    note: str = ""  # shown instead of the value ("first non-finite at round 15")
    raw: bool | None = None  # the test's result where the unit is no evidence (holds None)
    aside: str = ""  # what the unit left out ("K=40 untrained: left out")
    undecided: str = ""  # why a unit is no evidence where not for want of training: "noise"
    # (a ratio whose margin to its bound lies inside its base's spread), "unmeasured" (a timing
    # whose noise is not measured: :func:`read_noise`)


@dataclass(frozen=True)
class Noise:
    """The spread of a ratio's base measured across its repeats (:func:`noise`): its smallest
    and largest value over ``n`` runs, and their relative spread (max - min) / min."""

    low: float
    high: float
    n: int

    @property
    def spread(self) -> float:
        return (self.high - self.low) / self.low if self.low > 0 else math.inf

    def said(self, metric: str) -> str:
        return (
            f"the base's own {metric} spans {num(self.low)}-{num(self.high)} over its {self.n} "
            f"runs ({self.spread:.1%}); a ratio within {self.spread:.1%} of its bound decides "
            f"nothing"
        )


@dataclass
class Outcome:
    test: Test
    units: list[Unit]
    moot: str = ""  # why this test decides nothing on this run set ("" : it decides)
    reach: str = ""  # why only its diverged runs decide (a level out of reach: .evidence.moot)
    unmeasured: str = ""  # why this run set does not measure the test (a benchmark file of
    # another number): it cannot decide here, and leaves the word to the others
    noise: Noise | None = None  # with repeats: the base's spread (None: not measured)

    @property
    def conclusive(self) -> list[Unit]:
        return [u for u in self.units if u.holds is not None]

    @property
    def held(self) -> int:
        return sum(bool(u.holds) for u in self.units)


def _cells(t: Test, runs: list[Run]) -> dict[Cell, Got]:
    """(panel, seed) -> {index of the run's value of t.key in t.values (or base: -1): run}."""
    runs = where(runs, t.where)
    key = key_of(runs, t.compared)
    panels = [key_of(runs, p) for p in t.panels]
    wanted = [*t.values, *([t.base] if t.base is not None else [])]
    out: dict[Cell, Got] = {}
    for r in runs:
        idx = next((i for i, w in enumerate(wanted) if is_value(r.config.get(key), w)), None)
        if idx is None:
            continue
        cell: Cell = (tuple((p, r.config.get(p)) for p in panels), r.config.get("seed"))
        out.setdefault(cell, {})[idx if idx < len(t.values) else -1] = r
    return dict(sorted(out.items(), key=_cell_order))


def _cell_order(item: tuple[Cell, object]) -> tuple[object, ...]:
    """Cells ((panel, seed), ...) by panel values, then seed."""
    (panel, seed), _ = item
    return (groups.order([v for _, v in panel]), seed)


def _ordered(s: list[float], mode: str) -> bool:
    """``s`` (smaller is better, best-first order) holds the ordering of ``mode``."""
    if mode == "best":
        return all(s[0] < x for x in s[1:])
    return all(a < b for a, b in itertools.pairwise(s))


def _every(t: Test, runs: list[Run], sign: float) -> tuple[bool, int | None]:
    """An ordering at every evaluation of the window, and its onset."""
    curves = []
    for r in runs:
        rounds = r.metrics[mt.ROUND.name].to_numpy()
        curves.append(dict(zip(rounds.tolist(), (sign * r.column(t.metric)).tolist())))
    ends = [max(c) if r.status == "diverged" else math.inf for c, r in zip(curves, runs)]
    last = math.inf if t.to_round is None else t.to_round
    rounds = [  # a round one run lacks and did not diverge before is not compared
        x
        for x in sorted(set.union(*(set(c) for c in curves)))
        if t.from_round <= x <= last and all(x in c or x > e for c, e in zip(curves, ends))
    ]
    ok = [_ordered([worst(c.get(x, math.inf)) for c in curves], t.mode) for x in rounds]
    onset = None
    for x, good in zip(reversed(rounds), reversed(ok)):
        if not good:
            break
        onset = x
    return all(ok), onset


def _compared(t: Test, runs: list[Run]) -> list[float]:
    """Each run's number an ordering ``t`` (not ``at: every``) compares."""
    if t.at in ("bytes", "area"):
        sent = budget(t, runs) if t.at == "bytes" else 0.0
        return [at_bytes(r, t.metric, sent) if t.at == "bytes" else area(t, r) for r in runs]
    return [r.final(t.metric, t.at) for r in runs]


def _order(t: Test, runs: list[Run]) -> tuple[float, bool, int | None]:
    """The first run's number, whether ``runs`` (best first) hold the ordering, its onset."""
    sign = mt.metric(t.metric).direction.sign
    if t.at == "every":
        return (runs[0].final(t.metric, "last"), *_every(t, runs, sign))
    at = _compared(t, runs)
    return at[0], _ordered([worst(sign * v) for v in at], t.mode), None


def _runner_up(t: Test, runs: list[Run], names: list[str]) -> str:
    """The best of the others at the point a one-point ordering reads and the first run's
    margin over it (positive: the first is better), both with the digits that tell them apart
    ("next za1 0.7835 against 0.7844, margin +0.0009"; "tied with fedda 0.951"); "" when no
    other run, or not the first, has a finite number there."""
    if t.at == "every" or len(runs) < 2:
        return ""
    sign = mt.metric(t.metric).direction.sign
    at = _compared(t, runs)
    others = [(v, n) for v, n in zip(at[1:], names[1:]) if math.isfinite(v)]
    if not others or not math.isfinite(at[0]):
        return ""
    v, name = min(others, key=lambda o: sign * o[0])
    first, other = apart(at[0], v)
    if first == other:
        return f"tied with {name} {other}"
    return f"next {name} {other} against {first}, margin {-sign * (at[0] - v):+.2g}"


def _order_unit(t: Test, got: Got, claim: Claim, name: str) -> Unit:
    """One ordering unit, read over its trained runs (:func:`trained`)."""
    runs = [got[i] for i in range(len(t.values))]
    keep = [i for i, r in enumerate(runs) if trained(claim, r)]
    enough = len(keep) >= 2 and (t.mode != "best" or 0 in keep)
    value, holds, onset = _order(t, [runs[i] for i in keep] if enough else runs)
    if enough and 0 not in keep:
        value = _order(t, runs)[0]
    left = [value_name(t.compared, t.values[i]) for i in range(len(runs)) if i not in keep]
    aside = f"{', '.join(left)} untrained: left out" if left and enough else ""
    if t.at == "bytes":  # the budget, and the round each compared run was read at
        aside = "; ".join(
            x for x in (aside, read_at(t, [runs[i] for i in keep] if enough else runs)) if x
        )
    if enough:
        kept = [runs[i] for i in keep]
        next_ = _runner_up(t, kept, [value_name(t.compared, t.values[i]) for i in keep])
        aside = "; ".join(x for x in (aside, next_) if x)
    gone = [value_name(t.compared, t.values[i]) for i in keep[1:] if runs[i].status == "diverged"]
    if holds and gone and runs[0].status != "diverged":  # a win over these is the rule's alone
        aside = "; ".join(x for x in (aside, f"over diverged {', '.join(gone)}") if x)
    if not enough:
        return Unit(name, value, None, None, note(runs[0], t.metric), holds, aside)
    return Unit(name, value, holds, onset, note(runs[0], t.metric), None, aside)


def _measured(name: str, value: float, t: Test, is_trained: bool) -> Unit:
    """A unit of a number tested against ``t.holds`` (no evidence where nothing trained)."""
    holds = within(value, t.holds)
    return Unit(name, value, holds) if is_trained else Unit(name, value, None, raw=holds)


def within(value: float, holds: dict[str, Any]) -> bool:
    return math.isfinite(value) and holds.get("min", -math.inf) <= value <= holds.get(
        "max", math.inf
    )


def _drop_unit(t: Test, got: Got, others: list[Run], claim: Claim, name: str) -> Unit:
    """Points (x100) by which values[0] trails the best of the other (trained) values."""
    sign = mt.metric(t.metric).direction.sign
    kept = [r for r in others if trained(claim, r)] or others
    value = 100 * (
        worst(sign * got[0].final(t.metric, t.at))
        - min(worst(sign * r.final(t.metric, t.at)) for r in kept)
    )
    is_trained = trained(claim, got[0]) and any(trained(claim, r) for r in others)
    return _measured(name, value, t, is_trained)


def _level_units(t: Test, got: Got, claim: Claim, name: str) -> list[Unit]:
    """Each value's final metric, one unit per run."""
    out = []
    for i, v in enumerate(t.values):
        if i in got:
            u = _measured(f"{shown(v)}, {name}", final_of(t, got[i]), t, trained(claim, got[i]))
            u.note = note(got[i], t.metric)
            out.append(u)
    return out


def _ratio_units(t: Test, got: Got, claim: Claim, name: str, spread: Noise | None) -> list[Unit]:
    """Each value's final metric over the base's, one unit per compared pair; a pair whose
    margin to the bound lies inside the base's own spread (``spread``) decides nothing."""
    base = got[-1].final(t.metric, t.at)
    out = []
    for i, v in enumerate(t.values):
        if i in got:
            value = got[i].final(t.metric, t.at) / base if base else math.inf
            pair = trained(claim, got[i]) and trained(claim, got[-1])
            out.append(quiet(_measured(f"{shown(v)}, {name}", value, t, pair), t, spread))
    return out


def quiet(u: Unit, t: Test, spread: Noise | None) -> Unit:
    """``u`` as no evidence where its margin to a bound of ``t`` lies inside ``spread``."""
    bounds = [b for b in (t.holds.get("min"), t.holds.get("max")) if b]
    if spread is None or u.holds is None or not math.isfinite(u.value) or not bounds:
        return u
    margin = min(abs(u.value - b) / abs(b) for b in bounds)
    if margin > spread.spread:
        return u
    return Unit(u.label, u.value, None, u.onset, u.note, u.holds, "inside the noise", "noise")


def timed(t: Test) -> bool:
    """Whether ``t`` reads a timing (a benchmark file, or a ratio whose base's measurement
    repeats: ``repeats``), whose margin to its bound means something only against its noise."""
    return t.source == "bench" or bool(t.repeats)


def read_noise(t: Test, found: list[Unit], spread: Noise | None) -> list[Unit]:
    """``found`` as they are, or, for a timing whose noise is not measured here (no repeats of
    its base, or a benchmark file of one median per setting), each unit as no evidence ("noise
    not measured"): a margin whose noise is unknown decides nothing."""
    if spread is not None or not timed(t):
        return found
    said = "noise not measured"
    return [
        u
        if u.holds is None
        else Unit(u.label, u.value, None, u.onset, u.note, u.holds, said, "unmeasured")
        for u in found
    ]


def noise(t: Test, runs: list[Run]) -> Noise | None:
    """The spread of the base's own final ``metric`` across the runs that differ from each
    other only in ``t.repeats`` (and the seed): None without repeats or with fewer than two."""
    if not t.repeats or t.base is None or not runs:
        return None
    runs = where(runs, {k: v for k, v in t.where.items() if k not in t.repeats})
    key = key_of(runs, t.compared) if runs else t.compared
    vals = [
        r.final(t.metric, t.at)
        for r in runs
        if is_value(r.config.get(key), t.base) and r.status == "finished"
    ]
    vals = [v for v in vals if math.isfinite(v)]
    return Noise(min(vals), max(vals), len(vals)) if len(vals) >= 2 else None


def units(t: Test, runs: list[Run], claim: Claim, spread: Noise | None = None) -> list[Unit]:
    """The units of test ``t`` over ``runs`` (a unit missing one of the compared runs is left
    out; ``spread``: a ratio's noise, :func:`noise`; ``curve: mean``: over the seeds' mean
    curves, :func:`.mean_curve.mean_runs`)."""
    if t.curve == "mean":
        runs = mean_runs(where(runs, t.where))
    if t.kind == "slope":
        return slope_units(t, runs, claim)
    need = {"order": range(len(t.values)), "drop": range(len(t.values)), "level": []}
    out: list[Unit] = []
    for (panel, seed), got in _cells(t, runs).items():
        name = label(panel, seed)
        if not all(i in got for i in need.get(t.kind, [-1])):
            continue
        if t.kind == "order":
            out.append(_order_unit(t, got, claim, name))
        elif t.kind == "drop":
            others = list(_rest(t, runs, panel, seed))
            if others:
                out.append(_drop_unit(t, got, others, claim, name))
        elif t.kind == "level":
            out += _level_units(t, got, claim, name)
        else:
            out += _ratio_units(t, got, claim, name, spread)
    return out


def _rest(t: Test, runs: list[Run], panel: Panel, seed: object) -> Iterator[Run]:
    """For ``drop``: the runs of the same panel and seed at the other values of ``t.key``."""
    runs = where(runs, t.where)
    key = key_of(runs, t.compared)
    for r in runs:
        if (
            r.config.get("seed") == seed
            and all(r.config.get(p) == v for p, v in panel)
            and not any(is_value(r.config.get(key), w) for w in t.values)
        ):
            yield r


def _slope(t: Test, key: str, runs: list[Run]) -> float:
    pts = [(float(r.config[key]), r.final(t.metric, t.at)) for r in runs]
    if len({x for x, _ in pts}) < 2 or not all(math.isfinite(y) and y > 0 for _, y in pts):
        return math.nan
    return stats.fit_line(np.log([x for x, _ in pts]), np.log([y for _, y in pts]))[0]


def slope_units(t: Test, runs: list[Run], claim: Claim) -> list[Unit]:
    """Per panel and seed: the slope of log(final metric) on log(key), over its trained runs."""
    runs = where(runs, t.where)
    key = key_of(runs, t.compared)
    panels = [key_of(runs, p) for p in t.panels]
    cells: dict[Cell, list[Run]] = {}
    for r in runs:
        cells.setdefault(
            (tuple((p, r.config.get(p)) for p in panels), r.config.get("seed")), []
        ).append(r)
    out = []
    for (panel, seed), rs in sorted(cells.items(), key=_cell_order):
        if len({r.config[key] for r in rs}) < 2:
            continue
        kept = [r for r in rs if trained(claim, r)]
        enough = len({r.config[key] for r in kept}) >= 2
        out.append(_measured(label(panel, seed), _slope(t, key, kept if enough else rs), t, enough))
    return out
