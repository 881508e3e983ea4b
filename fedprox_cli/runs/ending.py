"""Ending a run: how it ended (finished, diverged, interrupted, refused, a bug) turned into its
folder's status, one line and an exit code (:data:`errors.EXIT`), then its closing summary line
(:func:`recap.closing_line`). The figures of a finished or diverged run are drawn by the
caller's ``plot`` (the layer above: a run does not import :mod:`analysis`)."""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

from omegaconf import DictConfig

from ..common import signals
from ..common.console import say
from ..common.errors import EXIT, UserError, describe, squeeze
from ..common.files import atomic_write_text, remove
from ..engine import memory
from . import checkpoint, keep, recap
from .experiment import Experiment
from .outputs import Summary
from .training import Diverged, Interrupted

Plot = Callable[[DictConfig, Path], None]  # draws a run's figures from its composed config and folder


def end(summary: Summary, status: str, code: int | None = None, **fields) -> None:
    """Record the run's end (exit ``code``, by default the status's); a folder that can no
    longer be written keeps what it had (the lock, released as the process ends, then tells
    readers the run is not alive)."""
    try:
        summary.end(status, exit_code=EXIT[status] if code is None else code, **fields)
    except OSError:
        pass


def internal_error(out: Path, e: BaseException, summary: Summary | None) -> int:
    """A bug: one line on stderr, the traceback in ``out/error.log``, status error, exit 3
    (``FEDRUN_DEBUG=1`` re-raises). An allocation that failed is no bug: status error, exit 2."""
    if memory.exhausted(e):
        message = f"out of memory: {squeeze(str(e), 200)}; reduce n, B, oracle.memory_gb or the model"
        if summary is not None:
            end(summary, "error", error=message)
        say(message, "error")
        return EXIT["error"]
    where = out / "error.log"
    try:
        atomic_write_text(where, traceback.format_exc())
    except OSError:
        where = None
    message = f"internal error: {type(e).__name__}: {squeeze(str(e))}"
    if summary is not None:
        end(summary, "error", EXIT["internal"], error=message)
    say(message + (f"; traceback in {where}" if where else ""))
    if os.environ.get("FEDRUN_DEBUG"):
        raise e
    return EXIT["internal"]


def conclude(exp: Experiment, composed: DictConfig, out: Path, summary: Summary, error: BaseException | None,
             rows: list[dict] | None = None, plot: Plot | None = None) -> int:
    """Record how the run in ``out`` ended -- ``error`` None: finished with these metrics
    ``rows`` (and ``plot`` draws its figures); otherwise what stopped it -- say so in one line
    and return the exit code. An attempt on a finished run that did not finish puts the
    finished run's files back (:mod:`keep`)."""
    code = _conclude(exp, composed, out, summary, error, rows, plot or _no_plot)
    if keep.settle(out, code == EXIT["finished"]):
        say(f"the finished run in {out} is kept as it was (metrics, plot, summary, config)", "note")
    return code


def _no_plot(composed: DictConfig, out: Path) -> None:
    """A run without figures (no ``plot`` given)."""


def _conclude(exp: Experiment, composed: DictConfig, out: Path, summary: Summary, error: BaseException | None,
              rows: list[dict] | None, plot: Plot) -> int:
    try:
        if error is not None:
            raise error
        plot(composed, out)
    except (UserError, OSError) as e:
        end(summary, "error", error=describe(e))
        say(describe(e), "error")
        say_closing(out, "error")
        return EXIT["error"]
    except Diverged as e:
        kept = (out / "metrics.csv").exists()  # not when round 0's evaluation overflowed
        try:
            if kept:
                plot(composed, out)
        except Exception as p:  # the record of the divergence matters more than its figure
            say(f"no metrics.png for the diverged run ({type(p).__name__}: {squeeze(str(p))})", "note")
        end(summary, "diverged", error=str(e), round=e.round)
        say(f"{e}" + (f" (rows so far kept in {out / 'metrics.csv'})" if kept else ""), "diverged")
        say_closing(out, "diverged")
        return EXIT["diverged"]
    except (Interrupted, KeyboardInterrupt) as e:
        after = {"round": e.round} if isinstance(e, Interrupted) else {}
        signum = e.signum if isinstance(e, Interrupted) else (signals.received or [None])[-1]
        by = signals.name(signum) if signum else None
        end(summary, "interrupted", **after, **({"error": f"stopped by {by}"} if by else {}))
        say(f"interrupted{f' after round {e.round}' if after else ''}; "
            + ("re-run the same command to resume" if (out / checkpoint.FILE).exists()
               else f"partial results in {out}") + (f" (stopped by {by})" if by else ""))
        say_closing(out, "interrupted")
        return EXIT["interrupted"]
    except Exception as e:  # a bug
        return internal_error(out, e, summary)
    end(summary, "finished", final=rows[-1], round=exp.cfg.T)
    if not exp.cfg.keep_checkpoint:  # n x d numbers per state tensor: ~1 GB for ResNet-18, n = 10
        remove(out / checkpoint.FILE)
    say_closing(out, "finished")
    return EXIT["finished"]


def say_closing(out: Path, status: str) -> None:
    """The run's closing summary line (stdout and the run's log; :func:`recap.closing_line`)."""
    say(recap.closing_line(out, status), "summary", stream=sys.stdout)
