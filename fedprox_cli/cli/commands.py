"""The ``fedrun-report``, ``fedrun-plot`` and ``fedrun-table`` console scripts (scripts/plot.py
and scripts/tables.py call the same functions): each first makes its output streams safe
(:func:`streams.guard`), so that a closed or broken stdout/stderr never changes its exit code."""

from __future__ import annotations

import importlib
import sys

from ..common import streams


def _script(module: str) -> None:
    streams.guard()
    sys.exit(importlib.import_module(f"{__package__}.{module}").main())


def report() -> None:
    _script("status")


def plot() -> None:
    _script("plot")


def table() -> None:
    _script("table")
