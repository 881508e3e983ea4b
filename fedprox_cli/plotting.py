"""Figures of one run (``metrics.png``)."""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402


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


def save_figure(fig, png_path: Path) -> None:
    """Lay out, write atomically (temp file + rename) and close ``fig``."""
    fig.tight_layout()
    tmp = png_path.with_name(f".{png_path.name}.tmp{os.getpid()}{png_path.suffix}")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    os.replace(tmp, png_path)
