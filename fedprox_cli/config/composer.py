"""One job's record (:class:`Job`: its overrides, folder, config, where it would run) and the
:class:`Composer` that makes a sweep's jobs as Hydra's launchers compose them, at the cost of
one composition per distinct set of config-group choices (:mod:`.jobs` lists them)."""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from ..common.containers import as_dict
from . import jobdir
from .forms import Composed
from .jobdir import identity_of
from .validate import Resolved, resolve

if TYPE_CHECKING:
    from hydra.core.override_parser.types import Override
    from hydra.types import RunMode

    from .hydra_private import ConfigLoaderImpl, Hydra


@dataclass(eq=False)
class Job:
    num: int
    overrides: list[str]
    folder: Path
    choices: dict[str, Any]
    plain: dict[str, Any]  # the job's config as composed (no hydra node), interpolations as typed
    resolved: Resolved  # its values resolved, or why they cannot be
    note: str | None = (
        None  # a run without -m of a preset that defines a sweep (compose.one_of_a_sweep)
    )
    where: str = ""  # the device it would run on, and why (:func:`where`)
    shown: Path | None = None  # the folder as a listing names it (:func:`.jobs.planned_folder`)
    composed: Composed | None = None  # Hydra's composition itself, where the job was composed

    @property
    def cfg(self) -> Composed:
        """The job's config (without the hydra node): Hydra's composition where the job was
        composed whole, else made from :attr:`plain` (the same values)."""
        return self.composed if self.composed is not None else OmegaConf.create(self.plain)


def where(values: dict[str, Any], launcher: DictConfig, num: int | None) -> str:
    """Where a job (number ``num``; None: a single run; ``values``: its config, resolved) would
    run: the GPU share Ray would give it under ``hydra/launcher=ray`` (Ray places it when it
    starts), else the device by fedrun's rule (:func:`fedprox_cli.engine.device.placement`) on
    this machine's visible GPUs."""
    from ..engine.device import placement

    device = str(values.get("device", "auto"))
    if str(launcher.get("_target_", "")).endswith(".RayLauncher"):
        remote = launcher.ray.get("remote") or {}
        gpus = 0 if device == "cpu" else remote.get("num_gpus", "auto")
        return f"Ray: {gpus} GPU, {remote.get('num_cpus', 1)} CPU" + (
            f" ({'cuda:0' if device in ('auto', 'cuda') else device} of what Ray gives it)"
            if gpus not in (0, None)
            else ""
        )
    return placement(device, num)


def compose_config(gh: Hydra, config_name: str, overrides: list[str], mode: RunMode) -> Composed:
    return gh.compose_config(config_name, overrides, run_mode=mode, with_log_configuration=False)


# The parts of hydra.sweep.dir that are the same for every job of a sweep: the time and process
# it started in (cached), the environment, and the group choices (the same for a base's jobs).
_PER_SWEEP_RESOLVERS = {"now", "fedrun.pid", "fedrun.under", "oc.env"}
_RESOLVER = re.compile(r"\$\{\s*([\w.]+)\s*:")
_NODE = re.compile(r"\$\{\s*([\w.]+)\s*\}")
_INTO_HYDRA = re.compile(r"\$\{[^}]*hydra(?!:)")  # ${hydra.job.num}: not a run's (Hydra drops it)
_READS_HYDRA = re.compile(r"\$\{\s*hydra:")  # ${hydra:job.num}: the job's Hydra node
_JOB_DIR = "${fedrun.job_dir:}"


def _per_sweep(pattern: str) -> bool:
    """Whether a folder pattern resolves alike for every job of one base."""
    return all(r in _PER_SWEEP_RESOLVERS for r in _RESOLVER.findall(pattern)) and all(
        n.startswith("hydra.runtime.choices.") for n in _NODE.findall(pattern)
    )


def _interpolations(plain: object) -> Iterator[str]:
    if isinstance(plain, dict):
        for v in plain.values():
            yield from _interpolations(v)
    elif isinstance(plain, list):
        for v in plain:
            yield from _interpolations(v)
    elif isinstance(plain, str) and "${" in plain:
        yield plain


class _Base:
    """A composition the jobs that differ from it in values only are made from: Hydra's
    composition itself (copied for a job composed whole), and a scratch copy that each such
    job's value overrides are applied to in place (Hydra's own function), the keys the job
    before set put back first. ``quick``: whether its jobs can be made from the scratch --
    their folder is the sweep folder and ``${fedrun.job_dir:}`` (the folder's pattern read
    alike for all of them, :func:`_per_sweep`), and its config reads nothing of the Hydra node
    (which a run's config has not) but through ``${hydra:...}``. Its jobs' record of their
    overrides in Hydra's node (``overrides.task``, ``job.override_dirname``) is written only
    where a ``${hydra:...}`` of the config or of the job may read it (``reads_hydra``);
    ``job.num``, which places a job on a GPU, always."""

    def __init__(self, cfg: Composed, master: Composed | None):
        from hydra.core.hydra_config import HydraConfig

        self.cfg = cfg
        if master is not None:
            OmegaConf.copy_cache(from_config=master, to_config=cfg)  # the sweep's ${now:}
        self.scratch = copy.deepcopy(cfg)
        as_typed = as_dict(cfg, resolve=False)
        h = as_typed.pop("hydra")
        self.plain = as_typed
        self.literal = {  # the top-level values with no interpolation: resolved as they are
            k: v for k, v in as_typed.items() if not any(True for _ in _interpolations(v))
        }
        self.set: set[str] = set()  # the keys the last job set in the scratch copy
        self.quick = (
            str(h["sweep"]["subdir"]) == _JOB_DIR
            and _per_sweep(str(h["sweep"]["dir"]))
            and not any(_INTO_HYDRA.search(s) for s in _interpolations(as_typed))
        )
        self.reads_hydra = any(_READS_HYDRA.search(s) for s in _interpolations(as_typed))
        self.choices = dict(h["runtime"]["choices"])
        self.dirname = h["job"]["config"]["override_dirname"]
        self.launcher = cfg.hydra.launcher
        if self.quick:
            self.sweep_dir = Path(str(self.scratch.hydra.sweep.dir))
            self.listed_dir = planned(self.scratch.hydra.sweep)
        hc = HydraConfig.instance()
        previous, hc.cfg = hc.cfg, None
        hc.set_config(self.scratch)  # its copy of the Hydra node, into the scratch's config
        self.current, hc.cfg = hc.cfg, previous

    def at(self, key: str) -> Any:  # a config value
        """The value of the dotted ``key`` in :attr:`plain` (KeyError: not a value there)."""
        node = self.plain
        for part in key.split("."):
            node = node[part]
        if isinstance(node, (dict, list)):
            raise KeyError(key)
        return node


def _with(plain: dict[str, Any], key: str, value: object) -> dict[str, Any]:
    """``plain`` with the dotted ``key`` set to ``value``: the dicts on its path copied, the
    rest shared."""
    head, _, rest = key.partition(".")
    return {**plain, head: _with(plain[head], rest, value) if rest else value}


class Composer:
    """Each job's config as Hydra's launcher composes it (the sweep's Hydra overrides ``pre``,
    then the job's: ``gh.compose_config``), at the cost of one composition per distinct set of
    config-group choices: jobs that differ in values only (``seed=0..9999``,
    ``algorithm.beta=...``) are that composition with their value overrides applied as Hydra
    applies them after composing (in order, struct mode), and the Hydra node's record of the
    overrides (``overrides.task``, ``job.override_dirname``) made the job's. :meth:`__call__`
    gives the whole config (a copy of the composition); :meth:`job` a sweep's job with what a
    dry run reads of it, made without a copy where every value override sets a value the
    composition has (``seed=3``, ``algorithm.beta=0.5``): applied to the base's scratch copy,
    the values resolved there, its folder named from them (:func:`jobdir.name`). A job with
    an override Hydra treats otherwise (a Hydra key, a group, a dict value) is composed whole."""

    def __init__(self, gh: Hydra, config_name: str, pre: list[str], master: Composed | None = None):
        from hydra.core.override_parser.overrides_parser import OverridesParser

        self.gh, self.config_name, self.pre, self.master = gh, config_name, pre, master
        self.parser = OverridesParser.create()
        self.bases: dict[tuple[str, ...], _Base] = {}
        self._parse_one = functools.lru_cache(maxsize=4096)(self._parse_line)
        self._groups: dict[str, bool] = {}  # whether a key names a config group

    def _parse_line(self, line: str) -> Override:
        return self.parser.parse_overrides([line])[0]

    def _is_value(self, o: Override) -> bool:
        """Whether Hydra applies override ``o`` after composing (``config_overrides``)."""
        return (
            not o.is_hydra_override()
            and not o.is_sweep_override()
            and (isinstance(o.value(), dict) or not self._group(o.key_or_group))
        )

    def _group(self, key: str) -> bool:
        if key not in self._groups:
            loader = cast("ConfigLoaderImpl", self.gh.config_loader)
            self._groups[key] = loader.repository.group_exists(key)
        return self._groups[key]

    def sets_hydra(self, job: list[str]) -> bool:
        """Whether job ``job`` overrides a Hydra key (``hydra.*``)."""
        return any(self._parse_one(line).is_hydra_override() for line in job)

    def _split(self, job: list[str]) -> tuple[list[Override], list[Override], tuple[str, ...]]:
        parsed = [self._parse_one(line) for line in job]
        values = [o for o in parsed if self._is_value(o)]
        key = tuple(cast(str, o.input_line) for o in parsed if not self._is_value(o))
        return parsed, values, key

    def _base(self, key: tuple[str, ...]) -> _Base:
        """The base of the group choices (and Hydra overrides) ``key``, composed once."""
        if key not in self.bases:
            from hydra.types import RunMode

            composed = compose_config(self.gh, self.config_name, self.pre + list(key), RunMode.RUN)
            self.bases[key] = _Base(composed, self.master)
        return self.bases[key]

    def _dirname(self, parsed: list[Override], base: _Base) -> str:
        from .hydra_private import get_overrides_dirname

        return get_overrides_dirname(
            overrides=parsed,
            kv_sep=base.dirname["kv_sep"],
            item_sep=base.dirname["item_sep"],
            exclude_keys=base.dirname["exclude_keys"],
        )

    def __call__(self, job: list[str]) -> Composed:
        from hydra.types import RunMode

        from .hydra_private import ConfigLoaderImpl

        parsed, values, key = self._split(job)
        if not values:
            return compose_config(self.gh, self.config_name, self.pre + list(job), RunMode.RUN)
        base = self._base(key)
        cfg = copy.deepcopy(base.cfg)
        ConfigLoaderImpl._apply_overrides_to_config(values, cfg)
        h = cfg.hydra
        h.overrides.task = [cast(str, o.input_line) for o in parsed]
        h.job.override_dirname = self._dirname(parsed, base)
        return cfg

    def job(self, job: list[str], num: int) -> Job | None:
        """Job ``num`` of a sweep made from its base's scratch copy (class docstring); None
        where it must be composed whole."""
        from hydra.core.hydra_config import HydraConfig
        from hydra.core.override_parser.types import OverrideType

        from .hydra_private import ConfigLoaderImpl

        parsed, values, key = self._split(job)
        if not values:
            return None
        base = self._base(key)
        if not base.quick:
            return None
        for o in values:
            if o.type != OverrideType.CHANGE or isinstance(o.value(), (dict, list)):
                return None
            if isinstance(v := o.value(), str) and _INTO_HYDRA.search(v):
                return None
            try:
                base.at(o.key_or_group)
            except (KeyError, TypeError):
                return None
        mine = {o.key_or_group for o in values}
        scratch = base.scratch
        for k in base.set - mine:  # the last job's, put back
            OmegaConf.update(scratch, k, base.at(k), merge=True)
        base.set = mine
        try:
            ConfigLoaderImpl._apply_overrides_to_config(values, scratch)
        except Exception:  # noqa: BLE001 -- composed whole, it raises Hydra's own error
            return None
        plain = base.plain
        for k in mine:
            plain = _with(plain, k, _stored(scratch, k))
        task = [cast(str, o.input_line) for o in parsed]
        hc = HydraConfig.instance()
        hc.cfg = base.current
        h = cast(DictConfig, base.current).hydra
        with read_write(h):
            h.job.num, h.job.id = num, f"dry_run_{num}"  # the GPU a job takes: its number
            if base.reads_hydra or any(_READS_HYDRA.search(str(o.value())) for o in values):
                h.job.override_dirname = self._dirname(parsed, base)
                h.overrides.task = task
        tops = {k.split(".")[0] for k in mine}
        given = {k: v for k, v in base.literal.items() if k not in tops}
        resolved = resolve(scratch, ("hydra",), given)
        digest = None if resolved.values is None else identity_of(resolved.values, base.choices)
        name = jobdir.name(task, digest)
        return Job(
            num,
            list(job),
            base.sweep_dir / name,
            base.choices,
            plain,
            resolved,
            where=where(resolved.values or {}, base.launcher, num),
            shown=base.listed_dir / name,
        )


def _stored(cfg: DictConfig, key: str) -> Any:  # a config value, an interpolation as typed
    """The value of the dotted ``key`` as ``cfg`` holds it (an interpolation as typed)."""
    parent, _, leaf = key.rpartition(".")
    node = OmegaConf.select(cfg, parent) if parent else cfg
    return (
        as_dict(node, resolve=False)[leaf] if OmegaConf.is_interpolation(node, leaf) else node[leaf]
    )


_STARTED = (
    (re.compile(r"\$\{now:[^}]*\}"), "<time>"),
    (re.compile(r"\$\{fedrun\.pid:\}"), "<pid>"),
)


def planned(node: DictConfig) -> Path:
    """``node.dir`` (of ``hydra.sweep`` or ``hydra.run``) as a listing names it: the parts that
    depend on when and in which process the command starts (``${now:...}``,
    ``${fedrun.pid:}``) read ``<time>`` and ``<pid>`` -- a dry run's own clock and process
    would name a folder the real command never uses."""
    given = as_dict(node, resolve=False)["dir"]
    pattern = str(given)
    for started, placeholder in _STARTED:
        pattern = started.sub(placeholder, pattern)
    with read_write(node), open_dict(node):
        node.dir = pattern
        folder = Path(str(node.dir))
        node.dir = given  # as composed: later jobs of the same base read it
    return folder
