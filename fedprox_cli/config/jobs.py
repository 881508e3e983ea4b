"""The jobs a command would run, each composed as Hydra's launchers compose it (the sweep's
Hydra overrides, then the job's), with its folder, group choices and where it would run: what a
dry run lists and checks, and what a sweep checks before its first job."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from ..common.errors import UserError
from . import extras
from .compose import check_sweep, one_of_a_sweep, sweep_jobs
from .slurm import check_time_limit


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


_STARTED = (
    (re.compile(r"\$\{now:[^}]*\}"), "<time>"),
    (re.compile(r"\$\{fedrun\.pid:\}"), "<pid>"),
)


def planned_folder(cfg: DictConfig, multirun: bool) -> Path:
    """The folder a job of ``cfg`` runs in as a listing names it: the parts of
    ``hydra.sweep.dir`` (``hydra.run.dir``) that depend on when and in which process the
    command starts (``${now:...}``, ``${fedrun.pid:}``) read ``<time>`` and ``<pid>`` -- a dry
    run's own clock and process would name a folder the real command never uses.
    (Changes ``cfg``'s hydra node: called last on it.)"""
    node = cfg.hydra.sweep if multirun else cfg.hydra.run
    pattern = OmegaConf.to_container(node, resolve=False)["dir"]
    for started, placeholder in _STARTED:
        pattern = started.sub(placeholder, str(pattern))
    with read_write(node), open_dict(node):
        node.dir = pattern
    folder = Path(str(node.dir))
    return folder / str(cfg.hydra.sweep.subdir) if multirun else folder


def compose_jobs(
    gh, config_name: str, master: DictConfig | None, task: list[list[str]]
) -> list[Job]:
    """The jobs of ``task`` (each a list of overrides), composed as the launcher composes them:
    the sweep's (``master``'s) Hydra overrides, then the job's; ``master`` None: one run.
    A sweep's launcher/sweeper must be installed (:func:`extras.check`), a SLURM time limit
    must leave room before its warning (:func:`slurm.check_time_limit`) and its jobs may not
    batch overlapping seeds (:func:`compose.check_sweep`)."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

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
