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

Before Hydra starts, :func:`_preflight` answers ``--help`` (:mod:`help`), dry runs and
``-m ... --cfg job`` (:mod:`dryrun`), so that nothing is written for them.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys
import threading
import time
from contextvars import ContextVar
from dataclasses import dataclass, field
from os import _exit  # os's documented exit without clean-up (nothing private of fedprox_cli)
from pathlib import Path
from typing import cast

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
from ..common import console, run_files, signals, streams
from ..common.console import say
from ..common.errors import EXIT, Refusal, UserError, squeeze
from ..common.package import CONF_DIR
from ..common.signals import stops_interrupt
from ..config import compose_once, launch, plugin_defaults, resolvers
from ..runs import face
from . import drawer, sweep, watch
from .faults import crash, one_line

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
    sweep: tuple[Path, list | None, float] | None = None
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
def _job(composed: DictConfig) -> float:
    # in whichever process runs the job (a joblib worker too): SIGTERM, SIGHUP... stop it
    stops_interrupt()
    try:
        signals.take_held()  # a pool worker: a Ctrl-C that came while it started, raised now
        if signals.received:  # this process was told to stop (a worker, between jobs): no job
            raise KeyboardInterrupt
        return _job_in(composed)
    finally:
        signals.hold()  # a pool worker between jobs: signals wait for the next one


def _job_in(composed: DictConfig) -> float:
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


def _say_written(composed: DictConfig, out: Path) -> None:
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

    def on_multirun_start(self, config: DictConfig, config_name: str = "config", **kwargs) -> None:
        call = _CALL.get()
        call.sweep = sweep.start(config, config_name or "config")
        if "joblib" in str(config.hydra.launcher._target_):
            take_over_pool_workers()
        call.watching = watch.start(call.sweep[0], call.sweep[1], config.hydra.launcher._target_)

    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs) -> None:
        """A job's return keeps its value, status and overrides, not its two configs (its
        folder has them): Hydra's launchers keep every job's return until the sweep ends, and
        with the configs that is ~0.1 MB a job (docs/performance.md, "Sweeps")."""
        if OmegaConf.select(config, "hydra.mode") == RunMode.MULTIRUN:
            job_return.cfg = job_return.hydra_cfg = None


_NO_RUN = {"--cfg", "-c", "--info", "-i", "--shell-completion", "-sc"}  # Hydra's, nothing drawn
_EMPTY_DIR = re.compile(r"^\+{0,2}hydra\.(run|sweep)\.dir=(''|\"\"|\s*)$")
_PATH_KEY = re.compile(
    r"^(\+{0,2}(?:hydra\.(?:run|sweep)\.dir|hydra\.sweep\.subdir|data\.root))=(.+)$"
)


def quote_paths(args: list[str]) -> list[str]:
    """Folder overrides with characters Hydra's override grammar rejects unquoted (non-ASCII:
    ``hydra.run.dir=results/résultats``) in Hydra's quotes, so such paths work as typed."""
    out = []
    for a in args:
        m = _PATH_KEY.match(a)
        if m and m.group(2)[0] not in "'\"" and not m.group(2).isascii():
            a = f"{m.group(1)}='" + m.group(2).replace("\\", "\\\\").replace("'", "\\'") + "'"
        out.append(a)
    return out


def _parsed(argv: list[str]):
    """The command line as Hydra's argument parser reads it, or None where it does not parse
    (silent here: Hydra's own parsing then says what is wrong)."""
    from ..config.hydra_private import get_args_parser

    try:
        with contextlib.redirect_stderr(io.StringIO()):
            return get_args_parser().parse_intermixed_args(argv)
    except (ValueError, TypeError, SystemExit):
        return None


def _composed_group(group: str, chosen: list[list[str]]) -> dict:
    """The config group ``group`` as a run of the ``chosen`` options composes it (their YAMLs
    over the classes' defaults): the values ``--help`` shows as defaults."""
    from omegaconf import OmegaConf

    from ..config.compose import compose

    composed = compose([f"{g}={n}" for g, n in chosen])
    values = OmegaConf.to_container(composed[group], resolve=True)
    return values if isinstance(values, dict) else {}


def _preflight(argv: list[str]) -> int | None:
    """What fedrun does before Hydra starts: ``--help`` (:mod:`help`; Hydra's page stays at
    ``--hydra-help``), a dry run and ``-m ... --cfg job`` (:mod:`dryrun`: Hydra's multirun would
    create the sweep folder first); ``--cfg job`` of one run gets ``--resolve``. Returns an
    exit code, or None to go on with Hydra. An installed plugin named without a YAML gets its
    defaults as its config first (:mod:`config.plugin_defaults`)."""
    if "--help" in argv or "-h" in argv:
        from .help import option_page, text

        chosen = [
            a.split("=", 1)
            for a in argv
            if re.match(r"^(algorithm|regularizer|compressor)=[\w.]+$", a)
        ]
        try:
            streams.out(
                (
                    "\n\n".join(option_page(g, n, _composed_group(g, chosen)) for g, n in chosen)
                    if chosen
                    else text()
                ).rstrip("\n")
            )
        except UserError as e:
            streams.err(f"fedrun: error: {e}")
            return EXIT["error"]
        return EXIT["finished"]
    args = _parsed(argv)
    if args is None:
        return None
    try:
        plugin_defaults.store(args.overrides, args.config_dir)
    except UserError as e:
        streams.err(f"fedrun: error: {e}")
        return EXIT["error"]
    if (
        args.config_name
        or args.config_path
        or args.config_dir
        or args.info
        or args.shell_completion
    ):
        return None
    from .dryrun import dry_run, requested

    if args.cfg == "job" and args.multirun:
        return dry_run(args.overrides, multirun=True, show_cfg=True)
    if args.cfg == "job" and not args.resolve:
        sys.argv.append("--resolve")
    if args.cfg is None and requested(args.overrides):
        return dry_run(args.overrides, multirun=args.multirun)
    return None


def _deleted_cwd(args: list[str]) -> str | None:
    """When the working folder was deleted (``os.getcwd`` fails; torch's libraries then fail to
    load): with an absolute run or sweep folder given, the process moves to ``/`` and goes on
    (None); otherwise the line naming the deleted folder."""
    try:
        os.getcwd()
        return None
    except FileNotFoundError:
        pass
    try:
        where = os.readlink("/proc/self/cwd").removesuffix(" (deleted)")
    except OSError:
        where = os.environ.get("PWD", "(unknown)")
    folders = [
        a.split("=", 1)[1] for a in args if _PATH_KEY.match(a) and "hydra." in a.split("=", 1)[0]
    ]
    if folders and all(os.path.isabs(f.strip("'\"")) for f in folders):
        os.chdir("/")
        return None
    return (
        f"the working folder {squeeze(where, 200)} was deleted; cd to an existing folder, or give "
        f"an "
        f"absolute hydra.run.dir (hydra.sweep.dir with -m)"
    )


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
    _leave_threads(before, code, exit_now=argv is None)
    sys.exit(code)


THREADS_GRACE_S = 5.0  # how long the threads a call left running get to end by themselves


def _leave_threads(before: set[threading.Thread], code: int, exit_now: bool) -> None:
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


def _fedrun(call: _Call) -> int:
    """The exit code of the command in ``sys.argv``."""
    signals.received.clear()
    streams.guard()
    plain_output()  # Ray reads its settings at import, which a launcher plugin may do early
    gone = _deleted_cwd(sys.argv[1:])  # before anything loads torch, whose libraries need it
    if gone:
        streams.err(f"fedrun: error: {gone}")
        return EXIT["error"]
    early = _preflight(sys.argv[1:])
    if early is not None:
        return early
    if call.command and not _NO_RUN.intersection(sys.argv[1:]):
        drawer.start()  # its imports made while this process imports torch, composes, trains
    empty = next((a for a in sys.argv[1:] if _EMPTY_DIR.match(a)), None)
    if empty:
        streams.err(
            f"fedrun: error: {empty.split('=')[0].lstrip('+')} is empty; give a folder "
            f"(an empty one would write the run into the current folder)"
        )
        return EXIT["error"]
    sys.argv[1:] = quote_paths(sys.argv[1:])
    os.environ["HYDRA_FULL_ERROR"] = "1"
    stops_interrupt()
    call.made = _parents(sys.argv[1:])
    code = 0
    args = _parsed(sys.argv[1:])
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
