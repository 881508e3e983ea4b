"""Figures of many runs: one mean +- std band per run group (``fedrun-plot``).

Every figure has one legend, below the axes, whose entries say how many runs each curve
averages (``(n=3)``); ``names`` renames them (:func:`relabel`). Curves cycle colours, line
styles and markers, so coinciding curves stay apart, and curves identical to float precision are
named as such; a run that did not finish (diverged, interrupted, ...) is left out of its group's
mean and drawn on its own up to its last finite point, marked there (``x`` for diverged).
Legend entries name each curve by what sets it apart: the method's display name (its class name,
``FedProx``) with the parameters that differ between curves as symbols (``FedProx (mu = 0.01)``),
then the other keys that differ (every one of them, not just enough to tell the curves apart);
``--label`` renames keep the ``key=value`` form. The shaded band is named in the legend (mean ±
std over each curve's n seeds). The settings all runs share are the figure's caption, written into
the file's metadata and beside it (``fig.pdf`` -> ``fig.caption.txt``), not drawn; x limits are
the data's (whole-number ticks for rounds), log axes have plain-number ticks.
Accuracies are fractions (0-1) as in ``metrics.csv``, in every figure and table.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import combinations
from pathlib import Path

import numpy as np
from matplotlib.ticker import NullFormatter

from ..common.files import atomic_write_text
from .plotting import (at_data, caption_file, figure_legend, mark_end, plt, readable_log_ticks,
                       run_title, save_figure)
from .groups import Group, config_key, differing, fmt, group, relabel, shared, short, split
from .run import CHOICE, LOG_Y, X_AXES, Run
from .stats import band, seed_interval, slope

Y_LABELS = {"stationarity": "stationarity ||G_s(x)||²", "test_acc": "test accuracy",
            "train_loss": "train loss f(x)", "objective": "objective f(x) + h(x)",
            "hoyer": "Hoyer sparsity", "nnz_frac": "share of non-zero entries"}
LINESTYLES = ("-", "--", "-.", ":")
MARKERS = ("o", "s", "^", "v", "D", "P", "*", "h")
END_MARKERS = {"diverged": "x"}     # other unfinished runs: ">"


def style(i: int) -> dict:
    """The i-th curve's colour, line style and marker (cycles of 10, 4 and 8: no two of the
    first 40 curves look alike)."""
    return {"color": f"C{i % 10}", "linestyle": LINESTYLES[i % 4], "marker": MARKERS[i % 8]}


def caption(runs: list[Run], leave=(), banded: bool = False) -> str:
    """The settings all ``runs`` share (without ``leave`` keys), on one line; how many runs
    each curve holds is in its legend entry; ``banded``: what the shaded band is."""
    common = {k: v for k, v in shared(runs).items() if k not in leave}
    band_text = "; lines: mean over each curve's n runs (seeds), shaded: ± std" if banded else ""
    return " · ".join(run_title(common).splitlines()) + "; n: runs (seeds) per curve" + band_text


def write_caption(out: Path, text: str) -> None:
    """The caption beside the figure (:func:`plotting.caption_file`)."""
    atomic_write_text(caption_file(out), text + "\n")


def algorithm_title(name: str) -> str:
    """An algorithm's display name: its class's name (``FedProx``), or ``name`` if it cannot
    be found here (a plugin not installed where the figure is drawn)."""
    from ..common.errors import UserError
    try:
        from .. import algorithms
        return algorithms.base.lookup(str(name)).__name__
    except (UserError, ImportError):
        return str(name)


def display(values: dict, config: dict) -> str:
    """A curve's legend label from the values that set it apart: the algorithm's display name
    with its differing parameters (``FedProx (mu = 0.01)``), then the other keys (``K = 10``)."""
    params = [f"{k.split('.', 1)[1]} = {fmt(v)}" for k, v in values.items()
              if k.startswith("algorithm.") and k != "algorithm.name"]
    head = ""
    if "algorithm.name" in values or params:
        head = algorithm_title(config.get("algorithm.name", "algorithm")) + (f" ({', '.join(params)})" if params else "")
    rest = [f"{short(k)} = {fmt(v)}" for k, v in values.items() if not k.startswith("algorithm.")]
    return ", ".join(p for p in (head, *rest) if p) or "all runs"


def every_difference(groups: list[Group], shown) -> None:
    """Add to each group's label every config key that differs between the groups (beyond the
    ``shown`` panel keys and the group choices): none is left out of the legend because fewer
    keys already tell the curves apart."""
    keys = sorted(k for k in differing([g.config for g in groups]) if k not in shown and not k.startswith(CHOICE))
    for g in groups:
        g.label_values.update({k: g.config[k] for k in keys if k in g.config and k not in g.label_values})
        g.label = ", ".join(f"{short(k)}={fmt(v)}" for k, v in g.label_values.items()) or "all runs"


def _figure(panels: int, panel_size) -> tuple:
    cols = min(3, panels)
    rows = -(-panels // cols)
    w, h = panel_size or (5.6, 4.2)
    fig, axes = plt.subplots(rows, cols, figsize=(w * cols, h * rows), squeeze=False, sharey=True)
    return fig, axes


def _same(a, b) -> bool:
    return len(a) == len(b) and np.allclose(a, b, rtol=1e-6, atol=1e-12, equal_nan=True)


def plot_groups(runs: list[Run], out: Path, x: str = "round", y: str = "test_acc",
                logy: bool | None = None, title: str = "", panels: list[str] = (),
                warn: Callable[[str], None] = lambda _: None, names: dict[str, str] | None = None,
                panel_size: tuple[float, float] | None = None) -> tuple[list[str], str]:
    """Draw ``y`` against ``x`` (round | time | bytes), one line (mean over the group's finished
    runs, markers every tenth point) and band (+- std, with two or more) per group, one subplot
    per value of the ``panels`` keys (each ``panel_size`` inches); log y for the metrics in
    LOG_Y unless ``logy`` says otherwise; ``title`` drawn above if given. Returns the legend's
    labels and the caption (also in the file's metadata)."""
    names = names or {}
    parts = split(runs, list(panels)) if panels else {"": runs}
    panel_keys = [config_key(runs, k) for k in panels]
    groups = group(runs, shown=panel_keys)
    every_difference(groups, panel_keys)
    for g in groups:
        g.label = relabel(g.label, names) if names else display(g.label_values, g.config)
    styles = {label: style(i) for i, label in enumerate(dict.fromkeys(g.label for g in groups))}
    fig, axes = _figure(len(parts), panel_size)
    for ax in axes.flat[len(parts):]:
        ax.set_visible(False)
    means: dict[str, list] = {}       # legend label -> [handle, set of run counts, note]
    banded = False                    # a ± std band drawn
    alone: dict[str, list] = {}       # label: status -> [handle, number of runs]
    log = y in LOG_Y if logy is None else logy
    for ax, (panel, panel_runs) in zip(axes.flat, parts.items()):
        inside = {id(r) for r in panel_runs}
        curves = []
        for g in groups:
            rs = [r for r in g.runs if id(r) in inside]
            ok = [r for r in rs if r.problem() is None]
            st = styles[g.label]
            if ok:
                b = band(ok, x, y)
                line, = ax.plot(b["x"], b["mean"], **st, markevery=max(1, len(b) // 10),
                                markersize=0.8 * plt.rcParams["lines.markersize"])
                if len(ok) > 1:
                    banded = True
                    ax.fill_between(b["x"], b["mean"] - b["std"], b["mean"] + b["std"],
                                    color=st["color"], alpha=0.15, linewidth=0)
                means.setdefault(g.label, [line, set(), ""])[1].add(len(ok))
                curves.append((g.label, b["x"].to_numpy(), b["mean"].to_numpy()))
            for r in rs:
                why = r.problem()
                if why is None:
                    continue
                xs, ys = r.column(x), r.column(y)
                ax.plot(xs, np.where(np.isfinite(ys), ys, np.nan), color=st["color"],
                        linestyle=st["linestyle"], linewidth=0.9, alpha=0.8)
                mark = END_MARKERS.get(r.status, ">")
                mark_end(ax, xs, ys, st["color"], mark)
                handle = plt.Line2D([], [], color=st["color"], marker=mark, markersize=8,
                                    linestyle=st["linestyle"], markeredgewidth=2)
                alone.setdefault(f"{g.label}: {why}", [handle, 0])[1] += 1
        for (a, xa, ya), (b, xb, yb) in combinations(curves, 2):
            if _same(xa, xb) and _same(ya, yb):
                where = f" in panel {panel}" if panel else ""
                warn(f"note: curves {a!r} and {b!r}{where} are identical to float precision")
                means[b][2] = f"; identical to {a}"
        if log:
            ax.set_yscale("log")
            readable_log_ticks(ax)
        at_data(ax, np.concatenate([r.column(x) for r in panel_runs]), integer=x == "round")
        ax.set_xlabel(X_AXES[x])
        ax.grid(alpha=0.3)
        ax.set_title(relabel(panel, names) if panel else "")
    for ax in axes[:, 0]:
        ax.set_ylabel(Y_LABELS.get(y, y))
    labels = [f"{label} (n={min(c)}{f'-{max(c)}' if len(c) > 1 else ''}{note})"
              for label, (_, c, note) in means.items()]
    labels += [f"{label} ({k} run{'s' * (k > 1)}, not in the mean; marked at the last finite point)"
               for label, (_, k) in alone.items()]
    handles = [e[0] for e in (*means.values(), *alone.values())]
    if banded:
        handles.append(plt.Rectangle((0, 0), 1, 1, color="grey", alpha=0.3, linewidth=0))
        labels.append("band: ± std over the n seeds")
    figure_legend(fig, handles, labels)
    if title:
        fig.suptitle(title)
    text = caption(runs, leave=panel_keys, banded=banded)
    save_figure(fig, out, caption=text)
    write_caption(out, text)
    return labels, text


def plot_slope(runs: list[Run], key: str, out: Path, metric: str = "stationarity",
               final: str = "last", warn: Callable[[str], None] = lambda _: None,
               title: str = "", names: dict[str, str] | None = None,
               panel_size: tuple[float, float] | None = None) -> tuple[list[dict], str]:
    """Final ``metric`` (mean +- std over seeds) against ``key`` on log-log axes with the
    least-squares line of log(metric) on log(key) (FedNMap Figs. 3b, 4b), its slope, R^2 and,
    with several seeds, the spread of the per-seed slopes. Returns the fits and the caption."""
    fits = slope(runs, key, metric, final, warn)
    fig, axes = _figure(1, panel_size)
    ax = axes[0, 0]
    handles, labels = [], []
    for i, f in enumerate(fits):
        st = style(i)
        v = np.array([p[0] for p in f["points"]], float)
        m = np.array([p[1] for p in f["points"]], float)
        s = np.nan_to_num(np.array([p[2] for p in f["points"]], float))
        ax.errorbar(v, m, yerr=s, fmt=st["marker"], color=st["color"], capsize=3)
        line, = ax.plot(v, np.exp(f["intercept"]) * v ** f["slope"], color=st["color"],
                        linestyle=st["linestyle"])
        name = f"{relabel(f['label'], names or {})}: " if f["label"] != "all runs" else ""
        seeds = seed_interval(f)
        handles.append(line)
        labels.append(f"{name}slope {f['slope']:.3f}, R² {f['r2']:.3f}"
                      + (f"; per seed {seeds}" if seeds else ""))
    ax.set_xscale("log")
    ax.set_yscale("log")
    readable_log_ticks(ax, "x")
    readable_log_ticks(ax, "y")
    swept = sorted({p[0] for f in fits for p in f["points"]})
    ax.set_xticks(swept, [fmt(v) for v in swept])   # the swept values, not decades
    ax.xaxis.set_minor_formatter(NullFormatter())
    final_text = "mean of the last 10% of evaluations of" if final == "tail" else "final"
    ax.set_xlabel(f"{(names or {}).get(key, key)} (log scale)")
    ax.set_ylabel(f"{final_text} {Y_LABELS.get(metric, metric)}")
    ax.grid(alpha=0.3, which="both")
    figure_legend(fig, handles, labels)
    if title:
        fig.suptitle(title)
    text = caption(runs, leave=[key])
    save_figure(fig, out, caption=text)
    write_caption(out, text)
    return fits, text
