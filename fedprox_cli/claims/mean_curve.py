"""The seeds' mean curve a paper plots, as one run a test reads (``curve: mean``,
:mod:`.units`): each setting's metrics averaged over its seeds at every evaluation.

FedNMap (arXiv 2510.27424, Sec. 5.1) plots "the mean of 10 trials" and fits its slopes (Figs.
3b, 4b) to the mean curves' final values; a test declared ``curve: mean`` reads that curve, one
unit per panel, instead of each seed's curve. A seed that diverged makes the mean non-finite
from its first non-finite evaluation (the mean of the trials is then undefined: a diverged
mean); a round a seed lacks after diverging counts as non-finite.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..analysis import groups
from ..analysis.run import Run, is_replicate
from ..common import metric_table as mt

MEAN = "mean"  # the seed a mean curve's unit is labelled with ("mean of 10 seeds")


def mean_runs(runs: list[Run]) -> list[Run]:
    """One run per setting of ``runs`` (runs that differ only in their seeds): its metrics the
    mean over the seeds at each evaluation (NaN from where a seed is non-finite or ended), its
    status diverged where a seed diverged, its seeds ``mean of N seeds``."""
    out = []
    for g in groups.group(runs):
        tables = [r.metrics.set_index(mt.ROUND.name) for r in g.runs]
        rounds = sorted(set().union(*(t.index for t in tables)))
        cols = [c for c in tables[0].columns if all(c in t.columns for t in tables)]
        stacked = pd.concat([t.reindex(rounds)[cols].astype(float) for t in tables])
        mean = stacked.groupby(level=0).mean().where(stacked.notna().groupby(level=0).all())
        first = g.runs[0]
        seeds = f"{MEAN} of {len(g.runs)} seeds"
        config = {k: (seeds if is_replicate(k) else v) for k, v in first.config.items()}
        status = "diverged" if any(r.status == "diverged" for r in g.runs) else first.status
        out.append(
            Run(
                Path(f"{first.path.parent}/{seeds}"),
                config,
                mean.rename_axis(mt.ROUND.name).reset_index(),
                status,
            )
        )
    return out
