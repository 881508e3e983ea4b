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
  (:func:`dependencies.missing`), as is memory that ran out while loading a library, and a
  library that could not start its threads (OpenBLAS's SIGINT: :func:`signals.not_a_stop`);
- a command that runs (:data:`RUNS`) refuses a host whose clock does not advance or whose
  environment leaves no room to start its processes, one line, exit code 2 (:mod:`host`);
- every command fits its libraries' threads to a limit on the user's processes and threads
  (``ulimit -u``), or refuses in one line where what it must start does not fit
  (:mod:`thread_room`);
- matplotlib's own log (a cache folder it cannot write, the font list it rebuilds) is kept
  to its errors.

And its last, where the command is the process's (called by the top level of its main
program, the console script or ``python -m fedprox_cli``, before any exit hook was
registered): once the command has its exit code, the process ends as Python ends it (its
threads joined, every exit hook run: logging's, the temporary folders', torch's,
multiprocessing's) except for the interpreter's teardown of its modules, which is skipped
(:func:`_end`: 0.3-0.5 s of wall time with torch loaded, docs/performance.md "Start-up"). A caller
in Python keeps its process and its exit as they are.
"""

from __future__ import annotations

import atexit
import importlib
import os
import sys

from ..common import signals

_CODE: list[int] = []  # the command's exit code, once it has one (read by _end)


def _command(prog: str, module: str, function: str = "main") -> None:
    """Run ``function`` of ``module`` (in this package) as the command ``prog``; exit with the
    code it returns (or exits with). The handlers come first, before anything else is imported."""
    signals.stops_interrupt()
    caller = sys._getframe(2)  # the caller of fedrun(), report(), ...
    process = (
        caller.f_code.co_name == "<module>"
        and caller.f_globals.get("__name__") == "__main__"
        # a hook registered before would run after _end (a coverage tool's, say); CPython's
        # count of them (3.11-3.13), and where an interpreter lacks it, Python's own exit
        and getattr(atexit, "_ncallbacks", lambda: 1)() == 0
    )
    if process:
        atexit.register(_end)  # the first exit hook registered: the last to run
    try:
        from ..common import streams

        streams.guard()
        import logging  # after _end's hook: logging's own (its shutdown) runs before it

        # matplotlib logs a cache folder it cannot write (it draws with a temporary one) and
        # the font list it rebuilt there: a command's output is its own lines
        logging.getLogger("matplotlib").setLevel(logging.ERROR)
        refused = _host_refuses(prog)
        code = (
            _fault(prog, f"error: {refused}", "error")
            if refused
            else getattr(importlib.import_module(f"{__package__}.{module}"), function)()
        )
    except SystemExit as e:  # the command's own exit (fedrun's main)
        code = e.code
    except KeyboardInterrupt:
        code = _fault(prog, "interrupted", "interrupted")
    except Exception as e:  # before the command's own handling: its imports
        from ..common.dependencies import missing
        from ..common.errors import exhausted, exhausted_line
        from ..common.host import NoThread

        line = (
            missing(e)
            or (exhausted_line(e) if exhausted(e) else None)
            or (str(e) if isinstance(e, NoThread) else None)
        )
        if line is None:
            raise  # a bug
        code = _fault(prog, f"error: {line}", "error")
    if process and (isinstance(code, int) or code is None):
        _CODE.append(code or 0)
    sys.exit(code)


RUNS = ("fedrun", "fedrun-reproduce", "fedrun-check-algorithm")  # commands that run and time runs
TRAINS = ("fedrun", "fedrun-check-algorithm")  # commands that train in their own process


def _host_refuses(prog: str) -> str | None:
    """The line of a host ``prog`` cannot run on: a limit on the user's processes and threads
    that leaves no room for what it must start -- else the libraries' thread counts fitted to
    that room, before any of them is imported (:func:`thread_room.fit`, its note said) --; for a
    command of :data:`RUNS`, a clock that does not advance, an environment that leaves no room
    to start its processes (:mod:`host`)."""
    from ..common import host, streams, thread_room

    try:
        note = thread_room.fit(prog, sys.argv[1:])
    except thread_room.NoRoom as e:
        return str(e)
    if note and prog in TRAINS:
        streams.err(f"{prog}: note: {note}")
    if prog not in RUNS:
        return None
    return host.clock_stopped() or host.exec_room()


def _end() -> None:
    """The process's last exit hook: with the command's exit code known, flush the output
    streams and end the process now, without the interpreter's teardown of its modules (every
    other hook has run, every thread not a daemon has ended). Without a code (the command
    raised: a bug's traceback) Python ends it as usual."""
    if not _CODE:
        return
    from ..common import streams

    streams.flush()  # a closed or broken stream: never the exit code's concern
    os._exit(_CODE[-1])


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
