"""Every console script's first code (pyproject.toml's ``[project.scripts]``; ``python -m
fedprox_cli`` too): ``fedrun``, ``fedrun-report``, ``fedrun-plot``, ``fedrun-table``,
``fedrun-reproduce`` and ``fedrun-check-algorithm``.

Before the command's module is imported (Hydra, pandas, torch: the first seconds of a
command), each stop signal is made to raise ``KeyboardInterrupt`` (:func:`signals.stops_interrupt`)
and the output streams are made safe (:func:`streams.guard`: a closed or broken stdout/stderr
never changes the exit code). So from the first instant:

- SIGINT, SIGTERM, SIGHUP and every other stop signal end the command with one line,
  ``PROG: interrupted``, and exit code 130 (:data:`errors.EXIT`), never a traceback or a
  signal's own exit status (143 for SIGTERM) -- a command's own handling (a run's checkpoint
  and status) takes over once it runs;
- a package that is not installed is one line naming it and how to install it, exit code 2
  (:func:`dependencies.missing`), as is memory that ran out while loading a library.
"""

from __future__ import annotations

import importlib
import sys

from ..common import signals


def _command(prog: str, module: str, function: str = "main") -> None:
    """Run ``function`` of ``module`` (in this package) as the command ``prog``; exit with the
    code it returns. The handlers come first, before anything else is imported."""
    signals.stops_interrupt()
    try:
        from ..common import streams

        streams.guard()
        code = getattr(importlib.import_module(f"{__package__}.{module}"), function)()
    except KeyboardInterrupt:
        code = _fault(prog, "interrupted", "interrupted")
    except Exception as e:  # before the command's own handling: its imports
        from ..common.dependencies import missing
        from ..common.errors import exhausted, exhausted_line

        line = missing(e) or (exhausted_line(e) if exhausted(e) else None)
        if line is None:
            raise  # a bug
        code = _fault(prog, f"error: {line}", "error")
    sys.exit(code)


def _fault(prog: str, line: str, status: str) -> int:
    """Say ``PROG: line``; the exit code of ``status``."""
    from ..common import streams
    from ..common.errors import EXIT

    streams.err(f"{prog}: {line}")
    return EXIT[status]


def fedrun() -> None:
    _command("fedrun", "main")


def report() -> None:
    _command("fedrun-report", "status")


def plot() -> None:
    _command("fedrun-plot", "plot")


def table() -> None:
    _command("fedrun-table", "table")


def reproduce() -> None:
    _command("fedrun-reproduce", "reproduce")


def check_algorithm() -> None:
    _command("fedrun-check-algorithm", "check_algorithm")
