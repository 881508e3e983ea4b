"""Figures of one run: ``metrics.png`` and the partition's clients x classes counts."""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402
import pandas as pd  # noqa: E402

from .atomic import atomic_write  # noqa: E402


def save_figure(fig, path: Path) -> None:
    """Lay out ``fig``, write it to ``path`` atomically in the format its extension names
    (``.png``, ``.pdf``, ``.svg``, ...; PNG without one), close it."""
    fig.tight_layout()
    fmt = Path(path).suffix.lstrip(".").lower() or "png"
    try:
        atomic_write(path, lambda f: fig.savefig(f, format=fmt, dpi=110))
    finally:
        plt.close(fig)


def plot_run(csv_path: Path, png_path: Path, title: str = "") -> None:
    """Train loss (log scale) and test accuracy against round."""
    df = pd.read_csv(csv_path)
    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.4))
    a.plot(df["round"], df["train_loss"], marker=".", label="train loss f(x)")
    if (df["objective"] != df["train_loss"]).any():
        a.plot(df["round"], df["objective"], marker=".", label="objective f(x)+h(x)")
    a.set_yscale("log")
    a.set_xlabel("round")
    a.legend()
    b.plot(df["round"], 100 * df["test_acc"], marker=".", color="C2")
    b.set_xlabel("round")
    b.set_ylabel("test accuracy (%)")
    for ax in (a, b):
        ax.grid(alpha=0.3)
    fig.suptitle(title, fontsize=9)
    save_figure(fig, png_path)


def partition_counts(run_dir: str | os.PathLike) -> np.ndarray:
    """Counts (n, C): samples of class c held by client i, from a run folder's
    ``partition.npz`` and the labels of the dataset named in its ``config.yaml``."""
    from omegaconf import OmegaConf

    from . import data
    run_dir = Path(run_dir)
    cfg = OmegaConf.load(run_dir / "config.yaml")
    ds = data.load(cfg.dataset.name, cfg.data.root)
    y = ds.train_y.numpy()
    return np.stack([np.bincount(y[c], minlength=ds.num_classes)
                     for c in data.load_partition(run_dir / "partition.npz")])


def plot_partition(run_dir: str | os.PathLike, out: str | os.PathLike | None = None) -> Path:
    """Heatmap of the clients x classes count matrix of a run's partition; written to ``out``
    (default ``RUN/partition.png``). Returns the path written."""
    run_dir = Path(run_dir)
    out = Path(out) if out else run_dir / "partition.png"
    counts = partition_counts(run_dir)
    n, C = counts.shape
    fig, ax = plt.subplots(figsize=(min(3 + 0.25 * C, 16), min(2 + 0.25 * n, 12)))
    im = ax.imshow(counts, aspect="auto", cmap="viridis", interpolation="nearest")
    fig.colorbar(im, ax=ax, label="samples")
    ax.set_xlabel("class")
    ax.set_ylabel("client")
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title(f"{run_dir.name}\n{n} clients, {counts.sum()} samples", fontsize=8)
    save_figure(fig, out)
    return out
