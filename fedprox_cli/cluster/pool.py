"""joblib's process pool (``hydra/launcher=joblib``: loky's worker processes) stopped when the
sweep is told to stop, at any instant, within seconds, with no traceback and every job's folder
truthful (docs/robustness.md, "Stopping a sweep").

- **Workers start deaf to Ctrl-C.** Each worker is a fresh interpreter started in the
  terminal's process group, so a Ctrl-C reaches it too; while it imports (seconds, before its
  first job) a ``KeyboardInterrupt`` there is a traceback and nothing else. Workers are started
  with SIGINT blocked (:func:`signals.held_from_children`); a job unblocks it once fedrun's
  handlers are in place (:func:`signals.take_held`: a Ctrl-C that came meanwhile stops the job
  before it begins) and blocks it again as it returns, giving SIGTERM its default action back
  (:func:`signals.hold`): a worker starting or between jobs ignores Ctrl-C, and SIGTERM ends
  it at once, quietly.
- **Workers are ended by fedrun, not killed.** When the sweep stops (joblib aborts, or the
  sweep ends), a worker between jobs gets SIGTERM and ends at once; one in a job gets the
  signal the user sent (a Ctrl-C's SIGINT, a ``kill``'s SIGTERM: what its job records), stops
  it as any run stops (after its round, or at once for a second signal: status
  ``interrupted``, rows and checkpoint kept; a signal while it records that end is only
  noted: :func:`signals.stopping`) and is ended by SIGTERM as soon as it is idle. Only a
  worker still alive after :data:`GRACE_S` is killed (SIGKILL, with its own subprocesses
  where loky can find them). Nothing here needs psutil, which loky asks for to kill process trees.
"""

from __future__ import annotations

import math
import os
import signal
import sys
import time
from typing import Any

from ..common import signals

# The semaphore tracker (multiprocessing's, started with the pool and inheriting this process's
# environment) frees what ended workers held, and warns of it as a leak: not the user's concern.
QUIET_TRACKER = "ignore::UserWarning:multiprocessing.resource_tracker"
GRACE_S = 8.0  # how long a worker in a job gets to record its end before it is killed
POLL_S = 0.05
RESEND_S = 0.5  # a worker seen idle gets SIGTERM again at most this often


def _idle(pid: int) -> bool | None:
    """Whether worker ``pid`` is between jobs (its SIGINT blocked: :func:`signals.hold`), from
    ``/proc/PID/status``; None where that cannot be read (not Linux, gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            blocked = next(line for line in f if line.startswith("SigBlk:"))
    except (OSError, StopIteration):
        return None
    return bool(int(blocked.split()[1], 16) >> (signal.SIGINT - 1) & 1)


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


def end_workers(processes: list[Any], kill_tree: Any = None, grace_s: float = GRACE_S) -> None:
    """End pool workers (``multiprocessing.Process`` objects) together: to each in a job the
    signal that stopped the sweep (the user's: SIGINT for a Ctrl-C, SIGTERM for a ``kill``;
    SIGTERM where none came), so that its job records the user's signal, not fedrun's; SIGTERM
    to each idle one, and again, at most every :data:`RESEND_S`, to each seen idle within
    ``grace_s`` (its job recorded its end; or a job just handed to it, whose start, SIGINT still
    blocked, took a SIGTERM for its stop and then went idle: once is not enough); then
    ``kill_tree(process)`` (loky's) or SIGKILL for any still alive. Joins them."""
    told = signals.received[-1] if signals.received else signal.SIGTERM
    termed: dict[int, float] = {}  # pid -> when it was last sent SIGTERM as idle
    for p in processes:
        idle = _idle(p.pid) is not False
        _signal(p.pid, signal.SIGTERM if idle else told)
        if idle:
            termed[p.pid] = time.monotonic()
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        alive = [p for p in processes if p.is_alive()]
        if not alive:
            break
        for p in alive:
            due = time.monotonic() - termed.get(p.pid, -math.inf) >= RESEND_S
            if due and _idle(p.pid):  # its job is over: SIGTERM ends it
                _signal(p.pid, signal.SIGTERM)
                termed[p.pid] = time.monotonic()
        alive[0].join(POLL_S)
    for p in processes:
        if p.is_alive():
            try:
                if kill_tree is None:
                    raise LookupError
                kill_tree(p)
            except Exception:  # noqa: BLE001 -- loky without psutil may fail: the worker itself
                _signal(p.pid, signal.SIGKILL)
        p.join()


def _workers() -> list[Any]:
    """The live worker processes of loky's pools started by this process."""
    import multiprocessing

    from joblib.externals.loky.backend.process import LokyProcess

    return [p for p in multiprocessing.active_children() if isinstance(p, LokyProcess)]


def take_over_pool_workers() -> None:
    """Make loky start its workers with SIGINT blocked and end them by
    :func:`end_workers` (module docstring): wraps loky's process start and its kill of a
    worker's process tree. Done once a process."""
    from joblib.externals.loky import process_executor
    from joblib.externals.loky.backend import fork_exec as spawning

    said = os.environ.get("PYTHONWARNINGS", "")
    if QUIET_TRACKER not in said:
        os.environ["PYTHONWARNINGS"] = ",".join(filter(None, (said, QUIET_TRACKER)))
    plain = spawning.fork_exec
    if getattr(plain, "fedrun", False):
        return
    kill_tree = process_executor.kill_process_tree

    def fork_exec(*args: Any, **kwargs: Any) -> Any:
        with signals.held_from_children():
            return plain(*args, **kwargs)

    def end(process: Any, *args: Any, **kwargs: Any) -> None:
        """loky ends its workers one by one: the first call ends them all, at once."""
        together = [process, *(p for p in _workers() if p is not process)]
        end_workers(together, lambda p: kill_tree(p, *args, **kwargs))

    fork_exec.fedrun = True  # type: ignore[attr-defined]
    spawning.fork_exec = fork_exec
    process_executor.kill_process_tree = end


def release_pool_workers() -> None:
    """End the worker processes of joblib's process pool (``hydra/launcher=joblib``, loky's
    reusable executor) with the sweep that used them: loky keeps idle workers for 300 s, and
    its manager thread would keep ``fedrun`` waiting or be noted as left running. The workers
    of a pool joblib aborted (a stopped sweep), which loky's manager thread ends on its own,
    are waited for too (:func:`end_workers`), so that the sweep's report reads every job's
    recorded end. Nothing happens where joblib was not used (the module is not loaded)."""
    if "joblib.externals.loky.reusable_executor" not in sys.modules:
        return
    from joblib.externals.loky import get_reusable_executor

    get_reusable_executor().shutdown(wait=True, kill_workers=True)
    end_workers(_workers())  # those of an aborted pool, which loky's thread may still be ending
