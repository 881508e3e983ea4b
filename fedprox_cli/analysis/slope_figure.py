"""The slope figure (``fedrun-plot --slope``): a final metric against a swept parameter on
log-log axes with its least-squares line (FedNMap Figs. 3b, 4b)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from matplotlib.ticker import NullFormatter

from ..common import metric_table as mt
from .caption import common_keys, sentence, what_lines_are
from .curves import new_figure, style, written
from .groups import fmt, shared, short
from .plotting import figure_legend, metric_axis, readable_log_ticks, symbol
from .renames import Renames
from .run import Run
from .stats import Fit, seed_interval, slope

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes


def plot_slope(
    runs: list[Run],
    key: str,
    out: Path,
    metric: str = mt.STATIONARITY.name,
    final: str = "last",
    warn: Callable[[str], None] = lambda _: None,
    title: str = "",
    names: dict[str, str] | None = None,
    panel_size: tuple[float, float] | None = None,
) -> tuple[list[Fit], str]:
    """Final ``metric`` (mean +- std over seeds) against ``key`` on log-log axes with the
    least-squares line of log(metric) on log(key) (FedNMap Figs. 3b, 4b), its slope, R^2 and,
    with several seeds, the spread of the per-seed slopes. Returns the fits and the caption."""
    names = Renames.of(names)
    fits = slope(runs, key, metric, final, warn)
    fig, axes = new_figure(1, panel_size)
    ax = axes[0, 0]
    handles, labels = _slope_lines(ax, fits, names)
    _slope_axes(ax, fits, key, metric, final, names)
    if title:
        fig.suptitle(title)
    text = _slope_caption(runs, key, fits)
    names.check("figure", labels)
    figure_legend(fig, handles, labels, text)
    return fits, written(fig, out, text)


def _slope_lines(ax: Axes, fits: list[Fit], names: Renames) -> tuple[list[Artist], list[str]]:
    """Each fit of :func:`plot_slope` drawn: its points with their spread and its line; the
    lines and their legend labels (slope, R^2, the per-seed slopes)."""
    handles: list[Artist] = []
    labels: list[str] = []
    for i, f in enumerate(fits):
        st = style(i)
        v = np.array([p[0] for p in f["points"]], float)
        m = np.array([p[1] for p in f["points"]], float)
        s = np.nan_to_num(np.array([p[2] for p in f["points"]], float))
        ax.errorbar(v, m, yerr=s, fmt=st["marker"], color=st["color"], capsize=3)
        (line,) = ax.plot(
            v,
            np.exp(f["intercept"]) * v ** f["slope"],
            color=st["color"],
            linestyle=st["linestyle"],
        )
        name = f"{names.get(f['label'], f['label'])}: " if f["label"] != "all runs" else ""
        seeds = seed_interval(f)
        handles.append(line)
        labels.append(
            f"{name}slope {f['slope']:.3f}, R² {f['r2']:.3f}"
            + (f"; per seed {seeds}" if seeds else "")
        )
    return handles, labels


def _slope_axes(
    ax: Axes, fits: list[Fit], key: str, metric: str, final: str, names: Renames
) -> None:
    """:func:`plot_slope`'s log-log axes, ticked at the swept values of ``key``."""
    ax.set_xscale("log")
    ax.set_yscale("log")
    readable_log_ticks(ax, "x")
    readable_log_ticks(ax, "y")
    swept = sorted({p[0] for f in fits for p in f["points"]})
    ax.set_xticks(swept, [fmt(v) for v in swept])  # the swept values, not decades
    ax.xaxis.set_minor_formatter(NullFormatter())
    final_text = "mean of the last 10% of evaluations of" if final == "tail" else "final"
    ax.set_xlabel(f"{names.get(key) or symbol(key)} (log scale)")
    metric_axis(ax, mt.metric(metric), f"{final_text} {mt.label(metric)}")
    ax.grid(alpha=0.3, which="both")


def _slope_caption(runs: list[Run], key: str, fits: list[Fit]) -> str:
    """:func:`plot_slope`'s caption: the settings the runs share, what the points are, and
    what the bars and lines show."""
    shared_settings = shared(runs)
    common = common_keys(shared_settings, [r.config for r in runs])
    return " ".join(
        t
        for t in (
            sentence([], shared_settings, common, leave=[key]),
            what_lines_are({p[3] for f in fits for p in f["points"]}, False, False, points=True),
            f"Bars: ± 1 std over the seeds; lines: least-squares fits of log(value) on log "
            f"{short(key)}.",
        )
        if t
    )
