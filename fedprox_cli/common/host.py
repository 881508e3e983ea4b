"""What the host must give a command before it starts, each fault named as what it is, one line,
exit code 2 (the environment's fault; docs/robustness.md, "Start-up conditions"):

- **A clock that advances** (:func:`clock_stopped`): fedrun times its rounds, progress lines and
  heartbeats by it, and Hydra's sweeper divides by the time it took to check a sweep's jobs --
  under a frozen clock (``faketime -f`` with a fixed time) that is a division by zero.
- **Room to start a program** (:func:`exec_room`): a program is started with its command line
  and the environment, together at most ``ARG_MAX`` bytes; an environment that leaves no room
  for the command lines of fedrun's own processes (a sweep's workers, the drawing process,
  ``fedrun-reproduce``'s runs) makes them fail to start (joblib: "a segmentation fault or
  excessive memory").
- **Threads** (:func:`no_thread_line`): under a limit on a user's processes and threads
  (``ulimit -u``, RLIMIT_NPROC) a numeric library that cannot start its threads stops the process
  -- OpenBLAS by raising SIGINT on it, which would read as a Ctrl-C: the stop signals' handler
  asks whether a thread can be started before it takes a SIGINT for the user's
  (:func:`signals.note_and_interrupt`).
"""

from __future__ import annotations

import _thread
import os
import resource
import time
from collections.abc import Callable

from .errors import UserError
from .thread_room import tasks_of

READS = 100_000  # reads of a clock that never change it: it does not advance
EXEC_ROOM = 32 * 1024  # bytes a program fedrun starts may need beyond the environment


class NoThread(UserError):
    """A library could not start its threads (:func:`no_thread_line`)."""


def clock_stopped(
    clocks: tuple[tuple[str, Callable[[], float]], ...] = (
        ("time.time", time.time),
        ("time.monotonic", time.monotonic),
        ("time.perf_counter", time.perf_counter),
    ),
) -> str | None:
    """The line for a clock of ``clocks`` that reads the same :data:`READS` times running, or
    None (a running clock changes within a few reads)."""
    for name, read in clocks:
        first = read()
        if all(read() == first for _ in range(READS)):
            return (
                f"the system clock does not advance ({name} read {first!r} {READS:,} times "
                f"running): fedrun times its rounds, progress and heartbeats by it, and Hydra "
                f"its sweeps; run it where the clock runs (not under a frozen clock such as "
                f"faketime -f with a fixed time)"
            )
    return None


def _exec_size(env: dict[str, str]) -> int:
    """The bytes ``env`` takes of a program's start, as the kernel counts them: each string
    with its NUL and its pointer."""
    return sum(len(os.fsencode(k)) + len(os.fsencode(v)) + 2 + 8 for k, v in env.items())


def exec_room(env: dict[str, str] | None = None, room: int = EXEC_ROOM) -> str | None:
    """The line for an environment (default ``os.environ``) that leaves less than ``room``
    bytes below ``ARG_MAX`` for a program's command line, or None."""
    env = dict(os.environ if env is None else env)
    try:
        limit = os.sysconf("SC_ARG_MAX")
    except (ValueError, OSError):
        return None
    used = _exec_size(env)
    if used + room <= limit:
        return None
    large = sorted(env, key=lambda k: -len(env[k]))[:3]
    named = ", ".join(f"{k}: {len(os.fsencode(env[k])):,} bytes" for k in large)
    return (
        f"the environment takes {used:,} of the {limit:,} bytes a program is started with "
        f"(ARG_MAX, a quarter of the stack limit), which leaves less than the {room:,} that "
        f"fedrun's own processes (a sweep's workers, the drawing process, the runs of "
        f"fedrun-reproduce) need for their command lines; unset large variables ({named}) or "
        f"raise the stack limit (ulimit -s)"
    )


def _can_start_thread() -> bool:
    """Whether a thread starts: one that ends at once, started with :mod:`_thread` -- from a
    signal handler, which may run while this thread holds :mod:`threading`'s own locks."""
    ended = _thread.allocate_lock()
    ended.acquire()
    try:
        _thread.start_new_thread(ended.release, ())
    except RuntimeError:  # "can't start new thread"
        return False
    ended.acquire(timeout=5)
    return True


def no_thread_line() -> str | None:
    """The line for a process that cannot start a thread (a library that could not start its
    threads stops it: OpenBLAS raises SIGINT), naming the limit on this user's processes and
    threads when they have reached it; None where a thread starts."""
    if _can_start_thread():
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_NPROC)
    running = tasks_of(os.getuid())
    limit = (
        f"the limit on this user's processes and threads is reached (ulimit -u: {soft:,}; "
        f"{running:,} running)"
        if soft != resource.RLIM_INFINITY and running >= soft
        else "the limits on processes, memory or the stack (ulimit -u, -v, -s: a thread's "
        "stack is as large as the stack limit) leave no room for one"
    )
    return (
        f"this process cannot start a thread: {limit}; a library that could not start its "
        f"threads stopped it (OpenBLAS does so with SIGINT, not a Ctrl-C): raise the limit, or "
        f"start fewer threads (OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1)"
    )
