"""A checked sweep's jobs composed by its :class:`composer.Composer` in the launching process.

Hydra's basic sweeper (checking a batch before launching it) and its basic launcher (before
running each job) ask the config loader for each job's config with ``load_sweep_config``: one
whole composition, ~0.09 s, twice a job (docs/performance.md, "Sweeps"). While a sweep whose
jobs :func:`sweep.check_all` composed runs (:func:`use` to :func:`done`), the loader hands
them, for that sweep's master config, the config the check's Composer makes instead -- the same
config (tests/test_jobs.py) at the cost of one composition per distinct set of config-group
choices. A job with a Hydra override (``hydra.*``) and any other master config are composed as
Hydra composes them. Processes that receive jobs pickled (joblib's workers, submitit's jobs,
Ray's) compose each job there as Hydra does."""

from __future__ import annotations

from typing import TYPE_CHECKING

from omegaconf import OmegaConf

from .forms import Composed
from .hydra_private import ConfigLoaderImpl, replace

if TYPE_CHECKING:  # its module loads torch: fedrun's import must not (a failure there is a run's)
    from .composer import Composer

_HYDRAS = ConfigLoaderImpl.load_sweep_config
_SWEEPS: list[tuple[Composed, Composer]] = []  # (master config, its jobs' composer)


def _load_sweep_config(
    self: ConfigLoaderImpl, master_config: Composed, sweep_overrides: list[str]
) -> Composed:
    """``load_sweep_config`` (Hydra's signature): the Composer's config for a checked sweep's
    job, then the master's resolver cache copied as Hydra copies it (``${now:}``)."""
    for master, composer in _SWEEPS:
        if master_config is master and not composer.sets_hydra(list(sweep_overrides)):
            cfg = composer(list(sweep_overrides))
            OmegaConf.copy_cache(from_config=master, to_config=cfg)
            return cfg
    return _HYDRAS(self, master_config, sweep_overrides)


def use(master: Composed, composer: Composer) -> None:
    """From now on, the jobs of ``master`` are ``composer``'s (module docstring)."""
    _SWEEPS.append((master, composer))
    replace(ConfigLoaderImpl, "load_sweep_config", _load_sweep_config)


def done() -> None:
    """Every sweep's jobs composed by Hydra again (the end of a ``fedrun -m`` call)."""
    _SWEEPS.clear()
    replace(ConfigLoaderImpl, "load_sweep_config", _HYDRAS)
