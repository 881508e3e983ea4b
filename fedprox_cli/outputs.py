"""A run folder's files, each written atomically (temp file + rename): a reader never sees a
half-written file, and concurrent jobs never share one.

- ``metrics.csv``: one row per evaluated round (columns in :data:`metrics.COLUMNS`)
- ``config.yaml``: the resolved config
- ``partition.npz``: per-client index arrays into the training set
- ``summary.json``: status (running / finished / diverged / interrupted / error), final
  metrics, versions, device
- ``metrics.png``: train loss and test accuracy against round
"""

from __future__ import annotations

import csv
import io
import json
import platform
import sys
from importlib.metadata import version
from pathlib import Path

from . import __version__
from .atomic import atomic_write_text


def write_metrics(path: Path, rows: list[dict]) -> None:
    """Rows (dicts with the same keys) as CSV, floats written exactly (``repr``)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    atomic_write_text(path, buf.getvalue())


def write_summary(path: Path, status: str, **fields) -> None:
    summary = {"status": status, **fields,
               "versions": {"fedprox_cli": __version__, "torch": version("torch"),
                            "python": platform.python_version()},
               "command": " ".join(sys.argv)}
    atomic_write_text(path, json.dumps(summary, indent=2, default=str) + "\n")


def note_in_summary(path: Path, **fields) -> None:
    """Add ``fields`` to an existing summary, keeping the rest."""
    atomic_write_text(path, json.dumps({**json.loads(path.read_text()), **fields}, indent=2,
                                       default=str) + "\n")


def read_summary(run_dir: Path) -> dict:
    return json.loads((Path(run_dir) / "summary.json").read_text())
