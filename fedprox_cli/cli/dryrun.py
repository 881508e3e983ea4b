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
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

from omegaconf import DictConfig, OmegaConf

from ..common import run_files, streams
from ..common.errors import EXIT, UserError
from ..common.package import CONF_DIR
from ..config import extras, schedule
from ..config.compose import reference_config
from ..runs.progress import duration
from ..runs.view import seed_folders
from .jobtable import align, differing

if TYPE_CHECKING:  # a job's config holds torch's types: torch loads when jobs are listed
    from ..config.composer import Job

_DRY = re.compile(r"^\+{0,2}dry_run=(?P<value>.*)$")


def requested(overrides: list[str]) -> bool:
    """Whether the command line sets ``dry_run`` to anything but false (a value that is not a
    boolean is then refused by the validation, before anything runs)."""
    values = [m["value"].strip() for m in map(_DRY.match, overrides) if m]
    return bool(values) and values[-1].lower() != "false"


def work(cfg, start: int | dict[int, int] = 0) -> tuple[float, int]:
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


def check(job: Job, references: dict | None = None) -> tuple[str, int | dict[int, int]]:
    """Validate a job like a real run (:func:`config.validate.typed_resolved` against the job's
    reference, :func:`experiment.checks`, the folder checks); returns what the run would do in
    its folder and the round it would start from (with ``seeds=R``: the state of each
    ``seed_<s>/`` run and their start rounds counted, :func:`_batch`). Raises
    :class:`UserError` (or Hydra's errors). ``references``: :class:`config.validate.Reference`
    by group choices, reused across a sweep's jobs."""
    from ..common.flatten import flatten
    from ..config.validate import Reference, typed_resolved
    from ..runs import experiment, seeds

    references = {} if references is None else references
    key = tuple(sorted((g, str(c)) for g, c in job.choices.items()))
    if key not in references:
        references[key] = Reference.of(reference_config(job.choices))
    extras.check(job.choices)
    experiment.checks(typed_resolved(flatten(job.plain), job.resolved, references[key]))
    values = cast(dict, job.resolved.values)
    if values["seeds"] == 1:
        return _state(lambda: job.cfg, job.folder, values["T"])
    seeds.check_container(job.folder)
    return _batch(job)


def _batch(job: Job) -> tuple[str, dict[int, int]]:
    """The state of each run of a ``seeds=R`` job and their start rounds counted: the seeds whose
    folder exists are checked one by one, the others are new runs (no folder: nothing to check),
    so the cost grows with the runs on disk, not with R."""
    from ..runs import seeds

    values = cast(dict, job.resolved.values)
    first, R, T = values["seed"], values["seeds"], values["T"]
    numbers = (int(p.name.removeprefix(run_files.SEED_PREFIX)) for p in seed_folders(job.folder))
    on_disk = [n for n in numbers if first <= n < first + R]
    starts: dict[int, int]
    said, starts, last = [], {}, first
    for s in sorted(on_disk):
        if s > last:
            said.append(_new(last, s - 1))
        state, start = _state(
            cast(Callable[[], DictConfig], lambda s=s: seeds.with_seed(job.cfg, s)),
            job.folder / run_files.seed_folder(s),
            T,
        )
        said.append(f"seed {s} {state}")
        starts[start] = starts.get(start, 0) + 1
        last = s + 1
    if last < first + R:
        said.append(_new(last, first + R - 1))
    new = first + R - len(on_disk) - first
    if new:
        starts[0] = starts.get(0, 0) + new
    states = {x.split(" ", 2)[-1] for x in said}
    return f"{R} runs: " + (states.pop() if len(states) == 1 else ", ".join(said)), starts


def _new(a: int, b: int) -> str:
    return f"seed {a} new" if a == b else f"seeds {a}-{b} new"


def _state(config: Callable[[], DictConfig], folder: Path, T: int) -> tuple[str, int]:
    """What a run of ``config()`` (made only for a folder that exists: a seed batch of many new
    runs costs no config each) would do in ``folder``, and the round it would start from (T: no
    work, as for a run another process holds, which this one would be refused)."""
    from ..config.validate import typed
    from ..runs import code_record, run_folder
    from ..runs.experiment import Record
    from ..runs.lock import holder

    run_folder.check_owned(folder)
    if not folder.exists():
        return "new", 0
    running = holder(folder)
    if running is not None:  # the run would be refused: the folder is in use
        return f"running now ({running}): refused", T
    composed = config()
    cfg = typed(composed)
    held = run_folder.read(folder)
    start = run_folder.resume_point(cfg, Record.of(composed), held)
    if start is True:
        why = code_record.stale(held.code, cfg)
        return (
            f"stale: made by other code ({'; '.join(why)}); resume=false re-runs it"
            if why
            else "finished already"
        ), T
    return (f"resumes from round {start.round}", start.round) if start is not None else ("new", 0)


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
    """:func:`check` of every job, taken one at a time: the good ones' :class:`Checked`, and one
    ``fedrun: error: job N (...): why`` line per bad one -- a job that fails a check, or that
    has the folder of an earlier job (the same config twice). A sweep that takes longer than
    :data:`PROGRESS_S` says how far it is, every :data:`PROGRESS_S` seconds."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from .faults import one_line

    first: dict[Path, str]
    references: dict
    good, bad, first, references = [], [], {}, {}
    started = last = time.monotonic()
    for job in listed:
        try:
            state, start = check(job, references)
            earlier = first.setdefault(job.folder, job_name(job, multirun))
            if earlier != job_name(job, multirun):
                raise UserError(f"the same config as {earlier} (both would run in {job.folder})")
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
                f"fedrun: checked {job.num + 1} jobs ({duration(now - started)}; "
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
