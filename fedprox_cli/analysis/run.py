"""One run as the analysis reads it (:class:`Run`: its folder, flat config, metrics and status),
and what its metrics mean: the x axes, how a metric improves, its final value.

A *run* is a folder holding ``config.yaml`` (the resolved config) and ``metrics.csv``
(:mod:`.results` reads them). Its *seeds* are its replicate keys (``seed`` and every
``*.seed``). Only a finished run with a finite value enters a mean; the others (diverged,
interrupted, running, error, no summary, non-finite) say why (:meth:`Run.problem`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from ..runs.outputs import LOWER_IS_BETTER

CHOICE = "choice:"  # prefix of config-group choice keys (choice:algorithm)
X_AXES = {
    "round": "round",
    "time": "wall time (s, training only)",
    "bytes": "communication (bytes, up + down)",
}
X_COLUMNS = {"round": ("round",), "time": ("time_s",), "bytes": ("bytes_up", "bytes_down")}
LOG_Y = {"stationarity"}  # metrics the papers draw on a log scale
FINALS = ("last", "tail")  # final value: the last evaluation, or the mean of the last 10%


class Direction(NamedTuple):
    """How a metric improves: the sign that makes better values smaller, and its words."""

    sign: int
    best: str  # "lowest"
    improves: str  # "falls"
    beyond: str  # "below": a better value lies below the other
    ends: str  # "lower"


def direction(metric: str) -> Direction:
    """Lower is better for the metrics of :data:`LOWER_IS_BETTER`, higher for the others."""
    if metric in LOWER_IS_BETTER:
        return Direction(1, "lowest", "falls", "below", "lower")
    return Direction(-1, "highest", "rises", "above", "higher")


def status_text(status: str) -> str:
    """A summary status as a cell shows it (``missing`` -> ``no summary``)."""
    return "no summary" if status == "missing" else status


def is_replicate(key: str) -> bool:
    return key == "seed" or key.endswith(".seed")


@dataclass(eq=False)
class Run:
    path: Path
    config: dict  # flat: dotted keys -> scalars, plus choice:<group> keys
    metrics: pd.DataFrame
    status: str  # summary.json's status; "missing" without a readable summary
    error: str = ""  # summary.json's error message, if any
    code: dict = field(default_factory=dict)  # summary.json's code record (runs.code_record)
    mixed: str = ""  # continued with other code (mixed_code=true): runs.code_record.mixed_line

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
