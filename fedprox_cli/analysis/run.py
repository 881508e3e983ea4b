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
from typing import Any

import numpy as np
import pandas as pd

from ..common import metric_table as mt
from ..common.run_files import SummaryRecord
from ..runs import view

CHOICE = "choice:"  # prefix of config-group choice keys (choice:algorithm)
TIME, BYTES = "time", "bytes"  # the x axes besides the round: derived from the counters
X_AXES = {
    mt.ROUND.name: mt.ROUND.label(),
    TIME: mt.TIME.label(),
    BYTES: "communication (bytes, up + down)",
}
X_COLUMNS = {
    mt.ROUND.name: (mt.ROUND.name,),
    TIME: (mt.TIME.name,),
    BYTES: (mt.BYTES_UP.name, mt.BYTES_DOWN.name),
}
FINALS = ("last", "tail")  # final value: the last evaluation, or the mean of the last 10%


def status_text(status: str) -> str:
    """A summary status as a cell shows it (``missing`` -> ``no summary``)."""
    return "no summary" if status == view.MISSING else status


def is_replicate(key: str) -> bool:
    return key == "seed" or key.endswith(".seed")


@dataclass(eq=False)
class Run:
    path: Path
    config: dict[str, Any]  # flat: dotted keys -> scalars, plus choice:<group> keys
    metrics: pd.DataFrame
    status: str  # the run's status (runs.view.RunView.status)
    error: str = ""  # summary.json's error message, if any
    # summary.json's code record (runs.code_record)
    code: dict[str, Any] = field(default_factory=dict)
    mixed: str = ""  # continued with other code (mixed_code=true): runs.code_record.mixed_line
    summary: SummaryRecord = field(default_factory=SummaryRecord)  # its summary.json

    def column(self, name: str) -> np.ndarray:
        return np.asarray(sum(self.metrics[c] for c in X_COLUMNS.get(name, (name,))), float)

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
    def seed(self) -> tuple[tuple[str, Any], ...]:
        return tuple(sorted((k, v) for k, v in self.config.items() if is_replicate(k)))
