"""A sweep's jobs (``fedrun -m``): where each job writes, the check of every job before the
first one trains, and the record the sweep's report and exit code are made from.

- **Folders follow from configs** (:mod:`jobdir`). ``hydra.sweep.subdir`` is ``${fedrun.job_dir:}``
  (conf/config.yaml): the job's overrides, sorted by key (run-control keys left out, ``/`` as
  ``-``), then ``_`` and 8 hex digits of :func:`jobdir.identity`, e.g.
  ``algorithm=fedavg,regularizer=none,seed=1_3fa2c1d9``. A sweep re-run into its folder with a
  longer, shorter or reordered list finds each config's own folder (finished jobs are skipped,
  interrupted ones resume, new ones start); no position decides a folder.
- **Every job is checked first.** In the launching process, before Hydra's sweeper writes
  anything, every job of a basic sweep is composed and checked as a dry run checks it
  (:func:`runs.preview.check`: values, algorithm/regularizer pairs, the folder's prior run); two
  jobs of one config are refused too (they would share a folder). Any bad job refuses the sweep: one
  ``fedrun: error: job N (...)`` line per bad job, exit code 2, nothing written.
- **The record.** Each job, in whichever process ran it, writes ``SWEEP/.fedrun/jobs/<key>.json``
  when it ends: its number, overrides, folder (anywhere), exit code, status and reason; the key
  names the folder and the launch (the ``fedrun -m`` command, :data:`LAUNCH` in the jobs'
  environment), so two sweeps over one folder never overwrite each other's records. A job
  refused because another process holds its folder is ``held``, exit code 2. The
  launching process knows the jobs of a basic sweep up front (they are recorded as planned when
  the check passes, which ``fedrun-report`` reads) and reports each of them, from its record;
  for other sweepers (Optuna) it reports every record written since the sweep began. A job
  killed before it could record its end (by its scheduler, by a signal) is recorded by the
  launcher (:func:`..analysis.jobrecords.lost`), with the scheduler's word and the job's log as
  its reason. The exit code of ``fedrun -m`` is the worst of the jobs' codes, a refused job
  included.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING

from ..analysis.jobrecords import LAUNCH, JobRecord, records, write
from ..common import streams
from ..common.containers import as_list
from ..common.errors import EXIT, UserError
from ..config.forms import Composed

if TYPE_CHECKING:
    from hydra.conf import HydraConf

# ------------------------------------------------------------------------------------- record


HELD = "held"  # the status of a job refused because another process holds its folder
STATUS = {
    EXIT["finished"]: "finished",
    EXIT["diverged"]: "diverged",
    EXIT["error"]: "error",
    EXIT["internal"]: "error",
    EXIT["interrupted"]: "interrupted",
}


def ended(hc: HydraConf, folder: Path, code: int, started: float, said: str = "") -> None:
    """Record, from inside a job (``hc``: its Hydra config) that began at ``started``, how it
    ended: its exit code and status, and why when it did not finish -- the error its runs'
    summaries recorded during the job, else the last error it ``said`` (a refused job leaves
    the folder's earlier run and its summary as they were)."""
    from ..runs import face

    reason, status = "", STATUS.get(code, "error")
    here = Path(os.path.abspath(folder))
    if code == EXIT["error"] and any(
        here in (p, *p.parents) for p in map(Path, map(os.path.abspath, face.refused))
    ):
        status = HELD
    face.refused.clear()
    if code != EXIT["finished"]:
        for run in map(face.read, face.runs_in(folder)):
            try:
                ended = dt.datetime.fromisoformat(run.summary["ended"]).timestamp()
            except (ValueError, KeyError):
                continue
            if ended >= started - 1 and run.recorded != "finished" and run.error:
                reason = run.error
                break
        reason = reason or said
    rec = JobRecord(
        int(hc.job.num),
        as_list(hc.overrides.task),
        os.path.abspath(folder),
        code,
        status,
        reason,
    )
    write(Path(str(hc.sweep.dir)), rec)


# -------------------------------------------------------------------------------- the check


class SweepRefused(UserError):
    """Some jobs of a sweep are invalid; their lines are printed already."""


def start(
    master: Composed, config_name: str = "config"
) -> tuple[Path, list[JobRecord] | None, float]:
    """What the launching process does before the first job: :func:`check_all`, then the
    planned records written; returns (sweep folder, planned records, start time) for
    :func:`report`. Hydra turns a callback's exceptions into warnings, so a refusal (exit 2)
    or a bug (exit 3, :func:`faults.crash`) ends the process here as :class:`SystemExit`."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from .faults import crash, one_line

    started = time.time()
    os.environ[LAUNCH] = hashlib.sha256(
        f"{os.getpid()} {socket.gethostname()} {started}".encode()
    ).hexdigest()[:8]
    try:
        planned = check_all(master, config_name)
        folder = Path(str(master.hydra.sweep.dir))
        for rec in planned or []:
            write(folder, rec)
    except (UserError, HydraException, OmegaConfBaseException, ValueError, OSError) as e:
        streams.err(f"fedrun: error: {one_line(e)}")
        raise SystemExit(EXIT["error"]) from None
    except Exception as e:  # noqa: BLE001 -- a bug; Hydra would only warn
        raise SystemExit(crash(e)) from None
    return folder, planned, started


def check_all(master: Composed, config_name: str = "config") -> list[JobRecord] | None:
    """Compose and check every job of a basic sweep (``master``: the sweep's config) as a dry
    run does (:func:`dryrun.check_jobs`); the jobs' records, planned (None for other sweepers).
    Bad jobs: one line each on stderr, then :class:`SweepRefused`. Checked, the jobs are
    composed by the same composer when Hydra launches them (:mod:`config.launch`)."""
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig

    from ..config import launch
    from ..config.compose import sweep_jobs
    from ..config.jobs import compose_jobs, composer
    from . import dryrun

    task = sweep_jobs(master)
    if task is None:
        return None
    saved = HydraConfig.instance().cfg
    gh = GlobalHydra.instance().hydra
    assert gh is not None, "Hydra is not initialized"  # the sweep's own, running
    compose = composer(gh, config_name, master)
    try:
        listed = compose_jobs(gh, config_name, master, task, compose)
        good, bad = dryrun.check_jobs(listed, multirun=True)
    finally:
        HydraConfig.instance().cfg = saved
    if bad:
        streams.err("\n".join(bad))
        raise SweepRefused(
            f"{len(bad)} of {len(task)} jobs of the sweep are invalid (above); nothing ran"
        )
    launch.use(master, compose)  # the sweeper and launcher get each job from its composer
    return [JobRecord(j.num, j.overrides, os.path.abspath(j.folder)) for j in good]


# ------------------------------------------------------------------------------------ report


def _recorded_error(folder: Path) -> str:
    """The error a job's run recorded in its summary (its first run's, for ``seeds=R``)."""
    from ..runs import face

    return next((face.read(run).error for run in face.runs_in(folder)), "")


def _shown(folder: Path, sweep: Path) -> str:
    return str(folder.relative_to(sweep)) if folder.is_relative_to(sweep) else str(folder)


def _stopped_with_the_sweep(folder: Path) -> str:
    """A job whose worker process was ended by the sweep's interruption (joblib's abort kills
    its workers) before it could record its end: its summary says so -- ``interrupted``, and
    why -- rather than ``running`` (no process runs it). Its rows and last checkpoint stay:
    the same command resumes it. Returns the status its folder now records."""
    from ..runs import face

    for run in map(face.read, face.runs_in(folder)):
        if run.status == face.DEAD:
            try:
                face.stopped(run, "its worker process was ended when the sweep was interrupted")
            except (OSError, ValueError):
                continue  # the folder cannot be written: it keeps saying what it said
    return face.status(folder)


def report(
    sweep: Path,
    planned: list[JobRecord] | None,
    since: float,
    table: bool = True,
    interrupted: bool = False,
) -> int:
    """Print how many of the sweep's jobs finished and list every other one (stderr) with its
    status and reason, then (``table``) the table of every job (:mod:`jobtable`); return the
    worst exit code. ``planned``: the jobs launched (a basic sweep), each reported from its
    record, or from its folder when it has none (it never ended: not started, or its process
    died -- after an ``interrupted`` sweep, ended by it: :func:`_stopped_with_the_sweep`);
    None: the jobs recorded since ``since``."""
    from ..runs import face
    from .jobtable import table as job_table

    sweep = Path(sweep)
    done = {r.folder: r for r in records(sweep, since, os.environ.get(LAUNCH, ""))}
    jobs = []
    for p in planned if planned is not None else sorted(done.values(), key=lambda r: r.num):
        r = done.get(p.folder, p)
        if r.code is None:  # no record of its end: its folder tells
            st = face.status(r.folder)
            if st == face.DEAD and interrupted:
                st = _stopped_with_the_sweep(Path(r.folder))
            r.status = face.NOT_STARTED if st == face.MISSING else st
            r.code = EXIT["finished"] if st == "finished" else EXIT.get(st, EXIT["error"])
            r.reason = r.reason or _recorded_error(Path(r.folder))
        jobs.append(r)
    failed = [r for r in jobs if r.code != EXIT["finished"]]
    root = sweep.absolute()
    streams.out(f"sweep: {len(jobs) - len(failed)} of {len(jobs)} jobs finished in {sweep}")
    for r in failed:
        streams.err(
            f"  {_shown(Path(r.folder), root)}: {r.status}" + (f" ({r.reason})" if r.reason else "")
        )
    if table and jobs:
        streams.out(
            "\n".join(
                job_table(
                    [Path(r.folder) for r in jobs],
                    root,
                    statuses=[r.status for r in jobs],
                    overrides=[r.overrides for r in jobs],
                )
            )
        )
    codes = [r.code for r in jobs if r.code is not None]  # (every job's, set above)
    return max(codes, default=EXIT["finished"])
