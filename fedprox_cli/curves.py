"""Figures of many runs: one mean +- std band per run group (scripts/plot.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .plotting import plt, save_figure
from .report import LOG_Y, X_AXES, Run, band, group, slope, split

Y_LABELS = {"stationarity": "stationarity ||G_s(x)||²", "test_acc": "test accuracy",
            "train_loss": "train loss f(x)", "objective": "objective f(x) + h(x)",
            "hoyer": "Hoyer sparsity", "nnz_frac": "share of non-zero entries"}


def plot_groups(runs: list[Run], out: Path, x: str = "round", y: str = "test_acc",
                logy: bool | None = None, title: str = "", panels: list[str] = ()) -> list[str]:
    """Draw ``y`` against ``x`` (round | time | bytes), one line (mean) and band (+- std over
    seeds) per group, one subplot per value of the ``panels`` keys; log y for the metrics in
    LOG_Y unless ``logy`` says otherwise. Returns the labels in legend order."""
    parts = split(runs, list(panels)) if panels else {"": runs}
    cols = min(3, len(parts))
    rows = -(-len(parts) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.6 * cols, 4.2 * rows), squeeze=False, sharey=True)
    for ax in axes.flat[len(parts):]:
        ax.set_visible(False)
    labels = []
    for ax, (panel, panel_runs) in zip(axes.flat, parts.items()):
        for g in group(panel_runs):
            seeds = len(g.runs)
            b = band(g, x, y)
            line, = ax.plot(b["x"], b["mean"], label=f"{g.label} ({seeds} run{'s' * (seeds > 1)})")
            if seeds > 1:
                ax.fill_between(b["x"], b["mean"] - b["std"], b["mean"] + b["std"],
                                color=line.get_color(), alpha=0.2, linewidth=0)
            labels.append(f"{panel}: {g.label}" if panels else g.label)
        if y in LOG_Y if logy is None else logy:
            ax.set_yscale("log")
        ax.set_xlabel(X_AXES[x])
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        ax.set_title(panel, fontsize=9)
    for ax in axes[:, 0]:
        ax.set_ylabel(Y_LABELS.get(y, y))
    fig.suptitle(title, fontsize=10)
    save_figure(fig, out)
    return labels


def plot_slope(runs: list[Run], key: str, out: Path, metric: str = "stationarity") -> list[dict]:
    """Final ``metric`` against ``key`` on log-log axes with the least-squares line of
    log(metric) on log(key) (FedNMap Figs. 3b, 4b). Returns the fits."""
    fits = slope(runs, key, metric)
    fig, ax = plt.subplots(figsize=(5.2, 4.0))
    for f in fits:
        v = np.array([p[0] for p in f["points"]], float)
        m = np.array([p[1] for p in f["points"]], float)
        pts, = ax.plot(v, m, "o")
        name = f"{f['label']}: " if f["label"] != "all runs" else ""
        ax.plot(v, np.exp(f["intercept"]) * v ** f["slope"], "--", color=pts.get_color(),
                label=f"{name}slope {f['slope']:.3f}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(f"{key} (log scale)")
    ax.set_ylabel(f"final {Y_LABELS.get(metric, metric)}")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    save_figure(fig, out)
    return fits
