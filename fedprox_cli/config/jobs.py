"""The jobs a command would run, each composed as Hydra's launchers compose it (the sweep's
Hydra overrides, then the job's), with its folder, group choices and where it would run: what a
dry run lists and checks, and what a sweep checks before its first job."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from omegaconf import OmegaConf, open_dict

from ..common.containers import as_dict, as_list
from ..common.errors import UserError
from . import extras
from .compose import check_sweep, one_of_a_sweep, sweep_jobs
from .composer import Composer, Job, compose_config, planned, where
from .forms import Composed
from .slurm import check_time_limit
from .validate import resolve

if TYPE_CHECKING:
    from .hydra_private import Hydra


def jobs(overrides: list[str], multirun: bool, config_name: str = "config") -> Iterator[Job]:
    """Every job the command would run, composed one at a time (Hydra must be initialized)."""
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import RunMode

    gh = GlobalHydra.instance().hydra
    assert gh is not None, "Hydra is not initialized"  # by the command or the API
    if not multirun:
        return compose_jobs(gh, config_name, None, [overrides])
    master = compose_config(gh, config_name, overrides, RunMode.MULTIRUN)
    task = sweep_jobs(master)
    if task is None:
        raise UserError(
            "a dry run lists the jobs of Hydra's basic sweeper only; "
            f"this sweep uses {master.hydra.sweeper._target_}"
        )
    return compose_jobs(gh, config_name, master, task)


def planned_folder(cfg: Composed, multirun: bool) -> Path:
    """The folder a job of ``cfg`` runs in as a listing names it (:func:`.composer.planned`)."""
    if multirun:
        return planned(cfg.hydra.sweep) / str(cfg.hydra.sweep.subdir)
    return planned(cfg.hydra.run)


def composer(gh: Hydra, config_name: str, master: Composed | None) -> Composer:
    """The :class:`Composer` of the jobs of sweep ``master`` (None: of one run): the sweep's
    Hydra overrides, unresolved, before each job's."""
    pre = [] if master is None else as_list(master.hydra.overrides.hydra)
    return Composer(gh, config_name, pre, master)


def compose_jobs(
    gh: Hydra,
    config_name: str,
    master: Composed | None,
    task: list[list[str]],
    compose: Composer | None = None,
) -> Iterator[Job]:
    """The jobs of ``task`` (each a list of overrides), composed as the launcher composes them
    (:class:`Composer`): the sweep's (``master``'s) Hydra overrides, then the job's; ``master``
    None: one run. One job at a time, so that memory does not grow with the sweep. A sweep's
    launcher/sweeper must be installed (:func:`extras.check`), a SLURM time limit must leave
    room before its warning (:func:`slurm.check_time_limit`) and its jobs may not batch
    overlapping seeds (:func:`compose.check_sweep`): checked before the first job. ``compose``:
    the :func:`composer` to use (default: a new one)."""
    if master is not None:
        extras.check(master.hydra.runtime.choices)
        check_time_limit(master.hydra.launcher)
        check_sweep(master, task)
        str(
            master.hydra.sweep.dir
        )  # resolved once, as the sweeper does: ${now:} cached for all jobs
    return _composed(gh, config_name, master, task, compose or composer(gh, config_name, master))


def _current(cfg: Composed) -> None:
    """Make ``cfg`` (a job composed whole) Hydra's current config (``${hydra:...}``,
    ``HydraConfig.get()``)."""
    from hydra.core.hydra_config import HydraConfig

    HydraConfig.instance().set_config(cfg)


def _composed(
    gh: Hydra,
    config_name: str,
    master: Composed | None,
    task: list[list[str]],
    compose: Composer,
) -> Iterator[Job]:
    for num, job in enumerate(task):
        made = compose.job(job, num) if master is not None else None
        yield made if made is not None else _whole(gh, config_name, master, job, num, compose)


def _whole(
    gh: Hydra,
    config_name: str,
    master: Composed | None,
    job: list[str],
    num: int,
    compose: Composer,
) -> Job:
    """Job ``num`` (``master`` None: the one run) composed whole."""
    from hydra.types import RunMode

    cfg = (
        compose(job)
        if master is not None
        else compose_config(gh, config_name, list(job), RunMode.RUN)
    )
    if master is not None:
        OmegaConf.copy_cache(from_config=master, to_config=cfg)  # the same ${now:} as the sweep
    with open_dict(cfg):
        cfg.hydra.job.num, cfg.hydra.job.id = num, f"dry_run_{num}"
    _current(cfg)
    h = cfg.hydra
    multirun = master is not None
    folder = Path(str(h.sweep.dir)) / str(h.sweep.subdir) if multirun else Path(str(h.run.dir))
    listed = planned_folder(cfg, multirun)
    choices = dict(h.runtime.choices)
    shown = list(job) if multirun else as_list(h.overrides.task, resolve=False)
    note = None if multirun else one_of_a_sweep(h)
    with open_dict(cfg):
        launcher = cfg.pop("hydra").launcher
    resolved = resolve(cfg)
    placed = where(resolved.values or {}, launcher, num if multirun else None)
    plain = as_dict(cfg, resolve=False)
    return Job(num, shown, folder, choices, plain, resolved, note, placed, listed, cfg)
