"""The figures a run draws as it ends: ``metrics.png``, and ``clients.png`` where the run wrote
per-client metrics. matplotlib loads only when one is drawn (a run's start stays light)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from ..common import metric_table as mt
from ..common import run_files
from ..config.forms import Plain


def draw(resolved: Plain, out: Path) -> None:
    """The figures of a finished or diverged run in ``out`` (:func:`runs.ending.conclude` calls
    it), titled with its resolved config ``resolved`` (:func:`plotting.run_title`)."""
    from .plotting import run_title
    from .run_plots import plot_clients, plot_run

    plot_run(out, out / run_files.METRICS_FIGURE, title=run_title(resolved))
    if (out / run_files.CLIENTS_SUMMARY).exists():
        plot_clients(out, out / run_files.CLIENTS_FIGURE)


# the warm-up's made-up rows: two loss curves (h != 0), accuracy and stationarity, log axes
_WARM_UP_ROWS = [
    {
        mt.ROUND.name: t,
        mt.TRAIN_LOSS.name: 2.0 / (t + 1),
        mt.OBJECTIVE.name: 2.5 / (t + 1),
        mt.TEST_ACC.name: 0.3 * t,
        mt.STATIONARITY.name: 1.0 / (t + 1) ** 2,
    }
    for t in range(3)
]


def warm_up() -> None:
    """Draw a throwaway ``metrics.png`` of made-up rows in a temporary folder: a process's first
    figure loads matplotlib's fonts and caches (most of its first draw's time), which the
    run's own figure then finds loaded. The drawing process does it while the run trains
    (:func:`cli.drawer.serve`); the run's figure is the same file either way."""
    from .run_plots import plot_run

    with tempfile.TemporaryDirectory(prefix="fedrun-warm-up-") as tmp:
        run_files.write_metrics(tmp, _WARM_UP_ROWS)
        plot_run(Path(tmp), Path(tmp) / run_files.METRICS_FIGURE, title="warm-up")
