"""The figures of one run: ``metrics.png`` (loss, test accuracy, stationarity against round),
``clients.png`` (the spread of the per-client metrics) and the partition's clients x classes
counts (``partition.png``), drawn with :mod:`.plotting`'s shared pieces."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes

from ..common import metric_table as mt
from ..common import run_files
from .plotting import (
    at_data,
    integer_ticks,
    mark_end,
    metric_axis,
    plt,
    readable_log_ticks,
    run_title,
    save_figure,
)

# metrics, y label (None: the first metric's), log y, first colour
Panel = tuple[tuple[mt.Metric, ...], str | None, bool, int]
RUN_PANELS: tuple[Panel, ...] = (  # the losses share a panel (legend)
    ((mt.TRAIN_LOSS, mt.OBJECTIVE), "loss", True, 0),
    ((mt.TEST_ACC,), None, mt.TEST_ACC.log, 2),
    ((mt.STATIONARITY,), None, mt.STATIONARITY.log, 0),
)


def plot_run(run_dir: Path, png_path: Path, title: str = "") -> None:
    """Loss (train loss, and the objective when h != 0; log y), test accuracy and stationarity
    (log y) against round, each panel with its y label. A run with non-finite values (diverged)
    gets the finite part of every curve, an x at its last finite point and a dotted line at the
    first round with a non-finite loss."""
    df = run_files.read_metric_columns(run_dir)
    rounds = df[mt.ROUND.name]
    losses = [df[c] for c in mt.LOSSES if c in df]
    bad = (
        ~np.isfinite(np.column_stack(losses)).all(axis=1) if losses else np.zeros(len(rounds), bool)
    )
    diverged_at = rounds[bad][0] if bad.any() else None
    fig, axes = plt.subplots(1, len(RUN_PANELS), figsize=(13, 4.0))
    handles: dict[str, Artist] = {}
    for ax, panel in zip(axes, RUN_PANELS):
        _run_panel(ax, panel, df, diverged_at, handles)
    # a fixed layout with the legend inside the figure, below the axes: metrics.png is drawn
    # once (tight_layout and a tight bounding box cost two more draws: ~40% of a small run's plot)
    if handles:
        fig.legend(
            list(handles.values()),
            list(handles),
            loc="lower center",
            fontsize=8,
            frameon=False,
            ncol=1 if max(map(len, handles)) > 45 else min(3, len(handles)),
        )
    fig.subplots_adjust(
        left=0.055, right=0.99, wspace=0.3, top=0.82, bottom=0.24 if handles else 0.14
    )
    fig.suptitle(title, fontsize=9)
    save_figure(fig, png_path, laid_out=True)


def _run_panel(
    ax: Axes,
    panel: Panel,
    df: dict[str, np.ndarray],
    diverged_at: float | None,
    handles: dict[str, Artist],
) -> None:
    """One panel of :func:`plot_run`: its columns' curves against round (a diverged run's
    finite part, its end marked), its legend entries added to ``handles``."""
    metrics, ylabel, log, first = panel
    rounds = df[mt.ROUND.name]
    drawn = False
    for i, m in enumerate(metrics):
        if m.name not in df or (i > 0 and (df[m.name] == df[metrics[0].name]).all()):
            continue  # the objective equal to the loss: h = 0
        ys = df[m.name]
        ys = np.where(np.isfinite(ys) & ((ys > 0) if log else True), ys, np.nan)
        color = f"C{first + i}"
        (line,) = ax.plot(rounds, ys, marker=".", color=color, linestyle="-" if i == 0 else "--")
        if len(metrics) > 1:  # the other panels' y labels name their one curve
            handles.setdefault(m.label(), line)
        if diverged_at is not None:
            mark_end(ax, rounds, ys, color)
        drawn = drawn or bool(np.isfinite(ys).any())
    if diverged_at is not None:
        handles.setdefault(
            f"diverged (round {diverged_at:g}; x: last finite value)",
            ax.axvline(diverged_at, color="red", linestyle=":"),
        )
    if log and drawn:
        ax.set_yscale("log")
        readable_log_ticks(ax)
    if not drawn:
        ax.text(0.5, 0.5, "no finite values", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel(mt.ROUND.label())
    metric_axis(ax, metrics[0], ylabel)
    at_data(ax, rounds)
    ax.grid(alpha=0.3)


def partition_counts(run_dir: str | os.PathLike[str]) -> np.ndarray:
    """Counts (n, C): samples of class c held by client i, from a run folder's
    ``partition.npz`` and the labels of the dataset named in its ``config.yaml``."""
    from .. import data

    folder = Path(run_dir)
    cfg = run_files.read_config_node(folder)  # the record, not a typed run config
    ds = data.load(cfg.dataset.name, cfg.data.root, cfg.dataset.get("_target_"))
    y = ds.train_y.numpy()
    return np.stack(
        [
            np.bincount(y[c], minlength=ds.num_classes)
            for c in data.load_partition(folder / run_files.PARTITION)
        ]
    )


def plot_partition(
    run_dir: str | os.PathLike[str], out: str | os.PathLike[str] | None = None
) -> Path:
    """Heatmap of the clients x classes count matrix of a run's partition; written to ``out``
    (default ``RUN/partition.png``). Returns the path written."""
    run_dir = Path(run_dir)
    out = Path(out) if out else run_dir / run_files.PARTITION_FIGURE
    counts = partition_counts(run_dir)
    n, C = counts.shape
    fig, ax = plt.subplots(figsize=(min(3 + 0.25 * C, 16), min(2 + 0.25 * n, 12)))
    im = ax.imshow(counts, aspect="auto", cmap="viridis", interpolation="nearest")
    fig.colorbar(im, ax=ax, label="samples")
    ax.set_xlabel("class")
    ax.set_ylabel("client")
    for axis in (ax.xaxis, ax.yaxis):
        integer_ticks(axis)
    cfg = run_files.read_config(run_dir)
    setting = run_title({k: cfg[k] for k in ("dataset", "partition") if k in cfg})
    ax.set_title(f"{setting}\n{n} clients, {counts.sum()} samples", fontsize="small")
    save_figure(fig, out, caption=f"{run_dir}: {setting}")
    return out


CLIENT_PANELS = (mt.CLIENT_TRAIN_ACC, mt.CLIENT_TEST_ACC_RW, mt.CLIENT_TRAIN_LOSS)


def plot_clients(run_dir: Path, png_path: Path) -> None:
    """The spread of the per-client metrics over rounds (the run's ``clients_summary.csv``): per
    panel the mean over clients, a +- std band and the mean of the worst 10% of clients."""
    df = run_files.read_clients(run_dir, run_files.CLIENTS_SUMMARY)
    fig, axes = plt.subplots(1, len(CLIENT_PANELS), figsize=(13, 3.6))
    for ax, m in zip(axes, CLIENT_PANELS):
        r, mean, std = df[mt.ROUND.name], df[f"{m.name}_mean"], df[f"{m.name}_std"]
        (mean_line,) = ax.plot(r, mean, color="C0", marker=".")
        band = ax.fill_between(r, mean - std, mean + std, color="C0", alpha=0.2, linewidth=0)
        (worst_line,) = ax.plot(r, df[f"{m.name}_worst10"], color="C3", linestyle="--")
        ax.set_xlabel(mt.ROUND.label())
        metric_axis(ax, m)
        at_data(ax, r)
        ax.grid(alpha=0.3)
    fig.legend(
        [mean_line, band, worst_line],
        ["mean over clients", "± std over clients", "worst 10% of clients (mean)"],
        loc="lower center",
        ncol=3,
        fontsize=8,
        frameon=False,
    )
    fig.subplots_adjust(left=0.055, right=0.99, wspace=0.3, top=0.95, bottom=0.25)
    save_figure(fig, png_path, laid_out=True)
