"""Ending a run: how it ended (finished, diverged, interrupted, refused, a bug) turned into its
folder's status, one line and an exit code (:data:`errors.EXIT`), then its closing summary line
(:func:`recap.closing_line`). The figures of a finished or diverged run are drawn by the
caller's ``plot`` (the layer above: a run does not import :mod:`analysis`)."""

from __future__ import annotations

import gc
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Unpack

from ..common import run_files, signals, streams
from ..common.console import log_only, say
from ..common.dependencies import missing
from ..common.errors import EXIT, UserError, describe, exhausted, exhausted_line, squeeze
from ..common.files import atomic_write_text, remove
from ..common.run_files import SummaryRecord, read_summary
from ..config.forms import Plain
from . import keep, lock, recap
from .experiment import Experiment
from .outputs import Summary
from .progress import watched
from .training import Diverged, Interrupted

Plot = Callable[[Plain, Path], None]  # draws a run's figures from its resolved config and folder


def end(
    summary: Summary, status: str, code: int | None = None, /, **fields: Unpack[SummaryRecord]
) -> bool:
    """Record the run's end (exit ``code``, by default the status's) in its summary, atomically
    or, when that fails, in place (:func:`files.write_text_in_place`). When nothing can be
    written, one line says so with the path and what the file still says; returns whether the
    end is recorded (the caller's exit code must then not be 0)."""
    try:
        record: SummaryRecord = {"exit_code": EXIT[status] if code is None else code, **fields}
        summary.end(status, **record)
        return True
    except FileNotFoundError as e:  # the folder renamed or moved while the run held it
        now = lock.moved(summary.path.parent)
        if now is None:
            return _not_recorded(summary, status, e)
        say(
            f"the run folder {summary.path.parent} was moved to {now} while the run ran; "
            f"its end ({status}) is recorded there",
            "note",
        )
        summary.path = now / summary.path.name
        return end(summary, status, code, **fields)
    except OSError as e:
        return _not_recorded(summary, status, e)


def _not_recorded(summary: Summary, status: str, e: OSError) -> bool:
    """:func:`end`'s write failed with ``e``: whether the file says ``status`` all the same
    (written, not made durable: a note), else one line saying what it still says."""
    try:
        says = read_summary(summary.path.parent)["status"]
        left = f"it still says {says!r}"
    except FileNotFoundError:
        says, left = None, "there is none"
    except Exception:  # noqa: BLE001 -- unreadable: the line says so
        says, left = None, "it cannot be read"
    if says == status:  # written, but not made durable (the folder's fsync failed)
        say(
            f"the run's end ({status}) is recorded in {summary.path} but may not survive a "
            f"crash of "
            f"the machine ({describe(e)})",
            "note",
        )
        return True
    say(
        f"the run's end ({status}) could not be recorded in {summary.path} ({describe(e)}); {left}",
        "error",
    )
    return False


def internal_error(out: Path, e: BaseException, summaries: Sequence[Summary] = ()) -> int:
    """A bug: one line on stderr, the traceback in ``out/error.log``, status error (in each of
    ``summaries``), exit 3 (``FEDRUN_DEBUG=1`` re-raises). An allocation that failed is no bug
    but the environment's fault (:func:`out_of_memory`), as is a package that is not installed
    (a plugin's, imported as the run builds): status error, exit 2."""
    if exhausted(e):
        return out_of_memory(e, summaries)
    absent = missing(e)
    if absent:
        for summary in summaries:
            end(summary, "error", error=absent)
        say(absent, "error")
        return EXIT["error"]
    where: Path | None = out / run_files.ERROR_LOG
    try:
        atomic_write_text(out / run_files.ERROR_LOG, traceback.format_exc())
    except OSError:
        where = None
    message = f"internal error: {type(e).__name__}: {squeeze(str(e))}"
    for summary in summaries:
        end(summary, "error", EXIT["internal"], error=message)
    say(message + (f"; traceback in {where}" if where else ""))
    if streams.debugging():
        raise e
    return EXIT["internal"]


def out_of_memory(e: BaseException, summaries: Sequence[Summary] = ()) -> int:
    """The machine's or the GPU's memory ran out (:func:`errors.exhausted`): one line naming
    it, status error, exit 2. What the failed allocation held is released first, so that the
    record and the line need no memory the run lacked."""
    message = exhausted_line(e)
    e.__traceback__ = None  # the frames hold the run's tensors
    del e
    gc.collect()
    for summary in summaries:
        end(summary, "error", error=message)
    say(message, "error")
    return EXIT["error"]


def conclude(
    exp: Experiment,
    out: Path,
    summary: Summary,
    error: BaseException | None,
    rows: list[dict[str, float]] | None = None,
    plot: Plot | None = None,
) -> int:
    """Record how the run in ``out`` ended -- ``error`` None: finished with these metrics
    ``rows`` (and ``plot`` draws its figures); otherwise what stopped it -- say so in one line
    and return the exit code. An attempt on a finished run that did not finish puts the
    finished run's files back (:mod:`keep`). Whatever fails on the way (any ``OSError`` of
    any write), the status written last is the truth, or a line says that it could not be
    written and the exit code is not 0."""
    if isinstance(error, keep.Unprotected):  # nothing of the attempt was written: no record
        say(str(error), "error")
        return EXIT["error"]
    code = _conclude(exp, out, summary, error, rows, plot or _no_plot)
    try:
        if keep.settle(out, code == EXIT["finished"]):
            say(
                f"the finished run in {out} is kept as it was (metrics, plot, summary, config)",
                "note",
            )
    except OSError as e:
        say(
            f"the finished run's files kept in {out / run_files.KEPT} could not be put back or "
            f"dropped "
            f"({describe(e)}); the next fedrun in {out} does it",
            "note",
        )
    return code


def _no_plot(resolved: Plain, out: Path) -> None:
    """A run without figures (no ``plot`` given)."""


def _conclude(
    exp: Experiment,
    out: Path,
    summary: Summary,
    error: BaseException | None,
    rows: list[dict[str, float]] | None,
    plot: Plot,
) -> int:
    try:
        if error is not None:
            raise error
        plot(exp.record.resolved, out)
    except (UserError, OSError) as e:
        return _ended(out, summary, "error", describe(e), "error", error=describe(e))
    except Diverged as e:
        return _diverged(exp, out, summary, e, plot)
    except (Interrupted, KeyboardInterrupt) as e:
        return _interrupted(out, summary, e)
    except Exception as e:  # a bug, or memory that ran out
        return internal_error(out, e, [summary])
    code = _ended(out, summary, "finished", None, "", final=(rows or [{}])[-1], round=exp.cfg.T)
    if code == EXIT["finished"] and not exp.cfg.keep_checkpoint:  # ~1 GB for ResNet-18, n = 10
        try:
            remove(out / run_files.CHECKPOINT)
        except OSError as e:  # the run is finished (its record says so); the file is in the way
            say(
                f"{out / run_files.CHECKPOINT} could not be deleted ({describe(e)}); it is no "
                f"longer needed",
                "note",
            )
    return code


def _diverged(exp: Experiment, out: Path, summary: Summary, e: Diverged, plot: Plot) -> int:
    """A diverged run: its figures of the rows so far (if any), status diverged, exit code 1."""
    kept = (out / run_files.METRICS).exists()  # not when round 0's evaluation overflowed
    try:
        if kept:
            plot(exp.record.resolved, out)
    except Exception as p:  # the record of the divergence matters more than its figure
        say(
            f"no metrics.png for the diverged run ({type(p).__name__}: {squeeze(str(p))})",
            "note",
        )
    return _ended(
        out,
        summary,
        "diverged",
        f"{e}" + (f" (rows so far kept in {out / run_files.METRICS})" if kept else ""),
        "diverged",
        error=str(e),
        round=e.round,
    )


def _interrupted(out: Path, summary: Summary, e: Interrupted | KeyboardInterrupt) -> int:
    """An interrupted run: the round it stopped after and the signal that stopped it, how to go
    on; status interrupted, exit code 130."""
    record: SummaryRecord = {"round": e.round} if isinstance(e, Interrupted) else {}
    signum = e.signum if isinstance(e, Interrupted) else signals.first()
    by = signals.name(signum) if signum else None
    at = f" after round {record['round']}" if "round" in record else ""
    if by:
        record["error"] = f"stopped by {by}"
    line = (
        f"interrupted{at}; "
        + (
            "re-run the same command to resume"
            if (out / run_files.CHECKPOINT).exists()
            else f"partial results in {out}"
        )
        + (f" (stopped by {by})" if by else "")
    )
    return _ended(
        out,
        summary,
        "interrupted",
        line,
        "",
        **record,
    )


def _ended(
    out: Path,
    summary: Summary,
    status: str,
    line: str | None,
    kind: str,
    /,
    **fields: Unpack[SummaryRecord],
) -> int:
    """Record ``status`` (:func:`end`), say ``line`` and the closing line; the exit code: the
    status's, or :data:`EXIT` ``error`` for a finished run whose end could not be recorded."""
    recorded = end(summary, status, **fields)
    if line:  # the cause last: a sweep's job record takes the last error said
        say(line, kind)
    code = EXIT[status]
    if not recorded and code == EXIT["finished"]:
        status, code = "error", EXIT["error"]
    say_closing(out, status, recorded)
    return code


def say_closing(out: Path, status: str, recorded: bool = False) -> None:
    """The run's closing summary line (stdout and the run's log; :func:`recap.closing_line`);
    for an end ``recorded`` in a :func:`progress.watched` job, the log only: the sweep's
    launching process prints it from the summary."""
    line = recap.closing_line(out, status)
    if recorded and watched():
        log_only(f"summary: {line}")
    else:
        say(line, "summary", stream=sys.stdout)
