"""Hydra composition that runs, dry runs, sweeps and the Python API share: a config from
overrides, a config's reference (its group choices alone), a basic sweep's jobs (and the check
that they do not batch overlapping seeds), and what a run records of the command (``.hydra/``
files, the command line rebuilt from Hydra's overrides)."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any

from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ..common import run_files
from ..common.containers import as_dict, as_list
from ..common.errors import UserError
from ..common.package import CONF_DIR
from .forms import Composed

if TYPE_CHECKING:
    from hydra.conf import HydraConf


def compose(overrides: list[str] | tuple[str, ...] = ()) -> Composed:
    """The run config ``fedrun`` would compose from these overrides (for notebooks and tests),
    e.g. ``experiment.build(compose(["dataset=digits", "K=5"]))``."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    from . import plugin_defaults, resolvers

    resolvers.register()
    plugin_defaults.store(list(overrides))
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        return hydra_compose("config", overrides=list(overrides))


def reference_config(choices: dict[str, Any]) -> Composed | None:
    """The config of the same group choices without any other override: what a key's default
    and the set of valid keys are (:func:`config.validate.check_keys`)."""
    from hydra import compose

    try:
        return compose(
            "config",
            overrides=[
                f"{g}={c}"
                for g, c in choices.items()
                if c is not None and not g.startswith("hydra")
            ],
        )
    except (HydraException, OmegaConfBaseException):
        return None


def reference_for(
    cfg: Composed,
    choices: dict[str, Any],
    overrides: list[str],
    before_overrides: Composed | None = None,
) -> Composed | None:
    """:func:`reference_config` for a config composed with ``overrides``, without composing
    again: ``cfg`` itself where it cannot differ in what the validation reads of it (the keys,
    and the values of the config groups): when no override adds or deletes a key (``+``, ``~``,
    ``@``) or sets a key inside a config group (``algorithm.beta=...``). Otherwise
    ``before_overrides`` where given (the same composition before the overrides' values were
    applied: :func:`compose_once.reference`), which is the reference unless an override
    deletes something (``~``) or sets a config group to null (the reference then has the
    group's default); else the reference composed anew."""
    keys = [o.split("=", 1)[0] for o in overrides]
    if not any(
        k.startswith(("+", "~")) or "@" in k or ("." in k and k.split(".")[0] in choices)
        for k in keys
    ):
        return cfg
    deselects = any(
        k.startswith("~") or (k.lstrip("+") in choices and choices[k.lstrip("+")] is None)
        for k in keys
    )
    return (
        before_overrides
        if before_overrides is not None and not deselects
        else reference_config(choices)
    )


def command(hc: DictConfig | HydraConf) -> str:
    """The user's command for this run, rebuilt from Hydra's overrides (not ``sys.argv``, which
    is a launcher's own under submitit), with where its configs came from (``--config-dir``,
    ``hydra.searchpath``), so that it re-runs as recorded."""
    config_dir = [
        f"{s.schema}://{s.path}" if s.schema != "file" else s.path
        for s in hc.runtime.config_sources
        if s.provider == "command-line"
    ]
    searchpath = [
        o for o in as_list(hc.overrides.hydra) if o.lstrip("+").startswith("hydra.searchpath=")
    ]
    return " ".join(
        [
            "fedrun",
            *(f"--config-dir {shlex.quote(d)}" for d in config_dir),
            *map(shlex.quote, [*searchpath, *overrides(hc)]),
        ]
    )


def overrides(hc: DictConfig | HydraConf) -> list[str]:
    """The command line's overrides as typed (an interpolation in one, ``a=${calc:1/0}``, is
    text here: the run's validation resolves it and refuses what fails)."""
    return as_list(hc.overrides.task)


def hydra_files(cfg: Composed, hc: DictConfig | HydraConf) -> dict[str, str]:
    """Hydra's ``.hydra/`` files (its ``output_subdir`` is off: the runner writes them once the
    run has started, so a refused re-run leaves the folder's record alone)."""
    return {
        run_files.CONFIG: OmegaConf.to_yaml(cfg),
        run_files.HYDRA_RECORD: OmegaConf.to_yaml(OmegaConf.create({"hydra": hc})),
        run_files.OVERRIDES: OmegaConf.to_yaml(overrides(hc)),
    }


def sweep_jobs(config: Composed) -> list[list[str]] | None:
    """The overrides of every job of a basic-sweeper multirun (the sweeper's own expansion of
    ``hydra.sweeper.params`` and the command line), or None for other sweepers."""
    if not str(config.hydra.sweeper._target_).endswith("BasicSweeper"):
        return None
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from .hydra_private import BasicSweeper

    as_typed = as_dict(config.hydra)  # an interpolation stays one
    params = [f"{k}={v}" for k, v in (as_typed["sweeper"].get("params") or {}).items()]
    overrides = OverridesParser.create().parse_overrides(params + as_typed["overrides"]["task"])
    return BasicSweeper.split_arguments(overrides, None)[0]


def one_of_a_sweep(hc: DictConfig) -> str | None:
    """For a run without ``-m`` of a preset whose ``hydra.sweeper.params`` define a sweep
    (``hc``: its Hydra node): the note that it runs one config and what ``-m`` would run; None
    for any other run."""
    params = OmegaConf.select(hc, "sweeper.params")
    if not params:
        return None
    jobs = sweep_jobs(OmegaConf.create({"hydra": hc}))
    what = (
        f"{len(jobs)} jobs" if jobs else f"the sweep of hydra.sweeper.params ({', '.join(params)})"
    )
    return (
        f"this preset defines a sweep over {', '.join(params)}; without -m this runs one config "
        f"(the preset's own values); `fedrun -m ...` with the same arguments runs its {what}"
    )


def check_sweep(composed: Composed, jobs: list[list[str]] | None) -> None:
    """Refuse a sweep over ``seed`` whose jobs batch seeds (``seeds=R`` > 1): each job would run
    seed..seed+R-1, so the jobs' seeds would overlap (0-2, 1-3, 2-4): duplicate runs. ``jobs``:
    each job's overrides (None: a sweeper that chooses them itself)."""

    def value(job: list[str], key: str, default: object) -> object:
        return next(
            (o.split("=", 1)[1] for o in reversed(job) if o.lstrip("+").split("=", 1)[0] == key),
            default,
        )

    swept = sorted({value(job, "seed", None) for job in jobs or []} - {None}, key=str)
    batched = {str(value(job, "seeds", composed.seeds)) for job in jobs or []} - {"1"}
    if len(swept) > 1 and batched:
        raise UserError(
            f"seeds={min(batched)} with a sweep over seed ({','.join(map(str, swept))}) would run "
            f"overlapping seeds in its jobs; give one seed (seed=0 seeds=R runs seeds "
            f"0..R-1 in each job) or sweep seed without seeds"
        )


def option_file(group: str) -> str | None:
    """The YAML the chosen option of ``group`` was composed from (``--config-dir DIR``'s
    ``DIR/algorithm/mine.yaml``, or fedrun's own), where Hydra runs the job; else None."""
    from pathlib import Path

    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return None
    hc = HydraConfig.get()
    option = hc.runtime.choices.get(group)
    for source in hc.runtime.config_sources:
        if option and source.schema == "file":
            path = Path(source.path) / group / f"{option}.yaml"
            if path.is_file():
                return str(path)
    return None
