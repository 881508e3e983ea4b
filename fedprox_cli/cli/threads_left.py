"""Threads a ``fedrun`` call left running (a plugin's, a library's) at its end
(:func:`leave_threads`): waited for a moment, then named in one note; the ``fedrun`` command's
process ends without them."""

from __future__ import annotations

import threading
import time
from os import _exit  # os's documented exit without clean-up (nothing private of fedprox_cli)

from ..common.console import say
from ..common.errors import squeeze

THREADS_GRACE_S = 5.0  # how long the threads a call left running get to end by themselves


def leave_threads(before: set[threading.Thread], code: int, exit_now: bool) -> None:
    """Threads left running (a plugin's, a library's; not daemons, started during the call)
    would keep the process from ending: after :data:`THREADS_GRACE_S`, one note naming them,
    and for the ``fedrun`` command (``exit_now``) the process ends now with ``code`` rather
    than wait for them. (A caller in Python keeps its process and its threads.)"""
    left = [
        t
        for t in threading.enumerate()
        if t not in before and t.is_alive() and not t.daemon and not _pool_worker(t)
    ]
    deadline = time.monotonic() + THREADS_GRACE_S  # a library's thread finishing its work ends now
    for t in left:
        t.join(max(0.0, deadline - time.monotonic()))
    left = [t for t in left if t.is_alive()]
    if not left:
        return
    names = ", ".join(squeeze(t.name, 60) for t in left[:3]) + (", ..." if len(left) > 3 else "")
    say(
        f"{len(left)} thread{'s' if len(left) > 1 else ''} started during the command still "
        f"running ({names}); "
        + ("fedrun exits without waiting for them" if exit_now else "left running"),
        "note",
    )
    if exit_now:
        _exit(code)  # os._exit; every line fedrun wrote is flushed already (streams.line)


def _pool_worker(t: threading.Thread) -> bool:
    """A ``concurrent.futures`` pool's worker (torch.compile's compile pool, a plugin's
    executor): the pool's own exit hook ends it when the interpreter exits, so it holds
    nothing up and is no one's leftover."""
    target = getattr(t, "_target", None)
    return getattr(target, "__module__", None) == "concurrent.futures.thread"
