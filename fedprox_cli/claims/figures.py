"""Every claim's figure as its paper draws it, by one function (:func:`draw`) from the claim's runs
and its ``figure:`` declaration (:class:`.declare.Figure`): the paper's panels ((a), (b), ...),
x and y (round, wall time, transmitted bytes in MB/GB), log axes, the paper's notation (Q for
FedNMap's local steps), the methods as the paper prints them, the paper's numbers drawn as
reference lines labelled "paper", diverged runs marked where they ended (x) and collapsed runs
(ended below the claim's ``trained_min``) drawn alone, marked (o). The caption under the figure
states the data (and what it stands in for), n, K (or Q), T, the seeds and what a band is.
Written as PNG (for the report) and PDF with TrueType (Type 42) fonts (for a paper).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator, NullFormatter

from ..analysis import groups as grouping
from ..analysis.curves import Style, mean_curve, style
from ..analysis.names import method_names
from ..analysis.plotting import (
    at_data,
    byte_unit,
    clip_bands,
    figure_legend,
    metric_axis,
    plt,
    readable_log_ticks,
    save_figure,
    styled,
)
from ..analysis.run import BYTES, TIME, X_AXES, Run
from ..analysis.stats import fit_line
from ..common import metric_table as mt
from .declare import Claim, Figure, RunSet
from .figure_caption import Drawn, caption, notation, value
from .paper_marks import paper_mark

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from ..analysis.plotting import Band


FORMATS = ("png", "pdf")
PNG_DPI = 150  # the report's PNGs: sharp on screen, small in the repository


def _y_label(fig: Figure, y: str) -> str:
    """``y``'s label as the papers' figures print it (:mod:`common.metric_table`); stationarity
    in the figure's own symbol."""
    m = mt.metric(y)
    return m.paper or m.label(fig.stationarity if m is mt.STATIONARITY else None)


def paths(claim: Claim, root: Path) -> list[Path]:
    """The files :func:`draw` writes for ``claim`` under the results' ``reproduction/`` folder."""
    return [root / "figures" / f"{claim.id}.{fmt}" for fmt in FORMATS]


def _matches(run: Run, where: dict[str, Any]) -> bool:
    return all(
        grouping.matches(value(run, k), grouping.fmt(v) if isinstance(v, float) else str(v))
        for k, v in where.items()
    )


def _collapsed(claim: Claim, run: Run) -> bool:
    """A finished run that ended below the claim's ``trained_min`` (chance accuracy)."""
    if not claim.trained_metric or run.status != "finished" or not run.has(claim.trained_metric):
        return False
    v = run.final(claim.trained_metric)
    return math.isfinite(v) and v < claim.trained_min


def curve_names(fig: Figure, runs: list[Run], key: str) -> dict[str, str]:
    """Each value of ``key`` (a curve) as the legend says it: the declared name, else the
    method's printed name, else the declared template (``Q = {}``) or ``symbol = value``."""
    printed = method_names([r.config for r in runs], grouping.config_key(runs, key))
    out = {}
    for r in runs:
        v = grouping.fmt(value(r, key))
        out[v] = (
            fig.names.get(v)
            or printed.get(v)
            or (
                fig.label.format(v)
                if fig.label and key == fig.curves
                else f"{notation(fig, key)} = {v}"
            )
        )
    return out


def _order(fig: Figure, values: list[str]) -> list[str]:
    listed = [grouping.fmt(v) if isinstance(v, float) else str(v) for v in fig.order]
    return sorted(
        values,
        key=lambda v: (
            listed.index(v) if v in listed else len(listed),
            grouping.order([float(v)]) if _num(v) else (1, 0, v),
        ),
    )


def _num(v: str) -> bool:
    try:
        float(v)
        return True
    except ValueError:
        return False


def _mean_curve(
    ax: Axes, ok: list[Run], x: str, y: str, scale: float, log: bool, st: Style
) -> tuple[Line2D, Band | None, tuple[np.ndarray, np.ndarray]]:
    """The mean curve of ``ok`` (its line; the band of one std where there are two or more;
    its x and mean), drawn as fedrun-plot draws one (:func:`analysis.curves.mean_curve`)."""
    line, xs, mean, spread = mean_curve(ax, ok, x, y, scale, log, st, marks=8, markersize=3)
    return line, spread, (xs, mean)


def _alone(
    ax: Axes,
    claim: Claim,
    r: Run,
    x: str,
    y: str,
    scale: float,
    log: bool,
    st: Style,
    state: Drawn,
) -> None:
    """A run outside the mean (diverged, collapsed, unfinished): dotted, its end marked."""
    trained = mt.metric(claim.trained_metric)
    why = (
        f"collapsed to chance ({trained.words} < {trained.said(claim.trained_min)} at the end)"
        if _collapsed(claim, r)
        else r.problem()
    )
    if why is None:
        return
    xs, ys = r.column(x) / scale, r.column(y)
    ax.plot(
        xs,
        np.where(np.isfinite(ys), ys, np.nan),
        color=st["color"],
        linestyle=":",
        linewidth=0.8,
    )
    mark = "x" if r.status == "diverged" else "o" if why.startswith("collapsed") else ">"
    end = np.flatnonzero(np.isfinite(xs) & np.isfinite(ys) & ((ys > 0) if log else True))
    if len(end):
        ax.plot(
            [xs[end[-1]]],
            [ys[end[-1]]],
            marker=mark,
            markersize=5,
            markeredgewidth=1.3,
            color=st["color"],
            markerfacecolor="none",
            linestyle="none",
            zorder=5,
        )
    state.alone.setdefault((mark, why), set()).add(id(r))  # a run in two panels counts once


def _axes(
    ax: Axes,
    fig: Figure,
    panel: dict[str, Any],
    runs: list[Run],
    x: str,
    y: str,
    scale: float,
    unit: str,
    log: bool,
) -> None:
    """A curves panel's ticks and axis labels."""
    if log:
        readable_log_ticks(ax)
    rounds = x == mt.ROUND.name
    at_data(ax, np.concatenate([r.column(x) / scale for r in runs]), integer=rounds)
    ax.xaxis.set_major_locator(MaxNLocator(nbins=5, integer=rounds))
    ax.set_xlabel(
        f"transmitted bytes ({unit})"
        if x == BYTES
        else "training time (s)"
        if x == TIME
        else "communication round"
        if rounds
        else X_AXES[x]
    )
    metric_axis(ax, mt.metric(y), panel.get("ylabel") or _y_label(fig, y))


def _curves_panel(
    ax: Axes, claim: Claim, panel: dict[str, Any], runs: list[Run], state: Drawn
) -> None:
    fig, handles = state.fig, state.handles
    x, y, key = panel.get("x", fig.x), panel.get("y", fig.y), panel.get("curves", fig.curves)
    names = curve_names(fig, runs, key)
    styles = {v: style(i) for i, v in enumerate(_order(fig, list(names)))}
    log = panel.get("logy", fig.logy)
    if log:
        ax.set_yscale("log")
    by: dict[str, list[Run]] = {}
    for r in runs:
        by.setdefault(grouping.fmt(value(r, key)), []).append(r)
    scale, unit = (
        byte_unit(max(float(np.nanmax(r.column(BYTES), initial=0)) for r in runs))
        if x == BYTES
        else (1.0, "")
    )
    bands: list[Band] = []
    finals: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for v in _order(fig, list(by)):
        st, name = styles[v], names[v]
        ok = [r for r in by[v] if r.problem() is None and not _collapsed(claim, r)]
        state.seen.add(v)
        if ok:
            line, spread, finals[v] = _mean_curve(ax, ok, x, y, scale, log, st)
            handles.setdefault(name, line)
            bands += [spread] if spread else []
            state.meaned.add(name)
        else:  # no run in the mean: the curve is still named, by its style
            handles.setdefault(name, Line2D([], [], **st, markersize=3))
            state.unmeaned.add(name)
        for r in by[v]:
            _alone(ax, claim, r, x, y, scale, log, st, state)
    state.clipped = clip_bands(ax, bands) or state.clipped
    state.banded = state.banded or bool(bands)
    for mark in fig.marks:
        if mark.get("panel", panel["label"]) == panel["label"]:
            paper_mark(ax, mark, finals, names, handles)
    _axes(ax, fig, panel, runs, x, y, scale, unit, log)


def _slope_panel(
    ax: Axes, claim: Claim, panel: dict[str, Any], runs: list[Run], state: Drawn
) -> None:
    """Final (tail) ``y`` against ``key`` on log-log axes: mean ± std per value, the least-squares
    line, and the paper's slope as a reference line through the same centre."""
    fig, handles = state.fig, state.handles
    key, y, final = panel["key"], panel.get("y", fig.y), panel.get("final", "tail")
    by: dict[Any, list[float]] = {}  # a value of key -> the finals there
    for r in runs:
        if r.problem(y, final) is None and not _collapsed(claim, r):
            by.setdefault(value(r, key), []).append(r.final(y, final))
    v = np.array(sorted(by), float)
    m = np.array([np.mean(by[k]) for k in sorted(by)])
    s = np.array([np.std(by[k], ddof=1) if len(by[k]) > 1 else 0.0 for k in sorted(by)])
    ax.errorbar(v, m, yerr=np.minimum(s, 0.95 * m), fmt="o", color="C0", capsize=2, markersize=3)
    b, a, r2 = fit_line(np.log(v), np.log(m))
    (fit,) = ax.plot(v, np.exp(a) * v**b, color="C0", linewidth=1.0)
    handles.setdefault(f"ours: slope {b:.3f} (R² {r2:.2f})".replace("-", "−"), fit)
    cx, cy = np.log(v).mean(), np.log(m).mean()
    for mark in fig.marks:
        if mark.get("panel") == panel["label"] and mark["kind"] == "slope":
            (ref,) = ax.plot(
                v,
                np.exp(cy + mark["value"] * (np.log(v) - cx)),
                color="0.3",
                linestyle=(0, (4, 2)),
                linewidth=0.9,
            )
            handles.setdefault(mark["text"], ref)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(v, [grouping.fmt(int(x) if float(x).is_integer() else x) for x in v])
    ax.xaxis.set_minor_formatter(NullFormatter())
    readable_log_ticks(ax, "y")
    ax.set_xlabel(f"{notation(fig, key)} (log scale)")
    metric_axis(ax, mt.metric(y), f"final {_y_label(fig, y)}")


def draw(claim: Claim, rs: RunSet, runs: list[Run], root: Path) -> list[Path]:
    """Draw ``claim``'s figure from ``runs`` (of the run set ``rs``) into :func:`paths`; returns
    the files written."""
    fig_decl = claim.figure_spec
    assert fig_decl is not None, f"claim {claim.id} declares no figure to draw"
    runs = [r for r in runs if r.config.get("seed") in rs.seeds]
    rows, cols = fig_decl.grid or (1, len(fig_decl.panels))
    with styled("paper"):
        fig, axes = plt.subplots(
            rows, cols, figsize=(fig_decl.width or 3.4 * min(cols, 2), 2.3 * rows), squeeze=False
        )
        state = Drawn(fig_decl)
        handles = state.handles
        for ax, panel in zip(axes.flat, fig_decl.panels):
            mine = [r for r in runs if _matches(r, panel.get("where", {}))]
            if panel.get("kind") == "slope":
                _slope_panel(ax, claim, panel, mine, state)
            else:
                _curves_panel(ax, claim, panel, mine, state)
            ax.set_title(f"{panel['label']} {panel.get('title', '')}".strip(), fontsize="medium")
        for ax in axes.flat[len(fig_decl.panels) :]:
            ax.set_visible(False)
        for (mark, why), ids in state.alone.items():
            k = len(ids)
            end = "its last finite value" if mark == "x" else "its end"
            handles[f"{why} ({k} run{'s' * (k > 1)}, not in the mean; {mark}: {end})"] = Line2D(
                [],
                [],
                color="0.3",
                marker=mark,
                linestyle=":",
                markersize=5,
                markerfacecolor="none",
            )
        text = caption(claim, rs, runs, state, fig_decl)
        figure_legend(fig, list(handles.values()), list(handles), text)
        out = paths(claim, root)
        for path in out:
            keep = plt.rcParams["savefig.dpi"]
            plt.rcParams["savefig.dpi"] = PNG_DPI if path.suffix == ".png" else keep
            save_figure(fig, path, caption=text, crop=True, laid_out=True, close=False)
            plt.rcParams["savefig.dpi"] = keep
        plt.close(fig)
    return out
