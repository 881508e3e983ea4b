"""A run read at a point, as every test reads it (definitions: :mod:`.units`): where it
diverged (:func:`diverged_after`, :func:`blown_up`, said by :func:`note`), whether it trained
(:func:`trained`), its final value (:func:`final_of`), its value at a budget of bytes sent
(:func:`budget`, :func:`at_bytes`, :func:`read_at`) and over its curve (:func:`area`).
"""

from __future__ import annotations

import math

import numpy as np

from ..analysis.run import BYTES, Run
from ..common import metric_table as mt
from .declare import Claim, Test
from .loading import key_of
from .text import value_name


def diverged_after(run: Run, metric: str) -> int | None:
    """The round of the run's first non-finite evaluation of ``metric`` or of its objective
    (its divergence), None if every evaluation is finite."""
    bad = ~np.isfinite(run.column(metric))
    if run.has(mt.OBJECTIVE.name):
        bad |= ~np.isfinite(run.column(mt.OBJECTIVE.name))
    return int(run.column(mt.ROUND.name)[bad][0]) if bad.any() else None


BLOWUP = 1e3  # a loss above this multiple of its start has left the scale of training


def blown_up(run: Run, metric: str) -> int | None:
    """The first round from which the run's loss (its objective, else its training loss, else
    ``metric``) stays above :data:`BLOWUP` times its first value, finite or not (None: never)."""
    losses = (mt.OBJECTIVE.name, mt.TRAIN_LOSS.name, metric)
    name = next((m for m in losses if run.has(m)), metric)
    v = np.abs(run.column(name))
    if not len(v) or not math.isfinite(v[0]) or v[0] == 0:
        return None
    high = ~(v <= BLOWUP * v[0])  # non-finite counts as above
    if not high[-1]:
        return None
    first = len(high) - int(np.argmin(high[::-1])) if not high.all() else 0
    return int(run.column(mt.ROUND.name)[first])


def note(run: Run, metric: str) -> str:
    """How a diverged run ended: "first non-finite at round r; above 1e3 x its start from
    round r'" (the second where its loss left the scale before it was non-finite)."""
    r = diverged_after(run, metric)
    if r is None:
        return ""
    up = blown_up(run, metric)
    return f"first non-finite at round {r}" + (
        f"; above 1e3 x its start from round {up}" if up is not None and up < r else ""
    )


def worst(v: float) -> float:
    return v if math.isfinite(v) else math.inf


def trained(claim: Claim, run: Run) -> bool:
    """Whether ``run`` trained: it did not finish below the claim's ``trained_min``."""
    if not claim.trained_metric or run.status != "finished":
        return True
    v = run.final(claim.trained_metric)
    return not (math.isfinite(v) and v < claim.trained_min)


def budget(t: Test, runs: list[Run]) -> float:
    """The bytes an ``at: bytes`` ordering reads every run at: the declared ``budget``, else the
    smallest total a run that reached T sent (none did: the largest any sent)."""
    if t.budget is not None:
        return float(t.budget)
    ends = [float(r.column(BYTES)[-1]) for r in runs if r.status == "finished"]
    return min(ends) if ends else max(float(r.column(BYTES)[-1]) for r in runs)


def read_at(t: Test, runs: list[Run]) -> str:
    """The equal-bytes budget of ``runs`` and the round each was read at ("budget 2.19 GB:
    fedcef_top10 at round 65, za2 at round 12")."""
    sent = budget(t, runs)
    key = key_of(runs, t.compared)
    at = []
    for r in runs:
        within = r.column(mt.ROUND.name)[r.column(BYTES) <= sent]
        where_ = f"round {int(within[-1])}" if len(within) else "no round"
        at.append(f"{value_name(t.compared, r.config.get(key))} at {where_}")
    return f"budget {sent / 1e9:.3g} GB: {', '.join(at)}"


def at_bytes(run: Run, metric: str, sent_max: float) -> float:
    """``metric`` at the run's last evaluation with at most ``sent_max`` bytes sent (up + down);
    non-finite when it had diverged by then."""
    sent, v = run.column(BYTES), run.column(metric)
    return float(v[sent <= sent_max][-1]) if (sent <= sent_max).any() else math.nan


def area(t: Test, run: Run) -> float:
    """The run's metric over its curve from ``t.from_round`` on: the geometric mean of its
    evaluations (the area under the curve on a log axis; the arithmetic mean where a value is not
    positive); non-finite where it diverged."""
    rows = run.column(mt.ROUND.name) >= t.from_round
    v = run.column(t.metric)[rows]
    if not len(v) or not np.isfinite(v).all():
        return math.nan
    return float(np.exp(np.mean(np.log(v)))) if (v > 0).all() else float(np.mean(v))


def final_of(t: Test, run: Run) -> float:
    return run.final(t.metric, "last" if t.at in ("every", "bytes") else t.at)
