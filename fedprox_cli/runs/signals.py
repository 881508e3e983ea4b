"""Stopping a run by signal (Ctrl-C = SIGINT, SIGTERM from a scheduler or ``kill``, SIGUSR2
from SLURM before a time limit or on preemption).

During training the first signal is noted and the run stops after the current round, saves a
checkpoint and ends with status ``interrupted``; a second signal stops at once. Outside
training, SIGTERM behaves like Ctrl-C (a ``KeyboardInterrupt``). Every signal noted is appended
to :data:`received`, so a cluster job can tell afterwards why it stopped (see :mod:`cluster`).
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager

SIGNALS = (signal.SIGINT, signal.SIGTERM) + ((signal.SIGUSR2,) if hasattr(signal, "SIGUSR2") else ())
received: list[int] = []  # signals noted in this process, in order


def note_and_interrupt(signum, frame):
    """A handler: note the signal in :data:`received` and raise ``KeyboardInterrupt``."""
    received.append(signum)
    raise KeyboardInterrupt


def sigterm_interrupts() -> None:
    """Make SIGTERM raise ``KeyboardInterrupt`` like Ctrl-C (main thread only)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, note_and_interrupt)


class StopAfterRound:
    """Context manager: ``requested`` turns true at the first of :data:`SIGNALS`; a second one
    raises ``KeyboardInterrupt``. Handlers are installed only in the main thread and restored
    on exit."""

    def __init__(self):
        self.signum: int | None = None
        self._old: dict = {}

    @property
    def requested(self) -> bool:
        return self.signum is not None

    def _note(self, signum, frame):
        received.append(signum)
        if self.requested:
            raise KeyboardInterrupt
        self.signum = signum

    def __enter__(self) -> "StopAfterRound":
        if threading.current_thread() is threading.main_thread():
            self._old = {s: signal.signal(s, self._note) for s in SIGNALS}
        return self

    def __exit__(self, *exc) -> None:
        for s, handler in self._old.items():
            signal.signal(s, handler)


@contextmanager
def deferred():
    """Hold :data:`SIGNALS` inside the block (a file being written) and deliver them, to the
    handlers in force before it, as it ends (main thread only; elsewhere signals do not
    arrive in Python)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    old = {s: signal.signal(s, lambda signum, frame: held.append(signum)) for s in SIGNALS}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, signal.SIG_DFL if handler is None else handler)
        for s in held:
            signal.raise_signal(s)
