"""A command-line entry point run inside the test process, as a subprocess would run it: its
own argv, environment and working folder, its stdout and stderr captured at the file
descriptors (so output of child processes it starts, a joblib launcher's workers say, is
captured too), the exit code from ``SystemExit``; afterwards the process is put back as it was
(argv, cwd, environment, ``sys.path``, logging, signal handlers, warnings filters, torch's
threads, default dtype, matmul precision and random state, Hydra's global state).

A process-wide fact a test checks (a signal's effect, locks between processes, the installed
entry point, a package missing from the environment) needs a real subprocess instead.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import signal
import subprocess
import sys
import tempfile
import traceback
import warnings
from pathlib import Path
from typing import Callable


def run(
    main: Callable[[list[str]], None], argv0: str, args: list[str], cwd: Path, env: dict[str, str]
) -> subprocess.CompletedProcess:
    """``main(args)`` with ``sys.argv[0] = argv0`` in ``cwd`` under exactly ``env``; a
    CompletedProcess with its exit code and output, as text."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, _restored():
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        sys.argv = [argv0, *args]
        with _redirected(out, err):
            code = _exit_code(main, args)
        text = [(f.seek(0), f.read().decode("utf-8", "replace"))[1] for f in (out, err)]
    return subprocess.CompletedProcess([argv0, *args], code, *text)


def _exit_code(main, args) -> int:
    """The exit code a process running ``main`` would have: SystemExit's code (None: 0, a
    message: printed, 1); an exception escaping ``main``: its traceback, 1."""
    try:
        main(args)
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            return e.code or 0
        print(e.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 -- what the interpreter would print and exit 1 for
        traceback.print_exc()
    return 1


@contextlib.contextmanager
def _redirected(out, err):
    """Descriptors 1 and 2 and ``sys.stdout``/``sys.stderr`` into the files ``out``, ``err``."""
    streams = sys.stdout, sys.stderr
    for s in streams:
        s.flush()
    saved = os.dup(1), os.dup(2)
    try:
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        sys.stdout, sys.stderr = (
            io.TextIOWrapper(
                open(fd, "wb", buffering=0, closefd=False),
                encoding="utf-8",
                errors="backslashreplace",
                write_through=True,
            )
            for fd in (1, 2)
        )
        try:
            yield
        finally:
            for s in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    s.flush()
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])
        sys.stdout, sys.stderr = streams


@contextlib.contextmanager
def _restored():
    """Put back what a command may change in the process that ran it."""
    import torch
    from hydra.core.global_hydra import GlobalHydra

    argv, cwd, env, path = sys.argv[:], os.getcwd(), dict(os.environ), sys.path[:]
    handlers = {
        s: signal.getsignal(s)
        for s in signal.valid_signals()
        if s not in (signal.SIGKILL, signal.SIGSTOP) and signal.getsignal(s) is not None
    }
    loggers = [logging.getLogger()] + [
        v for v in logging.Logger.manager.loggerDict.values() if isinstance(v, logging.Logger)
    ]
    logging_state = [(lg, lg.handlers[:], lg.level, lg.disabled, lg.propagate) for lg in loggers]
    known = set(map(id, loggers))
    filters = warnings.filters[:]
    torch_state = (
        torch.get_num_threads(),
        torch.get_default_dtype(),
        torch.get_float32_matmul_precision(),
        torch.get_rng_state(),
    )
    try:
        yield
    finally:
        GlobalHydra.instance().clear()
        for lg in [
            v
            for v in logging.Logger.manager.loggerDict.values()
            if isinstance(v, logging.Logger) and id(v) not in known
        ]:
            logging_state.append((lg, [], logging.NOTSET, False, True))  # made by the command
        for lg, hs, level, disabled, propagate in logging_state:
            for h in lg.handlers[:]:
                if h not in hs:
                    lg.removeHandler(h)
                    with contextlib.suppress(Exception):
                        h.close()
            lg.handlers[:] = hs
            lg.setLevel(level)
            lg.disabled, lg.propagate = disabled, propagate
        for s, h in handlers.items():
            with contextlib.suppress(OSError, ValueError):
                signal.signal(s, h)
        warnings.filters[:] = filters
        threads, dtype, precision, rng = torch_state
        torch.set_num_threads(threads)
        torch.set_default_dtype(dtype)
        torch.set_float32_matmul_precision(precision)
        torch.set_rng_state(rng)
        os.environ.clear()
        os.environ.update(env)
        os.chdir(cwd)
        sys.argv = argv
        sys.path[:] = path
