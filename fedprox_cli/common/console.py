"""What fedrun tells its user: one line per message on stderr (``fedrun: error: ...``; written
through :mod:`common.streams`, so that output that cannot be shown never fails a run), copied
with a time stamp to the run folder's ``fedrun.log`` once the run owns its folder, so that on a
cluster node the reason for a failure lies next to the run."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from . import run_files, streams
from .clock import now
from .files import open_file

_logs: list[Path] = []
_labels: list[str] = []  # the job saying it (a sweep's parallel jobs' lines interleave)
errors: list[str] = []  # the messages said as errors (a sweep's job record takes the last)


def say(message: str, kind: str = "", stream: TextIO | None = None) -> None:
    """Print ``fedrun: [job N: ][kind: ]message`` (stderr by default; ``job N`` inside a job of
    a sweep, :func:`as_job`) and append it to the run's log; an error said while an exception is
    handled gets its traceback first with ``FEDRUN_DEBUG=1``."""
    line = _prefixed(f"{kind}: {message}" if kind else message)
    handled = sys.exc_info()[1]
    if kind == "error" and handled is not None:  # said while handling it: FEDRUN_DEBUG's traceback
        streams.trace(handled)
    streams.line(stream, line) if stream is not None else streams.err(line)
    _append(line)
    if kind == "error":
        errors.append(message)


def log_only(message: str) -> None:
    """Append ``fedrun: [job N: ]message`` to the run's log without printing it (a terminal
    shows a bar, or the closing line says it)."""
    _append(_prefixed(message))


def _prefixed(message: str) -> str:
    return f"fedrun: {_labels[-1]}: {message}" if _labels and _labels[-1] else f"fedrun: {message}"


@contextmanager
def as_job(label: str) -> Iterator[None]:
    """Inside the block every line said carries ``label`` (``job 3``; ``""``: none), whichever
    module says it."""
    _labels.append(label)
    try:
        yield
    finally:
        _labels.pop()


def _append(line: str) -> None:
    if _logs:
        try:
            with open_file(_logs[-1], "a", encoding="utf-8") as f:  # no link followed
                f.write(f"{now()} {streams.escaped(line)}\n")
        except OSError:
            pass  # a full disk, a read-only folder, a log that is a link: the screen has the line


@contextmanager
def logging_to(run_dir: Path) -> Iterator[None]:
    """Copy :func:`say`'s lines to ``run_dir/fedrun.log`` inside the block."""
    _logs.append(Path(run_dir) / run_files.LOG)
    try:
        yield
    finally:
        _logs.pop()
