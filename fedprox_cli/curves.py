"""Figures of many runs: one mean +- std band per run group (scripts/plot.py).

Every figure has one legend, below the axes; curves cycle colours, line styles and markers, so
coinciding curves stay apart, and curves identical to float precision are named as such; a run
that did not finish (diverged, interrupted, ...) is left out of its group's mean and drawn on
its own up to its last finite point, marked there (``x`` for diverged). The settings all runs
share are the caption; the x-axis of rounds has whole-number ticks, log axes plain-number ticks.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import combinations
from pathlib import Path

import numpy as np
from matplotlib.ticker import NullFormatter

from .plotting import (figure_legend, integer_ticks, mark_end, plt, readable_log_ticks,
                       run_title, save_figure)
from .report import (LOG_Y, X_AXES, Run, band, config_key, fmt, group, seed_interval, shared,
                     slope, split)

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


def caption(runs: list[Run], title: str = "", leave=()) -> str:
    """``title`` over the settings all ``runs`` share (without ``leave`` keys) and their seeds."""
    common = {k: v for k, v in shared(runs).items() if k not in leave}
    seeds = sorted({r.config.get("seed") for r in runs if "seed" in r.config}, key=str)
    tail = f"seed{'s' * (len(seeds) > 1)} {', '.join(map(fmt, seeds))}" if seeds else ""
    return "\n".join(t for t in (title, run_title(common), tail) if t)


def _same(a, b) -> bool:
    return len(a) == len(b) and np.allclose(a, b, rtol=1e-6, atol=1e-12, equal_nan=True)


def plot_groups(runs: list[Run], out: Path, x: str = "round", y: str = "test_acc",
                logy: bool | None = None, title: str = "", panels: list[str] = (),
                warn: Callable[[str], None] = lambda _: None) -> list[str]:
    """Draw ``y`` against ``x`` (round | time | bytes), one line (mean over the group's finished
    runs, markers every tenth point) and band (+- std, with two or more) per group, one subplot
    per value of the ``panels`` keys; log y for the metrics in LOG_Y unless ``logy`` says
    otherwise. Returns the legend's labels."""
    parts = split(runs, list(panels)) if panels else {"": runs}
    panel_keys = [config_key(runs, k) for k in panels]
    groups = group(runs, shown=panel_keys)
    styles = {label: style(i) for i, label in enumerate(dict.fromkeys(g.label for g in groups))}
    cols = min(3, len(parts))
    rows = -(-len(parts) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.6 * cols, 4.2 * rows), squeeze=False, sharey=True)
    for ax in axes.flat[len(parts):]:
        ax.set_visible(False)
    means: dict[str, list] = {}       # legend label -> [handle, set of run counts, note]
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
                                markersize=5)
                if len(ok) > 1:
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
        if x == "round":
            integer_ticks(ax.xaxis)
        ax.set_xlabel(X_AXES[x])
        ax.grid(alpha=0.3)
        ax.set_title(panel, fontsize=9)
    for ax in axes[:, 0]:
        ax.set_ylabel(Y_LABELS.get(y, y))
    labels = [f"{label} (n={min(c)}{f'-{max(c)}' if len(c) > 1 else ''}{note})"
              for label, (_, c, note) in means.items()]
    labels += [f"{label} ({k} run{'s' * (k > 1)}, not in the mean; marked at the last finite point)"
               for label, (_, k) in alone.items()]
    figure_legend(fig, [e[0] for e in (*means.values(), *alone.values())], labels)
    fig.suptitle(caption(runs, title, leave=panel_keys), fontsize=9)
    save_figure(fig, out)
    return labels


def plot_slope(runs: list[Run], key: str, out: Path, metric: str = "stationarity",
               final: str = "last", warn: Callable[[str], None] = lambda _: None,
               title: str = "") -> list[dict]:
    """Final ``metric`` (mean +- std over seeds) against ``key`` on log-log axes with the
    least-squares line of log(metric) on log(key) (FedNMap Figs. 3b, 4b), its slope, R^2 and,
    with several seeds, the spread of the per-seed slopes. Returns the fits."""
    fits = slope(runs, key, metric, final, warn)
    fig, ax = plt.subplots(figsize=(5.6, 4.2))
    handles, labels = [], []
    for i, f in enumerate(fits):
        st = style(i)
        v = np.array([p[0] for p in f["points"]], float)
        m = np.array([p[1] for p in f["points"]], float)
        s = np.nan_to_num(np.array([p[2] for p in f["points"]], float))
        ax.errorbar(v, m, yerr=s, fmt=st["marker"], color=st["color"], capsize=3)
        line, = ax.plot(v, np.exp(f["intercept"]) * v ** f["slope"], color=st["color"],
                        linestyle=st["linestyle"])
        name = f"{f['label']}: " if f["label"] != "all runs" else ""
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
    ax.set_xlabel(f"{key} (log scale)")
    ax.set_ylabel(f"{final_text} {Y_LABELS.get(metric, metric)}", fontsize=9)
    ax.grid(alpha=0.3, which="both")
    figure_legend(fig, handles, labels)
    fig.suptitle(caption(runs, title, leave=[key]), fontsize=9)
    save_figure(fig, out)
    return fits
