"""``fedrun ... dry_run=true`` and ``fedrun -m ... --cfg job``: what a run or a sweep would do,
without doing it. Handled in :func:`cli.main` before Hydra starts (Hydra's multirun creates the
sweep folder before any job runs), with Hydra's compose API and the basic sweeper's own job
expansion (:func:`compose.sweep_jobs`, presets' ``hydra.sweeper.params`` included). Each job's
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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from .. import CONF_DIR
from ..common import streams
from ..common.errors import EXIT, UserError
from ..config import extras
from ..config.slurm import check_time_limit
from .compose import one_of_a_sweep
from .jobtable import align, differing

_DRY = re.compile(r"^\+{0,2}dry_run=(?P<value>.*)$")


def requested(overrides: list[str]) -> bool:
    """Whether the command line sets ``dry_run`` to anything but false (a value that is not a
    boolean is then refused by the validation, before anything runs)."""
    values = [m["value"].strip() for m in map(_DRY.match, overrides) if m]
    return bool(values) and values[-1].lower() != "false"


@dataclass
class Job:
    num: int
    overrides: list[str]
    folder: Path
    cfg: DictConfig  # the job's config, without the hydra node
    choices: dict
    note: str | None = (
        None  # a run without -m of a preset that defines a sweep (compose.one_of_a_sweep)
    )
    where: str = ""  # the device it would run on, and why (:func:`where`)
    shown: Path | None = None  # the folder as a listing names it (:func:`planned_folder`)


def where(cfg: DictConfig, launcher: DictConfig, num: int | None) -> str:
    """Where a job (number ``num``; None: a single run) would run: the GPU share Ray would give
    it under ``hydra/launcher=ray`` (Ray places it when it starts), else the device by fedrun's
    rule (:func:`fedprox_cli.engine.device.placement`) on this machine's visible GPUs."""
    from ..engine.device import placement

    device = str(cfg.get("device", "auto"))
    if str(launcher.get("_target_", "")).endswith(".RayLauncher"):
        remote = launcher.ray.get("remote") or {}
        gpus = 0 if device == "cpu" else remote.get("num_gpus", "auto")
        return f"Ray: {gpus} GPU, {remote.get('num_cpus', 1)} CPU" + (
            f" ({'cuda:0' if device in ('auto', 'cuda') else device} of what Ray gives it)"
            if gpus not in (0, None)
            else ""
        )
    return placement(device, num)


def _compose(gh, config_name: str, overrides: list[str], mode):
    return gh.compose_config(config_name, overrides, run_mode=mode, with_log_configuration=False)


def jobs(overrides: list[str], multirun: bool, config_name: str = "config") -> list[Job]:
    """Every job the command would run, composed (Hydra must be initialized)."""
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import RunMode

    from .compose import sweep_jobs

    gh = GlobalHydra.instance().hydra
    if not multirun:
        return compose_jobs(gh, config_name, None, [overrides])
    master = _compose(gh, config_name, overrides, RunMode.MULTIRUN)
    task = sweep_jobs(master)
    if task is None:
        raise UserError(
            "a dry run lists the jobs of Hydra's basic sweeper only; "
            f"this sweep uses {master.hydra.sweeper._target_}"
        )
    return compose_jobs(gh, config_name, master, task)


def compose_jobs(
    gh, config_name: str, master: DictConfig | None, task: list[list[str]]
) -> list[Job]:
    """The jobs of ``task`` (each a list of overrides), composed as the launcher composes them:
    the sweep's (``master``'s) Hydra overrides, then the job's; ``master`` None: one run.
    A sweep's launcher/sweeper must be installed (:func:`extras.check`), a SLURM time limit
    must leave room before its warning (:func:`slurm.check_time_limit`) and its jobs may not
    batch overlapping seeds (:func:`seeds.check_sweep`)."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from ..runs.seeds import check_sweep

    pre = (
        [] if master is None else OmegaConf.to_container(master.hydra.overrides.hydra)
    )  # unresolved
    if master is not None:
        extras.check(master.hydra.runtime.choices)
        check_time_limit(master.hydra.launcher)
        check_sweep(master, task)
        str(
            master.hydra.sweep.dir
        )  # resolved once, as the sweeper does: ${now:} cached for all jobs
    out = []
    for num, job in enumerate(task):
        cfg = _compose(gh, config_name, pre + list(job), RunMode.RUN)  # as Hydra's launchers do
        if master is not None:
            OmegaConf.copy_cache(from_config=master, to_config=cfg)  # the same ${now:} as the sweep
        with open_dict(cfg):
            cfg.hydra.job.num, cfg.hydra.job.id = num, f"dry_run_{num}"
        HydraConfig.instance().set_config(cfg)
        h = cfg.hydra
        multirun = master is not None
        folder = Path(str(h.sweep.dir)) / str(h.sweep.subdir) if multirun else Path(str(h.run.dir))
        shown_folder = planned_folder(cfg, multirun)
        choices = dict(h.runtime.choices)
        shown = list(job) if multirun else OmegaConf.to_container(h.overrides.task, resolve=False)
        note = None if multirun else one_of_a_sweep(h)
        placed = where(cfg, h.launcher, num if multirun else None)
        with open_dict(cfg):
            del cfg["hydra"]
        out.append(Job(num, shown, folder, cfg, choices, note, placed, shown_folder))
    return out


_STARTED = (
    (re.compile(r"\$\{now:[^}]*\}"), "<time>"),
    (re.compile(r"\$\{fedrun\.pid:\}"), "<pid>"),
)


def planned_folder(cfg: DictConfig, multirun: bool) -> Path:
    """The folder a job of ``cfg`` runs in as a listing names it: the parts of
    ``hydra.sweep.dir`` (``hydra.run.dir``) that depend on when and in which process the
    command starts (``${now:...}``, ``${fedrun.pid:}``) read ``<time>`` and ``<pid>`` -- the
    dry run's own clock and process would name a folder the real command never uses.
    (Changes ``cfg``'s hydra node: called last on it.)"""
    node = cfg.hydra.sweep if multirun else cfg.hydra.run
    pattern = OmegaConf.to_container(node, resolve=False)["dir"]
    for started, placeholder in _STARTED:
        pattern = started.sub(placeholder, str(pattern))
    with read_write(node), open_dict(node):
        node.dir = pattern
    folder = Path(str(node.dir))
    return folder / str(cfg.hydra.sweep.subdir) if multirun else folder


def work(cfg: DictConfig, start: int | dict[int, int] = 0) -> tuple[float, int]:
    """(client steps, evaluations) of a run's rounds ``start``..T: ``T*K*n*participation`` and
    ``ceil(T/eval_every) + 1`` from round 0 (round 0 is evaluated too); summed over the runs
    of ``seeds=R`` when ``start`` counts them by start round ({round: runs})."""
    T, e, per_round = cfg.T, cfg.eval_every, cfg.K * cfg.n * cfg.participation
    steps = evals = 0
    for s, runs in start.items() if isinstance(start, dict) else [(start, 1)]:
        if s < T:
            steps += (T - s) * per_round * runs
            evals += (T // e - s // e + (T % e != 0) + (s == 0)) * runs
    return steps, evals


def check(job: Job, references: dict | None = None) -> tuple[str, int | dict[int, int]]:
    """Validate a job like a real run (:func:`experiment.validate`, the folder checks); returns
    what the run would do in its folder and the round it would start from (with ``seeds=R``:
    the state of each ``seed_<s>/`` run and their start rounds counted, :func:`_batch`). Raises
    :class:`UserError` (or Hydra's errors). ``references``: reference configs by group choices,
    reused across a sweep's jobs."""
    from ..runs import experiment, seeds
    from .compose import reference_config

    references = {} if references is None else references
    key = tuple(sorted((g, str(c)) for g, c in job.choices.items()))
    if key not in references:
        references[key] = reference_config(job.choices)
    extras.check(job.choices)
    experiment.validate(job.cfg, references[key])
    if job.cfg.seeds == 1:
        return _state(lambda: job.cfg, job.folder, job.cfg.T)
    seeds.check_container(job.folder)
    return _batch(job)


def _batch(job: Job) -> tuple[str, dict[int, int]]:
    """The state of each run of a ``seeds=R`` job and their start rounds counted: the seeds whose
    folder exists are checked one by one, the others are new runs (no folder: nothing to check),
    so the cost grows with the runs on disk, not with R."""
    from ..runs import seeds

    cfg, first, R = job.cfg, job.cfg.seed, job.cfg.seeds
    on_disk = []
    if job.folder.is_dir():
        for p in job.folder.iterdir():
            number = p.name.removeprefix(seeds.SEED_PREFIX)
            if (
                p.name.startswith(seeds.SEED_PREFIX)
                and number.isdigit()
                and first <= int(number) < first + R
            ):
                on_disk.append(int(number))
    said, starts, last = [], {}, first
    for s in sorted(on_disk):
        if s > last:
            said.append(_new(last, s - 1))
        state, start = _state(
            lambda s=s: seeds.with_seed(cfg, s), job.folder / f"{seeds.SEED_PREFIX}{s}", cfg.T
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
    from ..runs.lock import holder

    run_folder.check_owned(folder)
    if not folder.exists():
        return "new", 0
    running = holder(folder)
    if running is not None:  # the run would be refused: the folder is in use
        return f"running now ({running}): refused", T
    cfg = config()
    start = run_folder.resume_point(cfg, folder)
    if start is True:
        why = code_record.stale(folder, typed(cfg))
        return (
            f"stale: made by other code ({'; '.join(why)}); resume=false re-runs it"
            if why
            else "finished already"
        ), T
    return (f"resumes from round {start.round}", start.round) if start is not None else ("new", 0)


def check_jobs(
    listed: list[Job], multirun: bool
) -> tuple[list[tuple[Job, str, int | list[int]]], list[str]]:
    """:func:`check` of every job: (job, state, start) of the good ones, and one
    ``fedrun: error: job N (...): why`` line per bad one -- a job that fails a check, or that
    has the folder of an earlier job (the same config twice)."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from .faults import one_line

    good, bad, first, references = [], [], {}, {}
    for job in listed:
        try:
            state, start = check(job, references)
            earlier = first.setdefault(job.folder, job)
            if earlier is not job:
                raise UserError(
                    f"the same config as {job_name(earlier, multirun)} "
                    f"(both would run in {job.folder})"
                )
            good.append((job, state, start))
        except (UserError, HydraException, OmegaConfBaseException, ValueError, OSError) as e:
            bad.append(
                f"fedrun: error: {job_name(job, multirun) + ': ' if multirun else ''}{one_line(e)}"
            )
    return good, bad


def job_name(job: Job, multirun: bool) -> str:
    return f"job {job.num} ({' '.join(job.overrides) or 'no overrides'})" if multirun else "the run"


def dry_run(overrides: list[str], multirun: bool, show_cfg: bool = False) -> int:
    """List, validate and estimate every job (``show_cfg``: print each job's resolved config
    instead of validating); return the exit code."""
    from hydra import initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

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
            rows = [["job", "folder", "client steps", "evaluations", "device", "state"]]
            total_steps = total_evals = 0
            for job, state, start in checked:
                steps, evals = work(job.cfg, start)
                total_steps, total_evals = total_steps + steps, total_evals + evals
                rows.append(
                    [str(job.num), str(job.shown), f"{steps:,.0f}", str(evals), job.where, state]
                )
    except (UserError, HydraException, OmegaConfBaseException, ValueError, OSError) as e:
        streams.trace(e)
        streams.err(f"fedrun: error: {one_line(e)}")
        return EXIT["error"]
    n = len(listed)
    varied = differing([job.overrides for job in listed])
    common = [o for o in listed[0].overrides if o not in varied[0]]
    streams.out(f"dry run: {n} job{'s' if n != 1 else ''}, every config valid; nothing was written")
    if listed[0].note:
        streams.out(f"note: {listed[0].note}")
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
    return EXIT["finished"]
