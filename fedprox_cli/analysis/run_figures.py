"""The figures a run draws as it ends: ``metrics.png``, and ``clients.png`` where the run wrote
per-client metrics. matplotlib loads only when one is drawn (a run's start stays light)."""

from __future__ import annotations

from pathlib import Path

from ..common import run_files


def draw(composed, out: Path) -> None:
    """The figures of a finished or diverged run in ``out`` (:func:`runs.ending.conclude` calls
    it), titled with its config ``composed`` (:func:`plotting.run_title`)."""
    from .plotting import plot_clients, plot_run, run_title

    plot_run(out, out / run_files.METRICS_FIGURE, title=run_title(composed))
    if (out / run_files.CLIENTS_SUMMARY).exists():
        plot_clients(out / run_files.CLIENTS_SUMMARY, out / run_files.CLIENTS_FIGURE)
