"""The jobs a command would run, each composed as Hydra's launchers compose it (the sweep's
Hydra overrides, then the job's), with its folder, group choices and where it would run: what a
dry run lists and checks, and what a sweep checks before its first job."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from ..common.containers import as_dict, as_list
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


class Composer:
    """Each job's config as Hydra's launcher composes it (the sweep's Hydra overrides ``pre``,
    then the job's: ``gh.compose_config``), at the cost of one composition per distinct set of
    config-group choices: jobs that differ in values only (``seed=0..9999``,
    ``algorithm.beta=...``) get a copy of that composition with their value overrides applied
    as Hydra applies them after composing (in order, struct mode), and the Hydra node's record
    of the overrides (``overrides.task``, ``job.override_dirname``) made the job's. A job with
    an override Hydra treats otherwise (a Hydra key, a group, a dict value) is composed whole."""

    def __init__(self, gh, config_name: str, pre: list[str]):
        from hydra.core.override_parser.overrides_parser import OverridesParser

        self.gh, self.config_name, self.pre = gh, config_name, pre
        self.parser = OverridesParser.create()
        self.bases: dict[tuple[str, ...], DictConfig] = {}
        self.base: tuple[str, ...] | None = None  # the last job's base (None: composed whole)

    def _is_value(self, o) -> bool:
        """Whether Hydra applies override ``o`` after composing (``config_overrides``)."""
        return (
            not o.is_hydra_override()
            and not o.is_sweep_override()
            and (
                isinstance(o.value(), dict)
                or not self.gh.config_loader.repository.group_exists(o.key_or_group)
            )
        )

    def __call__(self, job: list[str]) -> DictConfig:
        from hydra._internal.config_loader_impl import ConfigLoaderImpl, get_overrides_dirname
        from hydra.types import RunMode

        parsed = self.parser.parse_overrides(list(job))
        values = [o for o in parsed if self._is_value(o)]
        if not values:
            self.base = None
            return _compose(self.gh, self.config_name, self.pre + list(job), RunMode.RUN)
        key = tuple(str(o.input_line) for o in parsed if not self._is_value(o))  # parsed: set
        self.base = key
        if key not in self.bases:
            self.bases[key] = _compose(self.gh, self.config_name, self.pre + list(key), RunMode.RUN)
        cfg = copy.deepcopy(self.bases[key])
        ConfigLoaderImpl._apply_overrides_to_config(values, cfg)
        h = cfg.hydra
        h.overrides.task = [o.input_line for o in parsed]
        h.job.override_dirname = get_overrides_dirname(
            overrides=parsed,
            kv_sep=h.job.config.override_dirname.kv_sep,
            item_sep=h.job.config.override_dirname.item_sep,
            exclude_keys=h.job.config.override_dirname.exclude_keys,
        )
        return cfg


def jobs(overrides: list[str], multirun: bool, config_name: str = "config") -> Iterator[Job]:
    """Every job the command would run, composed one at a time (Hydra must be initialized)."""
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
    run's own clock and process would name a folder the real command never uses."""
    node = cfg.hydra.sweep if multirun else cfg.hydra.run
    given = as_dict(node)["dir"]
    pattern = str(given)
    for started, placeholder in _STARTED:
        pattern = started.sub(placeholder, pattern)
    with read_write(node), open_dict(node):
        node.dir = pattern
        folder = Path(str(node.dir))
        node.dir = given  # as composed: later jobs of the same base read it
    return folder / str(cfg.hydra.sweep.subdir) if multirun else folder


def compose_jobs(
    gh, config_name: str, master: DictConfig | None, task: list[list[str]]
) -> Iterator[Job]:
    """The jobs of ``task`` (each a list of overrides), composed as the launcher composes them
    (:class:`Composer`): the sweep's (``master``'s) Hydra overrides, then the job's; ``master``
    None: one run. One job at a time, so that memory does not grow with the sweep. A sweep's
    launcher/sweeper must be installed (:func:`extras.check`), a SLURM time limit must leave
    room before its warning (:func:`slurm.check_time_limit`) and its jobs may not batch
    overlapping seeds (:func:`compose.check_sweep`): checked before the first job."""
    pre = [] if master is None else as_list(master.hydra.overrides.hydra)  # unresolved
    if master is not None:
        extras.check(master.hydra.runtime.choices)
        check_time_limit(master.hydra.launcher)
        check_sweep(master, task)
        str(
            master.hydra.sweep.dir
        )  # resolved once, as the sweeper does: ${now:} cached for all jobs
    return _composed(gh, config_name, master, task, Composer(gh, config_name, pre))


def _current(cfg: DictConfig, same_base: bool) -> None:
    """Make ``cfg`` Hydra's current config (``${hydra:...}``, ``HydraConfig.get()``): for a job
    of the same base as the one before, the fields a job's value overrides change are updated
    in place (``set_config`` copies the whole Hydra node, ~10 ms a job)."""
    from hydra.core.hydra_config import HydraConfig

    hc = HydraConfig.instance()
    if not same_base or hc.cfg is None:
        hc.set_config(cfg)
        return
    h, mine = cast(DictConfig, hc.cfg).hydra, cfg.hydra  # declared as HydraConf: the whole config
    with read_write(h):
        h.job.num, h.job.id = mine.job.num, mine.job.id
        h.job.override_dirname = mine.job.override_dirname
        h.overrides.task = as_list(mine.overrides.task)
    h._set_parent(cfg)  # interpolations from the Hydra node into this job's config


def _composed(gh, config_name, master, task, compose: Composer) -> Iterator[Job]:
    from hydra.types import RunMode

    last = None
    for num, job in enumerate(task):
        cfg = (
            compose(job)
            if master is not None
            else _compose(gh, config_name, list(job), RunMode.RUN)
        )
        if master is not None:
            OmegaConf.copy_cache(from_config=master, to_config=cfg)  # the same ${now:} as the sweep
        with open_dict(cfg):
            cfg.hydra.job.num, cfg.hydra.job.id = num, f"dry_run_{num}"
        base = compose.base if master is not None else None
        _current(cfg, base is not None and base == last)
        last = base
        h = cfg.hydra
        multirun = master is not None
        folder = Path(str(h.sweep.dir)) / str(h.sweep.subdir) if multirun else Path(str(h.run.dir))
        listed = planned_folder(cfg, multirun)
        choices = dict(h.runtime.choices)
        shown = list(job) if multirun else as_list(h.overrides.task)
        note = None if multirun else one_of_a_sweep(h)
        placed = where(cfg, h.launcher, num if multirun else None)
        with open_dict(cfg):
            del cfg["hydra"]
        yield Job(num, shown, folder, cfg, choices, note, placed, listed)
