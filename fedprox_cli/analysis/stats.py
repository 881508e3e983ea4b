"""Numbers over runs: a group's final values (:class:`Cell`), a curve's mean +- std band per
round (:func:`band`), and least-squares slopes on log-log axes (:func:`slope`).

Only finished runs with a finite value enter a mean; the others are counted and shown beside it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypedDict

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from ..common import metric_table as mt
from ..common.errors import require
from .groups import Group, fmt, group, is_number, order
from .run import Run


@dataclass
class Cell:
    """The runs of one group summarised for one metric: the values of the runs that count, and
    how many were left out and why."""

    values: list[float]
    left_out: dict[str, int]

    @classmethod
    def of(cls, runs: list[Run], metric: str, how: str = "last") -> Cell:
        values: list[float] = []
        left: dict[str, int] = {}
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
        """``0.8100 ± 0.0100 (3 seeds)``, ``0.8100 (1 seed)``, ``0.8100 (2 seeds; diverged 1 of
        3)``,
        ``diverged (1 of 1)``: ``±`` only with two or more runs, left-out runs always named."""
        left = ", ".join(f"{why} {c}" for why, c in sorted(self.left_out.items()))
        if not self.values:
            if len(self.left_out) == 1:
                ((why, c),) = self.left_out.items()
                return f"{why} ({c} of {self.total})"
            return f"{left} (of {self.total})"
        value = f"{self.mean:{spec}}" + (f" ± {self.std:{spec}}" if self.n > 1 else "")
        return f"{value} ({seeds(self.n)}" + (f"; {left} of {self.total})" if left else ")")


def seeds(k: int) -> str:
    """``3 seeds``, ``1 seed``: how many runs (seeds) a mean holds (n is the papers' clients)."""
    return f"{k} seed{'s' * (k != 1)}"


def band(runs: list[Run], x: str, y: str) -> pd.DataFrame:
    """Per evaluated round: mean of x, and mean / std / count of y over ``runs``.

    Runs are aligned on the round column; rounds not reached by every run use the runs that
    reached them (count says how many)."""
    frames = [
        pd.DataFrame({mt.ROUND.name: r.column(mt.ROUND.name), "x": r.column(x), "y": r.column(y)})
        for r in runs
    ]
    stacked = pd.concat(frames, keys=range(len(frames)))
    agg = stacked.groupby(mt.ROUND.name).agg(
        x=("x", "mean"), mean=("y", "mean"), std=("y", "std"), count=("y", "size")
    )
    return agg.fillna({"std": 0.0}).reset_index()


def fit_line(xs: ArrayLike, ys: ArrayLike) -> tuple[float, float, float]:
    """Least-squares slope, intercept and R^2 of ``ys`` on ``xs``."""
    x, y = np.asarray(xs, float), np.asarray(ys, float)
    b, a = np.polyfit(x, y, 1)
    ss = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - float(((y - (a + b * x)) ** 2).sum()) / ss if ss > 0 else 1.0
    return float(b), float(a), r2


Point = tuple[float, float, float, int, str]  # a key's value, mean, std, runs, the cell's text


class Fit(TypedDict):
    """A fit of :func:`slope`: the group's label, the line, its points, the per-seed slopes."""

    label: str
    slope: float
    intercept: float
    r2: float
    points: list[Point]
    seed_slopes: list[float]


def slope(
    runs: list[Run],
    key: str,
    metric: str = mt.STATIONARITY.name,
    final: str = "last",
    warn: Callable[[str], None] = lambda _: None,
) -> list[Fit]:
    """Least-squares slope of log(final metric) against log(key) (FedNMap Figs. 3b, 4b), one fit
    per group of the other keys, on the means over seeds; with R^2, and with several seeds
    a fit per seed (``seed_slopes``: the slopes of the seeds present at two or more values of
    ``key``). Runs that do not count (diverged, unfinished, non-finite) leave their point's
    mean; a point with none left is dropped with a ``warn`` line."""
    require(
        all(key in r.config for r in runs), f"--slope {key}: some runs have no config key {key!r}"
    )
    return [
        _fit(curve, key, metric, final, warn)
        for curve in group(runs, ignore=(key, *determined_by(runs, key)), final=final)
    ]


def _fit(curve: Group, key: str, metric: str, final: str, warn: Callable[[str], None]) -> Fit:
    """:func:`slope`'s fit of one group of runs (``curve``): on the means over seeds, and per
    seed."""
    pts, per_seed = _points(curve.runs, key, metric, final, warn)
    where = f" ({curve.label})" if curve.label != "all runs" else ""
    require(
        len(pts) >= 2,
        f"--slope {key}{where}: need final {metric} at two or more values of {key}, got {len(pts)}",
    )
    b, a, r2 = fit_line(np.log([p[0] for p in pts]), np.log([p[1] for p in pts]))
    seed_slopes = [
        fit_line(np.log([p[0] for p in ps]), np.log([p[1] for p in ps]))[0]
        for ps in per_seed.values()
        if len({p[0] for p in ps}) >= 2 and all(p[1] > 0 for p in ps)
    ]
    return {
        "label": curve.label,
        "slope": b,
        "intercept": a,
        "r2": r2,
        "points": pts,
        "seed_slopes": seed_slopes if len(seed_slopes) > 1 else [],
    }


def _points(
    runs: list[Run], key: str, metric: str, final: str, warn: Callable[[str], None]
) -> tuple[list[Point], dict[tuple[object, ...], list[tuple[float, float]]]]:
    """The points of :func:`slope`'s fit, value by value of ``key``: ``(value, mean, std, n,
    text)`` of the runs that count, and each seed's ``(value, final)`` pairs."""
    pts: list[Point] = []
    per_seed: dict[tuple[object, ...], list[tuple[float, float]]] = {}
    for v, rs in sorted(_by(runs, key).items(), key=lambda kv: order([kv[0]])):
        cell = Cell.of(rs, metric, final)
        if cell.n == 0:
            warn(f"--slope {key}: no point at {key}={fmt(v)} ({cell.text()})")
            continue
        require(
            is_number(v) and v > 0 and cell.mean > 0,
            f"--slope {key}: {key} and the final {metric} must "
            f"be positive for a log-log fit ({key}={fmt(v)}, mean {cell.mean:g})",
        )
        pts.append((v, cell.mean, cell.std, cell.n, cell.text(".4g")))
        for r in rs:
            if r.problem(metric, final) is None:
                per_seed.setdefault(r.seed, []).append((v, r.final(metric, final)))
    return pts, per_seed


def seed_interval(fit: Fit) -> str:
    """``-1.44 ± 0.02 (min -1.46, max -1.42; 3 seeds)`` from a fit's per-seed slopes, or ``""``."""
    s = np.array(fit["seed_slopes"])
    if len(s) < 2:
        return ""
    return (
        f"{s.mean():.3f} ± {s.std(ddof=1):.3f} (min {s.min():.3f}, max {s.max():.3f}; "
        f"{len(s)} seeds)"
    )


def determined_by(runs: list[Run], key: str) -> list[str]:
    """Config keys that vary across ``runs`` but take one value per value of ``key`` (e.g.
    FedNMap's eta_a = 1/K when K is swept): they move with ``key``, not beside it."""
    keys = {k for r in runs for k in r.config} - {key}
    by_key = _by(runs, key).values()
    return sorted(
        k
        for k in keys
        if len({repr(r.config.get(k)) for r in runs}) > 1
        and all(len({repr(r.config.get(k)) for r in rs}) == 1 for rs in by_key)
    )


def _by(runs: list[Run], key: str) -> dict[Any, list[Run]]:  # a config value -> its runs
    out: dict[Any, list[Run]] = {}
    for r in runs:
        out.setdefault(r.config.get(key), []).append(r)
    return out
