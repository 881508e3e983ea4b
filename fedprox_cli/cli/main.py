"""The ``fedrun`` command: Hydra composes the config, the runs layer does the work
(:func:`runs.face.run_job`).

The fault contract (docs/robustness.md, "Faults and exit codes"): every fault is one line on stderr
and an exit code
of :data:`errors.EXIT` -- 2 for bad input and faults of data or files (Hydra's own error
printing is bypassed: HYDRA_FULL_ERROR is set for the call, and its messages are squeezed into
one line), 3 for an internal error (a bug: the traceback goes to the run folder's
``error.log``, or to :func:`faults.crash_log` outside a run), 1 for a diverged run, 130 for an
interrupted one. Set FEDRUN_DEBUG=1 to see tracebacks instead.

A multirun goes through :mod:`sweep`: :class:`SweepReport` (a Hydra callback, run in the
launching process) checks every job before the first one trains, each job records how it
ended -- jobs may run in other processes (``hydra/launcher=joblib``) -- and the report made
from those records lists every job that did not finish, including those that never started,
then the table of its jobs (:mod:`jobtable`); while the jobs run, this process prints their
start, progress and closing lines (:mod:`watch`). A single run of a preset that defines a sweep
says so (:func:`runs.face.run_job`).

Before Hydra starts, :func:`preflight.preflight` answers ``--help`` (:mod:`help`), dry runs and
``-m ... --cfg job`` (:mod:`dryrun`), so that nothing is written for them.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.core.utils import JobReturn
from hydra.errors import HydraException
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ..cluster.launchers import sweep_value
from ..cluster.pool import release_pool_workers, take_over_pool_workers
from ..cluster.ray_jobs import plain_output
from ..common import console, run_files, signals, streams, thread_room
from ..common.console import say
from ..common.errors import EXIT, Refusal, UserError, squeeze
from ..common.package import CONF_DIR
from ..common.signals import stops_interrupt
from ..config import compose_once, launch, resolvers
from ..config.forms import Composed
from ..runs import face
from . import drawer, preflight, sweep, watch
from .faults import crash, one_line
from .threads_left import leave_threads

if TYPE_CHECKING:
    from ..analysis.jobrecords import JobRecord

# Before Hydra composes anything; at import, because a process that runs jobs composed in
# another (a joblib worker, a SLURM job) resolves each job's folder (${fedrun.job_dir:}) before
# calling the job, and the only fedrun code it runs first is this import (unpickling _job).
resolvers.register()


@dataclass
class _Call:
    """What one call of :func:`main` learns while Hydra runs it: the exit code of its run (not
    a multirun: :func:`_job`) and its multirun (:class:`SweepReport`: the sweep folder, its
    jobs' planned records or None, the start time; see :func:`sweep.report`)."""

    codes: list[int] = field(default_factory=list)
    sweep: tuple[Path, list[JobRecord] | None, float] | None = None
    made: dict[Path, bool] = field(
        default_factory=dict
    )  # the run folder's parents: whether each was there
    command: bool = False  # the fedrun command (its own process), not a call from Python
    watching: watch.Watch | None = (
        None  # the multirun's jobs, watched while they run (:mod:`watch`)
    )


_CALL: ContextVar[_Call] = ContextVar("fedrun_call")  # set by each main() call


_FAULTS = (HydraException, OmegaConfBaseException, UserError, ValueError, OSError, Refusal)


def fault(e: Exception | Refusal) -> int:
    """An exception that reached fedrun's command (bad input: Hydra's, OmegaConf's, the
    config's, a file's) as its one line and exit code; any other is :func:`faults.crash`."""
    if not isinstance(e, _FAULTS):
        return crash(e)
    say(one_line(e), "error")  # (with FEDRUN_DEBUG=1 after its traceback)
    return EXIT["error"]


def _crash_reason(e: Exception) -> str:
    return f"internal error: {type(e).__name__}: {squeeze(str(e))}"


def _ran(code: int) -> None:
    """Note the exit code of the run (not a multirun) of the current :func:`main` call. (Not
    inlined in :func:`_job`: a joblib worker receives the job pickled, and a ContextVar cannot
    be.)"""
    _CALL.get().codes.append(code)


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")
def _job(composed: Composed) -> float:
    # in whichever process runs the job (a joblib worker too): SIGTERM, SIGHUP... stop it
    stops_interrupt()
    try:
        signals.take_held()  # a pool worker: a Ctrl-C that came while it started, raised now
        if signals.received:  # this process was told to stop (a worker, between jobs): no job
            raise KeyboardInterrupt
        return _job_in(composed)
    finally:
        signals.hold()  # a pool worker between jobs: signals wait for the next one


def _job_in(composed: Composed) -> float:
    hc = HydraConfig.get()
    out = Path(hc.runtime.output_dir)
    multirun = cast(RunMode, hc.mode).name == "MULTIRUN"
    console.errors.clear()
    started, reason = time.time(), ""
    noted = len(signals.received)
    with console.as_job(f"job {hc.job.num}" if multirun else ""):
        try:  # nothing leaves the job but KeyboardInterrupt: Hydra would add a line of its own
            code = face.run_job(hc, composed, out, watch.bars(hc.launcher._target_), drawer.figures)
        except Exception as e:  # outside the run's own handling: one line, the sweep goes on
            said = len(console.errors)
            code = fault(e)
            reason = console.errors[-1] if len(console.errors) > said else _crash_reason(e)
        except KeyboardInterrupt:  # stopped before the run began (its modules loading): no folder
            if not multirun:
                _remove_made(out)
            raise
    if not multirun:
        _remove_made(out)  # Hydra made it for a refused run: nothing was written
    if multirun:
        sweep.ended(
            hc, out, code, started, reason or (console.errors[-1] if console.errors else "")
        )
        if code == EXIT["interrupted"] or len(signals.received) > noted:
            # stop the whole sweep, not just this job -- also after a signal that came too late
            # to stop the job itself (during its last round's evaluation or checkpoint)
            raise KeyboardInterrupt
    else:
        _ran(code)
        if code == 0:
            _say_written(composed, out)
    return sweep_value(
        composed, out, code, OmegaConf.select(cast(DictConfig, hc), "sweeper.direction")
    )  # for sweepers


def _say_written(composed: Composed, out: Path) -> None:
    """Where a run that finished without ``-m`` wrote: its seeds' folders, or its metrics and
    plot."""
    if composed.seeds > 1:
        streams.out(
            f"runs:    {out / (run_files.SEED_PREFIX + '<s>')} for s = "
            f"{composed.seed}..{composed.seed + composed.seeds - 1}"
        )
    elif (out / run_files.METRICS).exists():
        streams.out(f"metrics: {out / run_files.METRICS}")
        if (out / run_files.METRICS_FIGURE).exists():  # not drawn: its own line said why
            streams.out(f"plot:    {out / run_files.METRICS_FIGURE}")


def _parents(argv: list[str]) -> dict[Path, bool]:
    """The run folder's parents known before Hydra makes the folder (the literal part of
    ``hydra.run.dir``: the command line's, else config.yaml's ``results/runs/``), each with
    whether it exists now."""
    given = [
        a.split("=", 1)[1].strip("'\"") for a in argv if re.match(r"^\+{0,2}hydra\.run\.dir=", a)
    ]
    pattern = given[-1] if given else "results/runs/${now:}"
    literal = Path(
        pattern.split("${", 1)[0] + "x"
    ).parent  # the folders before the first interpolation
    out = {}
    try:
        for p in [literal.resolve(), *literal.resolve().parents]:
            out[p] = p.exists()
    except (
        OSError
    ):  # a name the file system refuses (too long, ...): the run says so; keep every folder
        return {}
    return out


def _remove_made(out: Path) -> None:
    """Remove the run folder ``out`` if it is empty, and each empty parent of it that did not
    exist before Hydra made it (:func:`_parents`, noted by this :func:`main` call); a folder
    that was there, or that holds anything, stays. (Not inlined in :func:`_job`, which a joblib
    worker receives pickled, as :func:`_ran`.)"""
    made = _CALL.get().made
    try:
        out.rmdir()
        p = out.resolve().parent
        while made.get(p) is False and not any(p.iterdir()):
            p.rmdir()
            p = p.parent
    except OSError:
        pass  # another process wrote there meanwhile, or it cannot be removed: it stays


class SweepReport(Callback):
    """Checks every job of a multirun before the first one runs (:func:`sweep.check_all`),
    records them as planned and remembers the sweep for its report (:func:`sweep.report`);
    lightens each job's return (:meth:`on_job_end`)."""

    def on_multirun_start(
        self, config: DictConfig, config_name: str = "config", **kwargs: Any
    ) -> None:
        call = _CALL.get()
        joblib = "joblib" in str(config.hydra.launcher._target_)
        if joblib:  # before anything is written: its workers' room, or one line
            _fit_workers(config.hydra.launcher.get("n_jobs"))
        call.sweep = sweep.start(config, config_name or "config")
        if joblib:
            take_over_pool_workers()
        call.watching = watch.start(call.sweep[0], call.sweep[1], config.hydra.launcher._target_)

    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs: Any) -> None:
        """A job's return keeps its value, status and overrides, not its two configs (its
        folder has them): Hydra's launchers keep every job's return until the sweep ends, and
        with the configs that is ~0.1 MB a job (docs/performance.md, "Sweeps")."""
        if OmegaConf.select(config, "hydra.mode") == RunMode.MULTIRUN:
            job_return.cfg = job_return.hydra_cfg = None


def _fit_workers(n_jobs: object) -> None:
    """A joblib sweep's workers fitted to the limit on the user's processes and threads
    (:func:`thread_room.fit_workers`); a sweep they do not fit is refused
    (:class:`errors.Refusal`, one line)."""
    try:
        thread_room.fit_workers(n_jobs)
    except thread_room.NoRoom as e:
        raise Refusal(str(e)) from None


def main(argv: list[str] | None = None) -> None:
    """``fedrun`` with ``argv`` (default: the command line's); ends with ``SystemExit`` and the
    exit code. Re-entrant: each call starts with no run, sweep or signal noted (its own
    :class:`_Call`), so a process (a test, a notebook) may call it again."""
    if argv is not None:
        sys.argv[1:] = list(argv)
    call = _Call(command=argv is None)
    token = _CALL.set(call)
    before = set(threading.enumerate())
    try:
        with signals.held_by_fedrun():
            try:
                code = _fedrun(call)
            except KeyboardInterrupt:  # before Hydra ran (its imports)
                streams.err("fedrun: interrupted")
                code = EXIT["interrupted"]
            except Exception as e:  # before or after Hydra ran (an import that ran out of memory)
                code = crash(e)
    finally:
        _CALL.reset(token)
        drawer.stop()
    leave_threads(before, code, exit_now=argv is None)
    sys.exit(code)


def _fedrun(call: _Call) -> int:
    """The exit code of the command in ``sys.argv``."""
    signals.received.clear()
    streams.guard()
    plain_output()  # Ray reads its settings at import, which a launcher plugin may do early
    gone = preflight.deleted_cwd(sys.argv[1:])  # before torch loads: its libraries need it
    if gone:
        streams.err(f"fedrun: error: {gone}")
        return EXIT["error"]
    early = preflight.preflight(sys.argv[1:])
    if early is not None:
        return early
    if call.command and not preflight.NO_RUN.intersection(sys.argv[1:]):
        drawer.start()  # its imports made while this process imports torch, composes, trains
    empty = next((a for a in sys.argv[1:] if preflight.EMPTY_DIR.match(a)), None)
    if empty:
        streams.err(
            f"fedrun: error: {empty.split('=')[0].lstrip('+')} is empty; give a folder "
            f"(an empty one would write the run into the current folder)"
        )
        return EXIT["error"]
    sys.argv[1:] = preflight.quote_paths(sys.argv[1:])
    os.environ["HYDRA_FULL_ERROR"] = "1"
    stops_interrupt()
    call.made = _parents(sys.argv[1:])
    code = 0
    args = preflight.parsed(sys.argv[1:])
    try:
        with compose_once.composed_once(multirun=args is None or args.multirun):
            _job()
    except KeyboardInterrupt:
        code = EXIT["interrupted"]
        if call.sweep is None and not call.codes:
            streams.err("fedrun: interrupted")
    except (Exception, Refusal) as e:  # Refusal: a callback's, a BaseException (errors.Refusal)
        code = fault(e)
    finally:
        launch.done()
        watch.stop(call.watching)  # the jobs' last lines, before the report
    if call.sweep is not None:
        release_pool_workers()
        code = max(code, sweep.report(*call.sweep, interrupted=code == EXIT["interrupted"]))
    return max([code, *call.codes])
