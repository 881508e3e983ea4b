"""The end-of-run figures drawn beside the run. The ``fedrun`` command starts a drawing process
(:func:`start`) as its run starts: that process imports matplotlib and the plotting code while
the run composes its config, loads its data and trains, on another core, then waits. When the
run ends, :func:`figures` hands it the run folder and the config and waits for the drawing
alone. A fault of the drawing comes back as the exception it was (an ``OSError`` with its errno
and file name, a :class:`UserError` with its line), so the run's status and line say it as if
drawn in the run's own process -- which is where the figures are drawn when no drawing process
answers (a caller in Python, a start that failed, a process that died)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ..common.errors import UserError

_PROCESS: list[subprocess.Popen] = []  # the drawing process of this fedrun command, if any


def start() -> None:
    """Start this process's drawing process (once; nothing if it cannot be started)."""
    if _PROCESS:
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
            )
        )
    except OSError:
        pass  # the figures are drawn in the run's process


def stop() -> None:
    """End the drawing process: no more figures to draw."""
    while _PROCESS:
        p = _PROCESS.pop()
        try:
            p.stdin.close()
            p.wait(timeout=1)
        except (OSError, subprocess.TimeoutExpired):
            p.kill()
            p.wait()


def figures(config: dict, out: Path) -> None:
    """``metrics.png`` (and ``clients.png`` with per-client metrics) of the run in ``out``,
    titled from its resolved ``config``: by the drawing process where one answers, else here.
    Raises what drawing them raised."""
    from ..engine import clients

    request = {
        "config": config,
        "run": [str(out / "metrics.csv"), str(out / "metrics.png")],
        "clients": [str(out / clients.SUMMARY), str(out / clients.FIGURE)]
        if (out / clients.SUMMARY).exists()
        else None,
    }
    reply = _ask(request) if _PROCESS else None
    if reply is None:
        draw(request)
    else:
        raise_fault(reply)


def raise_fault(reply: dict) -> None:
    """Raise the fault a drawing process replied (nothing for ``{}``)."""
    if "errno" in reply:
        raise OSError(reply["errno"], reply["strerror"], reply["filename"])
    if "user_error" in reply:
        raise UserError(reply["user_error"])
    if "error" in reply:
        raise RuntimeError(f"drawing the run's figures: {reply['error']}")


def _ask(request: dict) -> dict | None:
    """The drawing process's reply to ``request``; None where it does not answer (it is
    then ended, and no longer asked)."""
    p = _PROCESS[0]
    try:
        p.stdin.write(json.dumps(request, default=str) + "\n")
        p.stdin.flush()
        line = p.stdout.readline()
        return json.loads(line)
    except (OSError, ValueError):
        stop()
        return None


def draw(request: dict) -> None:
    """Draw the figures of a :func:`figures` request in this process (matplotlib loads here;
    torch is not needed)."""
    from ..analysis.plotting import plot_clients, plot_run, run_title

    plot_run(*map(Path, request["run"]), title=run_title(request["config"]))
    if request["clients"]:
        plot_clients(*map(Path, request["clients"]))


def serve() -> None:
    """The drawing process: import the plotting code, then draw each request read from stdin
    (one JSON line: the config and the figures' files) and reply on stdout (one JSON line:
    ``{}``, or the fault), until stdin closes."""
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    sys.stdout = sys.stderr  # nothing a library prints reaches the replies
    from ..analysis import plotting  # noqa: F401 -- the slow import, made while the run trains

    for line in sys.stdin:
        request = json.loads(line)
        try:
            draw(request)
            reply: dict = {}
        except UserError as e:  # first: some are OSErrors too (files.NotRegular)
            reply = {"user_error": str(e)}
        except OSError as e:
            reply = {"errno": e.errno, "strerror": e.strerror, "filename": e.filename}
        except Exception as e:  # noqa: BLE001 -- a bug of the drawing: said by the run
            reply = {"error": f"{type(e).__name__}: {e}"}
        replies.write(json.dumps(reply, default=str) + "\n")
        replies.flush()
