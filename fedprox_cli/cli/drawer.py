"""The end-of-run figures drawn beside the run. The ``fedrun`` command starts a drawing process
(:func:`start`) as its run starts, before torch loads: that process imports matplotlib and the
plotting code while the run imports torch, composes its config, loads its data and trains, on
another core, draws a throwaway figure (:func:`run_figures.warm_up`: the first figure's
one-time costs), then waits. When the run ends, :func:`figures` hands it the run folder and the
config and waits for the drawing alone. A fault of the drawing comes back as the exception it
was (an ``OSError`` with its errno and file name, a :class:`UserError` with its line), so the
run's status and line say it as if drawn in the run's own process -- which is where the
figures are drawn when no drawing process answers (a caller in Python, a start that failed, a
process that died)."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from pathlib import Path
from typing import TypedDict

from ..analysis import run_figures
from ..common import streams, thread_room
from ..common.errors import UserError
from ..config.forms import Plain

_PROCESS: list[subprocess.Popen[str]] = []  # the drawing process of this fedrun command, if any


def start() -> None:
    """Start this process's drawing process (once; nothing if it cannot be started, or where
    a limit on the user's processes and threads leaves no room for it:
    :func:`thread_room.drawing_process`). Its libraries run one thread each (it draws; it takes
    one process of the user's limit, as :func:`thread_room.fit` counts it)."""
    if _PROCESS or not thread_room.drawing_process():
        return
    try:
        _PROCESS.append(
            subprocess.Popen(
                [sys.executable, "-c", "from fedprox_cli.cli.drawer import serve; serve()"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # a Ctrl-C is the run's to handle, not the drawer's
                text=True,
                env={**os.environ, **thread_room.ONE_THREAD},
            )
        )
    except OSError:
        pass  # the figures are drawn in the run's process


def stop() -> None:
    """End the drawing process and wait for it: its pipes closed and the process killed (idle,
    it has nothing to write; asked for a figure before a stop signal cut the wait short, it
    must not write it later), so nothing it draws is written after this returns -- while the
    run still holds its folder's lock."""
    while _PROCESS:
        p = _PROCESS.pop()
        for pipe in (p.stdin, p.stdout):
            try:
                if pipe is not None:
                    pipe.close()
            except OSError:
                pass  # it has ended already
        try:
            p.kill()
        except OSError:
            pass
        p.wait()


def figures(resolved: Plain, out: Path) -> None:
    """The figures of the run in ``out`` (:func:`analysis.run_figures.draw`), titled from its
    resolved config: by the drawing process where one answers, else here. Raises what drawing
    them raised."""
    reply = _ask({"config": resolved, "out": str(out)}) if _PROCESS else None
    if reply is None:
        run_figures.draw(resolved, out)
    else:
        raise_fault(reply)


class Reply(TypedDict, total=False):
    """The drawing process's reply to a request: ``{}``, or the fault that drawing raised."""

    errno: int | None
    strerror: str | None
    filename: str | None
    user_error: str
    error: str


def raise_fault(reply: Reply) -> None:
    """Raise the fault a drawing process replied (nothing for ``{}``)."""
    if "errno" in reply:
        raise OSError(reply["errno"], reply["strerror"], reply["filename"])
    if "user_error" in reply:
        raise UserError(reply["user_error"])
    if "error" in reply:
        raise RuntimeError(f"drawing the run's figures: {reply['error']}")


def _ask(request: dict[str, object]) -> Reply | None:
    """The drawing process's reply to ``request``; None where it does not answer (it is
    then ended, and no longer asked)."""
    p = _PROCESS[0]
    assert p.stdin is not None and p.stdout is not None  # started with pipes
    try:
        p.stdin.write(json.dumps(request, default=str) + "\n")
        p.stdin.flush()
        line = p.stdout.readline()
        reply: Reply = json.loads(line)
        return reply
    except (OSError, ValueError):
        stop()
        return None
    except BaseException:  # a stop signal while it draws: its reply would answer the next request
        stop()
        raise


def serve() -> None:
    """The drawing process: import the plotting code, then draw each request read from stdin
    (one JSON line: the config and the run folder) and reply on stdout (one JSON line:
    ``{}``, or the fault), until stdin closes."""
    replies = streams.set_aside_stdout()
    from ..analysis import plotting  # noqa: F401 -- the slow import, made while the run trains

    if not _asked():  # a run that ended already waits for its figure, not for the warm-up
        try:
            run_figures.warm_up()
        except Exception:  # noqa: BLE001 -- only a warm-up: the run's figures are drawn all the same
            pass
    for line in sys.stdin:
        request = json.loads(line)
        try:
            run_figures.draw(request["config"], Path(request["out"]))
            reply: Reply = {}
        except UserError as e:  # first: some are OSErrors too (files.NotRegular)
            reply = {"user_error": str(e)}
        except OSError as e:
            reply = {"errno": e.errno, "strerror": e.strerror, "filename": e.filename}
        except Exception as e:  # noqa: BLE001 -- a bug of the drawing: said by the run
            reply = {"error": f"{type(e).__name__}: {e}"}
        replies.write(json.dumps(reply, default=str) + "\n")
        replies.flush()


def _asked() -> bool:
    """Whether a request (or the end of the input) is waiting on stdin."""
    try:
        return bool(select.select([sys.stdin], [], [], 0)[0])
    except (OSError, ValueError):
        return True
