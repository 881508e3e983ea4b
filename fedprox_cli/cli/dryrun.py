"""``fedrun ... dry_run=true`` and ``fedrun -m ... --cfg job``: what a run or a sweep would do,
without doing it. Handled in :func:`cli.main` before Hydra starts (Hydra's multirun creates the
sweep folder before any job runs), with Hydra's compose API and the basic sweeper's own job
expansion (:func:`config.compose.sweep_jobs`, presets' ``hydra.sweeper.params`` included). Each
job's
config is composed as the launcher composes it (the sweep's Hydra overrides, then the job's) and
checked with :func:`experiment.validate` against the job's reference config, like a real run, plus
the run-folder checks that need no data (a foreign folder, a prior run of another config).
Nothing is written: no folder, no ``.hydra``, no lock.

The listing (stdout) gives each job's overrides, folder, device (where it would run: the GPU
by fedrun's rule, or the share Ray would give it) and work -- client steps
``T * K * n * participation`` (local steps of one client on one mini-batch) and evaluations
``ceil(T / eval_every) + 1``, counted from the round the job would start from (a prior run in
its folder is resumed) -- and the totals; bad jobs end it with one line each on stderr
naming the job (:func:`check_jobs`, which a real sweep runs before its first job too), exit
code 2.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import OmegaConf

from ..common import streams
from ..common.errors import EXIT, UserError
from ..common.package import CONF_DIR
from ..config import schedule
from ..runs import face
from .jobtable import align, differing

if TYPE_CHECKING:  # a job's config holds torch's types: torch loads when jobs are listed
    from ..config.composer import Job
    from ..config.validate import Reference

_DRY = re.compile(r"^\+{0,2}dry_run=(?P<value>.*)$")


def requested(overrides: list[str]) -> bool:
    """Whether the command line sets ``dry_run`` to anything but false (a value that is not a
    boolean is then refused by the validation, before anything runs)."""
    values = [m["value"].strip() for m in map(_DRY.match, overrides) if m]
    return bool(values) and values[-1].lower() != "false"


def work(cfg: Mapping[str, Any], start: int | dict[int, int] = 0) -> tuple[float, int]:
    """(client steps, evaluations) of a run's rounds ``start``..T: ``T*K*n*participation`` and
    ``ceil(T/eval_every) + 1`` from round 0 (round 0 is evaluated too; ``eval_every=0``: 1,
    :mod:`config.schedule`; ``cfg``: the run's config or its resolved values); summed over the runs
    of ``seeds=R`` when ``start`` counts them by start round ({round: runs})."""
    T, e, per_round = cfg["T"], cfg["eval_every"], cfg["K"] * cfg["n"] * cfg["participation"]
    steps = evals = 0
    for s, runs in start.items() if isinstance(start, dict) else [(start, 1)]:
        if s < T:
            steps += (T - s) * per_round * runs
            evals += schedule.count(s, T, e) * runs
    return steps, evals


@dataclass
class Checked:
    """What a dry run lists of a good job once its config is checked (the config itself is
    dropped, so a sweep's memory does not grow with its jobs)."""

    num: int
    overrides: list[str]
    folder: Path
    where: str
    state: str
    steps: float
    evals: int
    note: str | None
    shown: Path | None = None  # the folder as the listing names it (config.jobs.planned_folder)


PROGRESS_S = 5.0  # a line on stderr at most this often while a sweep's jobs are checked


def check_jobs(listed: Iterable[Job], multirun: bool) -> tuple[list[Checked], list[str]]:
    """:func:`runs.preview.check` of every job, taken one at a time: the good ones'
    :class:`Checked`, and one ``fedrun: error: job N (...): why`` line per bad one -- a job that
    fails a check, or that has the folder of an earlier job (the same config twice). A sweep
    that takes longer than :data:`PROGRESS_S` says how far it is, every :data:`PROGRESS_S`
    seconds."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from .faults import one_line

    first: dict[Path, str]
    references: dict[tuple[tuple[str, str], ...], Reference | None]
    good, bad, first, references = [], [], {}, {}
    started = last = time.monotonic()
    for job in listed:
        try:
            state, start = face.check(job, references)
            earlier = first.setdefault(job.folder, job_name(job, multirun))
            if earlier != job_name(job, multirun):
                raise UserError(f"the same config as {earlier} (both would run in {job.folder})")
            assert job.resolved.values is not None  # (check refuses a job without them)
            steps, evals = work(job.resolved.values, start)
            good.append(
                Checked(
                    job.num,
                    job.overrides,
                    job.folder,
                    job.where,
                    state,
                    steps,
                    evals,
                    job.note,
                    job.shown,
                )
            )
        except (UserError, HydraException, OmegaConfBaseException, ValueError, OSError) as e:
            bad.append(
                f"fedrun: error: {job_name(job, multirun) + ': ' if multirun else ''}{one_line(e)}"
            )
        now = time.monotonic()
        if multirun and now - last >= PROGRESS_S:
            streams.err(
                f"fedrun: checked {job.num + 1} jobs ({face.duration(now - started)}; "
                f"{len(bad)} invalid so far)"
            )
            last = now
    return good, bad


def job_name(job: Job, multirun: bool) -> str:
    return f"job {job.num} ({' '.join(job.overrides) or 'no overrides'})" if multirun else "the run"


def dry_run(overrides: list[str], multirun: bool, show_cfg: bool = False) -> int:
    """List, validate and estimate every job (``show_cfg``: print each job's resolved config
    instead of validating); return the exit code."""
    from hydra import initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from ..config.jobs import jobs
    from .faults import one_line

    try:
        with initialize_config_dir(str(CONF_DIR), version_base="1.3", job_name="fedrun"):
            listed = jobs(overrides, multirun)
            if show_cfg:
                for job in listed:
                    streams.out(f"# {job_name(job, multirun)} -> {job.shown}")
                    streams.out(OmegaConf.to_yaml(job.cfg, resolve=True))
                return EXIT["finished"]
            checked, bad = check_jobs(listed, multirun)
            if bad:
                streams.err("\n".join(bad))
                return EXIT["error"]
    except (UserError, HydraException, OmegaConfBaseException, ValueError, OSError) as e:
        streams.trace(e)
        streams.err(f"fedrun: error: {one_line(e)}")
        return EXIT["error"]
    _say_listing(checked)
    return EXIT["finished"]


def _say_listing(checked: list[Checked]) -> None:
    """The dry run's listing of the good jobs ``checked``: one line each (folder, client steps,
    evaluations, device, state, the overrides that vary), the overrides they share and the
    total work."""
    rows = [["job", "folder", "client steps", "evaluations", "device", "state"]]
    rows += [
        [str(j.num), str(j.shown or j.folder), f"{j.steps:,.0f}", str(j.evals), j.where, j.state]
        for j in checked
    ]
    total_steps, total_evals = sum(j.steps for j in checked), sum(j.evals for j in checked)
    n = len(checked)
    varied = differing([job.overrides for job in checked])
    common = [o for o in checked[0].overrides if o not in varied[0]]
    streams.out(f"dry run: {n} job{'s' if n != 1 else ''}, every config valid; nothing was written")
    if checked[0].note:
        streams.out(f"note: {checked[0].note}")
    streams.out(f"overrides of every job: {' '.join(common) or 'none'}")
    streams.out(
        "\n".join(
            align(
                [
                    row + [" ".join(v) if i else "overrides"]
                    for i, (row, v) in enumerate(zip(rows, [[]] + varied))
                ],
                indent=2,
            )
        )
    )
    streams.out(
        f"work: {total_steps:,.0f} client steps (T*K*n*participation, each a local step of one "
        f"client on one mini-batch) and {total_evals} evaluations (ceil(T/eval_every)+1 per "
        f"job from round 0), counted from the round each job would start from"
    )
