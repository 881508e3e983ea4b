"""The ``fedrun-plot`` and ``fedrun-table`` console scripts (scripts/plot.py and
scripts/tables.py call the same functions)."""

from __future__ import annotations

import sys


def plot() -> None:
    from .plot import main
    sys.exit(main())


def table() -> None:
    from .table import main
    sys.exit(main())
