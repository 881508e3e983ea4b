"""A declared tuning protocol (a run set's ``tuning:``), for steps the paper does not give: one
grid of steps for every tuned method (each method's step is its own config key, ``steps``; a
method without one is at the steps its point fixes, as the paper gives them), each method's step
chosen by one rule on a tuning seed that the verdict never reads, and the verdict read on the run
set's seeds at the chosen steps.

The rule (:func:`pick`): among the method's runs on the tuning seed, those that reached T
without diverging (status finished, a finite last ``metric``), the step with the best last
``metric`` (a tie to the larger step); none such: the method diverged at every step of the grid,
has no step, and is left out of every comparison, named (:func:`without`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from ..analysis import groups
from ..analysis.run import Run
from ..common import metric_table as mt
from ..common.errors import require
from .declare import RunSet, Test
from .loading import is_ as is_value
from .loading import key_of
from .run_reading import diverged_after
from .text import num, value_name


@dataclass(frozen=True)
class Tuning:
    seed: int  # the tuning seed (never one of the verdict's seeds)
    grid: tuple[float, ...]  # the steps tried, the same for every method (the paper's first)
    steps: dict[str, str]  # method (a value of ``key``) -> the config key of its step
    metric: str = mt.TEST_ACC.name
    key: str = "algorithm"  # the key whose values are the methods


def of(rs: RunSet) -> Tuning:
    """The run set's protocol, checked: the tuning seed is none of the verdict's seeds, every
    tuned method is a declared point's and its point does not fix its step, the grid is not
    empty."""
    d = dict(rs.tuning)
    require(
        isinstance(d.get("seed"), int) and bool(d.get("grid")) and isinstance(d.get("steps"), dict),
        "a run set's tuning needs seed (an integer), grid (the steps) and steps (method -> key)",
    )
    t = Tuning(
        seed=d["seed"],
        grid=tuple(d["grid"]),
        steps={str(k): str(v) for k, v in d["steps"].items()},
        metric=d.get("metric", mt.TEST_ACC.name),
        key=d.get("key", "algorithm"),
    )
    require(
        t.seed not in rs.seeds,
        f"the tuning seed {t.seed} is one of the verdict's seeds {list(rs.seeds)}: the verdict "
        "must not read the runs its steps were chosen on",
    )
    methods = {str(p.get(t.key)): p for p in rs.points}
    for m, k in t.steps.items():
        require(m in methods, f"tuning: {m} is no declared point's {t.key}")
        require(k not in methods[m], f"tuning: the point of {m} fixes the step it tunes ({k})")
    return t


def tuned(t: Tuning, p: dict[str, Any]) -> bool:
    return str(p.get(t.key)) in t.steps


def trials(rs: RunSet) -> RunSet:
    """The tuning runs as a run set: every declared method at every step of the grid, on the
    tuning seed."""
    t = of(rs)
    points = tuple(
        {**p, t.steps[str(p[t.key])]: step} for p in rs.points if tuned(t, p) for step in t.grid
    )
    return replace(rs, points=points, seeds=(t.seed,), tuning={})


@dataclass(frozen=True)
class Pick:
    """One method's tuning: the chosen step (None: it diverged at every step), and what each
    step's tuning run read (step, status, last metric)."""

    method: str
    key: str
    step: float | None
    read: tuple[tuple[float, str, float], ...]  # per step: the step, its run's status, last metric
    of: int = 0  # the grid's steps (a pick over fewer runs chooses nothing yet)

    def said(self, metric: str) -> str:
        name = self.key.rsplit(".", 1)[-1]
        runs = ", ".join(
            f"{groups.fmt(s)}: " + (num(v) if status == "finished" else status)
            for s, status, v in self.read
        )
        chosen = (
            f"not chosen yet ({len(self.read)} of its {self.of} tuning runs made)"
            if len(self.read) < self.of
            else f"{name} = {groups.fmt(self.step)}"
            if self.step is not None
            else "diverged at every step of the grid: left out of every comparison"
        )
        runs = f" (last {metric}: {runs})" if runs else ""
        return f"{value_name('algorithm', self.method)}: {chosen}{runs}"


def _last(r: Run, metric: str) -> float:
    return float(r.column(metric)[-1]) if r.has(metric) and len(r.metrics) else math.nan


def pick(t: Tuning, method: str, runs: list[Run]) -> Pick:
    """The rule on one method's tuning runs (``runs``: every run of the tuning set)."""
    key = t.steps[method]
    mine = [r for r in runs if is_value(r.config.get(key_of(runs, t.key)), method)]
    read = []
    for step in t.grid:
        at = [r for r in mine if is_value(r.config.get(key_of(mine, key)), step)]
        for r in at[:1]:
            gone = diverged_after(r, t.metric) if r.status == "diverged" else None
            status = r.status + (f" (first non-finite at round {gone})" if gone is not None else "")
            read.append((step, status, _last(r, t.metric)))
    sign = mt.metric(t.metric).direction.sign
    ok = [(s, v) for s, status, v in read if status == "finished" and math.isfinite(v)]
    best = min(ok, key=lambda sv: (sign * sv[1], -sv[0]), default=None)
    if len(read) < len(t.grid):  # not every step ran: nothing chosen yet
        best = None
    return Pick(method, key, None if best is None else best[0], tuple(read), len(t.grid))


def chosen(rs: RunSet, picks: list[Pick]) -> RunSet:
    """The verdict's run set: each tuned method with a step at its chosen step, the others at
    their points, on the run set's seeds (a method without a step has no point)."""
    t = of(rs)
    steps = {p.method: p.step for p in picks}
    points = tuple(
        {**p, t.steps[str(p[t.key])]: steps[str(p[t.key])]} if tuned(t, p) else p
        for p in rs.points
        if steps.get(str(p[t.key]), 0) is not None
    )
    return replace(rs, points=points, tuning={})


def without(test: Test, dropped: set[str]) -> Test:
    """``test`` without the methods that have no step (an ordering whose first has none keeps
    its values: it has no unit)."""
    if not dropped or (test.kind == "order" and test.values and str(test.values[0]) in dropped):
        return test
    return replace(test, values=tuple(v for v in test.values if str(v) not in dropped))
