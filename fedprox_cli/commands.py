"""The ``fedrun-plot`` and ``fedrun-table`` console scripts (scripts/plot.py and
scripts/tables.py call the same functions)."""

from __future__ import annotations

import sys


def plot() -> None:
    from .plotcmd import main
    sys.exit(main())


def table() -> None:
    from .tablecmd import main
    sys.exit(main())
