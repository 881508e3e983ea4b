"""Stopping a run by signal: Ctrl-C (SIGINT), SIGTERM from a scheduler or ``kill``, SIGUSR2
from SLURM before a time limit or on preemption, SIGHUP from a closed terminal or SSH session,
and every other signal whose default action would end the process (:data:`SIGNALS`: SIGUSR1,
SIGQUIT, SIGALRM, SIGXCPU, the real-time signals, ...).

During training the first signal is noted and the run stops after the current round, saves a
checkpoint and ends with status ``interrupted``, naming the signal; a second signal stops at
once. Outside training they raise ``KeyboardInterrupt`` like Ctrl-C, from every command's
first instant (:mod:`cli.commands`). SIGINT, SIGTERM and SIGUSR2
(:data:`ALWAYS`) are always caught; the others only where nothing else in the process handles
them: one ignored (``nohup`` ignores SIGHUP) stays ignored, and one with a handler of its own
(a test runner's SIGALRM) keeps it. Every signal noted is appended to :data:`received`, so a
cluster job can tell afterwards why it stopped (see :mod:`cluster`).
"""

from __future__ import annotations

import _thread
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any, NoReturn

from . import host

ALWAYS = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGUSR2") if hasattr(signal, n))


def _stop_signals() -> tuple[int, ...]:
    """The catchable signals whose default action ends the process, less the faults a process
    raises on itself (SIGSEGV, SIGFPE, ...) and those Python already turns into errors (SIGPIPE,
    SIGXFSZ)."""
    names = (
        "SIGINT",
        "SIGTERM",
        "SIGUSR2",
        "SIGHUP",
        "SIGUSR1",
        "SIGQUIT",
        "SIGALRM",
        "SIGVTALRM",
        "SIGPROF",
        "SIGXCPU",
        "SIGIO",
        "SIGPWR",
        "SIGSTKFLT",
    )
    named = [getattr(signal, n) for n in names if hasattr(signal, n)]
    realtime = range(signal.SIGRTMIN, signal.SIGRTMAX + 1) if hasattr(signal, "SIGRTMIN") else ()
    return tuple(dict.fromkeys([*named, *realtime]))


SIGNALS = _stop_signals()
received: list[int] = []  # signals noted in this process, in order


def first() -> int | None:
    """The signal that stopped this process's run: the first one noted (a run begins with none:
    ``runs.runner.run``). Those noted after it -- a sweep's launcher ends its workers an instant
    after the user's Ctrl-C reached them (:mod:`cluster.pool`) -- are not what stopped it.
    None: no signal was noted."""
    return received[0] if received else None


def name(signum: int) -> str:
    """``SIGHUP``; ``SIGRTMIN+3`` for a real-time signal."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return (
            f"SIGRTMIN+{signum - signal.SIGRTMIN}"
            if hasattr(signal, "SIGRTMIN")
            else f"signal {signum}"
        )


Handler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None
"""What ``signal.signal`` installs and ``signal.getsignal`` returns."""


class Stop(KeyboardInterrupt):
    """The ``KeyboardInterrupt`` a stop signal ``signum`` raises."""

    def __init__(self, signum: int = 0) -> None:
        super().__init__()  # no args: it prints and unpickles as a plain interrupt
        self.signum = signum


_before_hook = sys.unraisablehook  # the hook in force before :func:`interrupt` set its own


def interrupt(signum: int) -> NoReturn:
    """Raise :class:`Stop` for ``signum`` from a handler, with :func:`_delivered_again` as
    ``sys.unraisablehook``: a handler runs wherever the main thread is, and inside a weakref
    callback or a ``__del__`` (an import's module lock, an object collected) Python cannot
    raise it: it would print "Exception ignored" with a traceback and the stop would be lost."""
    global _before_hook
    if sys.unraisablehook is not _delivered_again:
        _before_hook, sys.unraisablehook = sys.unraisablehook, _delivered_again
    raise Stop(signum)


def _delivered_again(unraisable: sys.UnraisableHookArgs) -> None:
    """``sys.unraisablehook``: a :class:`Stop` that Python could not raise is sent again, as
    its signal, to the main thread from a thread of its own, which runs once this hook and the
    callback are over (the handler in force then takes it, and notes it in :data:`received`
    again, so its first note goes); anything else goes to the hook in force before."""
    stop = unraisable.exc_value
    if not isinstance(stop, Stop):
        _before_hook(unraisable)
        return
    noted = bool(received) and received[-1] == stop.signum
    if noted:
        received.pop()
    # to this thread (the main one: handlers run there), as the hook's last step; _thread's
    # start does not wait for the thread as threading's does, a wait the signal would interrupt
    try:
        _thread.start_new_thread(signal.pthread_kill, (threading.get_ident(), stop.signum))
    except RuntimeError:  # no thread can start (ulimit -u): noted and reported, as before
        if noted:
            received.append(stop.signum)
        _before_hook(unraisable)


def note_and_interrupt(signum: int, frame: FrameType | None) -> None:
    """A handler: note the signal in :data:`received` and raise ``KeyboardInterrupt``
    (:func:`interrupt`) -- or, for a SIGINT the process raised on itself as a library failed
    to start its threads, :class:`host.NoThread` with its line (:func:`not_a_stop`)."""
    not_a_stop(signum)
    received.append(signum)
    interrupt(signum)


def not_a_stop(signum: int) -> None:
    """Raise :class:`host.NoThread` for a SIGINT while this process cannot start a thread:
    OpenBLAS raises SIGINT on its own process when it cannot start its threads (a limit on
    processes, ``ulimit -u``), which is no Ctrl-C and no reason to resume."""
    if signum == signal.SIGINT:
        line = host.no_thread_line()
        if line is not None:
            raise host.NoThread(line)


def _free(handler: Handler) -> bool:
    """Whether a signal with ``handler`` is fedrun's to catch: its default action, Python's
    Ctrl-C handler, or fedrun's own."""
    return handler in (
        signal.SIG_DFL,
        signal.default_int_handler,
        note_and_interrupt,
    ) or isinstance(getattr(handler, "__self__", None), StopAfterRound)


def _install(
    handler: Callable[[int, FrameType | None], Any], signals: tuple[int, ...] | None = None
) -> dict[int, Handler]:
    """Install ``handler`` for each of ``signals`` (default :data:`SIGNALS`) that is one of
    :data:`ALWAYS` or :func:`_free`; the handlers replaced, to restore."""
    old: dict[int, Handler] = {}
    for s in SIGNALS if signals is None else signals:
        if s in ALWAYS or _free(signal.getsignal(s)):
            old[s] = signal.signal(s, handler)
    return old


@contextmanager
def held_by_fedrun() -> Iterator[None]:
    """fedrun's handlers live inside the block only: the handlers of :data:`SIGNALS` in force
    when it begins are put back when it ends (main thread only), so that a signal after
    ``main()`` returned -- while the interpreter waits for a plugin's thread, say -- meets the
    process's own handler, not fedrun's."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {s: signal.getsignal(s) for s in SIGNALS}
    try:
        yield
    finally:
        for s, handler in before.items():
            if handler is not None:  # None: set outside Python; left as it is
                signal.signal(s, handler)


def stops_interrupt() -> None:
    """Make every stop signal (:data:`SIGNALS`) raise ``KeyboardInterrupt`` like Ctrl-C and be
    noted in :data:`received` (main thread only). SIGINT too: Python catches it only where the
    process did not start with it ignored (a background job of a non-interactive shell ignores
    SIGINT and SIGQUIT), and :data:`ALWAYS` is caught everywhere, not only during training."""
    if threading.current_thread() is threading.main_thread():
        _install(note_and_interrupt)


class StopAfterRound:
    """Context manager: ``requested`` turns true at the first of :data:`SIGNALS`; a second one
    raises ``KeyboardInterrupt``. Handlers are installed only in the main thread and restored
    on exit."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._old: dict[int, Handler] = {}

    @property
    def requested(self) -> bool:
        return self.signum is not None

    def _note(self, signum: int, frame: FrameType | None) -> None:
        not_a_stop(signum)
        received.append(signum)
        if self.requested:
            interrupt(signum)
        self.signum = signum

    def __enter__(self) -> StopAfterRound:
        if threading.current_thread() is threading.main_thread():
            self._old = _install(self._note)
        return self

    def __exit__(self, *exc: object) -> None:
        for s, handler in self._old.items():
            signal.signal(s, handler)


@contextmanager
def _only(handler: Callable[[int, FrameType | None], Any]) -> Iterator[None]:
    """Inside the block ``handler`` handles :data:`SIGNALS` (:func:`_install`); the handlers in
    force before come back as it ends (main thread only; elsewhere signals do not arrive in
    Python)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = _install(handler)
    try:
        yield
    finally:
        for s, before in old.items():
            signal.signal(s, signal.SIG_DFL if before is None else before)


@contextmanager
def deferred() -> Iterator[None]:
    """Hold :data:`SIGNALS` inside the block (a file being written) and deliver them, to the
    handlers in force before it, as it ends (main thread only; elsewhere signals do not
    arrive in Python)."""
    held: list[int] = []
    try:
        with _only(lambda signum, frame: held.append(signum)):
            yield
    finally:
        for s in held:
            signal.raise_signal(s)


@contextmanager
def stopping() -> Iterator[None]:
    """A stop under way: inside the block (a stopped run recording its end) every stop signal
    is noted in :data:`received` and nothing more -- the stop it asks for is being made, and a
    ``KeyboardInterrupt`` raised in the middle would leave the run's folder without its end (a
    sweep's worker gets the user's Ctrl-C and, an instant later, the launching process's own
    signal: :mod:`cluster.pool`). The handlers in force before come back as it ends."""
    with _only(lambda signum, frame: received.append(signum)):
        yield


HELD = (signal.SIGINT,)  # what a terminal's Ctrl-C sends to its whole process group


@contextmanager
def held_from_children() -> Iterator[None]:
    """:data:`HELD` blocked in this thread inside the block: a process started in it (a pool's
    worker) starts with it blocked -- blocked signals stay blocked across ``exec`` -- so a
    Ctrl-C to the terminal's process group waits in that process until fedrun's handlers are
    in place (:func:`take_held`) instead of raising in whatever it is importing. SIGTERM keeps
    its default action there: it ends such a process at once, quietly."""
    before = signal.pthread_sigmask(signal.SIG_BLOCK, HELD)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


_started_held = False  # this process started with HELD blocked (a pool's worker)


def take_held() -> None:
    """Unblock :data:`HELD` in a process started with them blocked (:func:`held_from_children`),
    once its handlers are installed (:func:`stops_interrupt`): a signal that came meanwhile is
    delivered now (``KeyboardInterrupt`` from here). :func:`hold` blocks them again when the
    job is over, so that an idle worker waits for its next job, or its end, quietly."""
    global _started_held
    if set(HELD) & signal.pthread_sigmask(signal.SIG_BLOCK, []):
        _started_held = True
        signal.pthread_sigmask(signal.SIG_UNBLOCK, HELD)


def hold() -> None:
    """In a process that started with :data:`HELD` blocked (a pool's worker, between jobs):
    block it again and give SIGTERM its default action back (it ends the idle worker, quietly:
    how :mod:`cluster.pool` ends it); elsewhere nothing."""
    if _started_held:
        signal.pthread_sigmask(signal.SIG_BLOCK, HELD)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
