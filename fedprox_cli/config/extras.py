"""Launchers, sweepers and trackers are optional: extras of the package (pyproject.toml's
``[project.optional-dependencies]``), imported only when a run chooses one. :data:`NEEDS` is
the one table of which config option needs which modules and which extra installs them; a run
or dry run that chooses an option whose modules are missing is refused with one line naming
the extra (:func:`check` on the composed choices, :func:`explain` on Hydra's error when the
option's own config is missing because its plugin is not installed).
"""

from __future__ import annotations

import importlib.util
import re
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from ..common.errors import UserError, refuse_in_callback

# "group/option" -> (modules it needs, the extra that installs them)
_LAUNCHERS = ("hydra_plugins.hydra_submitit_launcher", "submitit")
NEEDS: dict[str, tuple[tuple[str, ...], str]] = {
    "hydra/launcher/slurm": (_LAUNCHERS, "cluster"),
    "hydra/launcher/local": (_LAUNCHERS, "cluster"),
    "hydra/launcher/submitit_slurm": (_LAUNCHERS, "cluster"),
    "hydra/launcher/submitit_local": (_LAUNCHERS, "cluster"),
    "hydra/launcher/joblib": (("hydra_plugins.hydra_joblib_launcher", "joblib"), "cluster"),
    "hydra/launcher/ray": (("hydra_plugins.hydra_ray_launcher", "ray"), "ray"),
    "hydra/sweeper/optuna": (("hydra_plugins.hydra_optuna_sweeper", "optuna"), "search"),
    "logger/tensorboard": (("tensorboard",), "tensorboard"),
    "logger/mlflow": (("mlflow",), "mlflow"),
    "logger/wandb": (("wandb",), "wandb"),
}
_NAMED = re.compile("|".join(re.escape(k) for k in NEEDS))


def installed(module: str) -> bool:
    """Whether ``module`` can be imported (found, without importing it)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def message(option: str) -> str | None:
    """The refusal for choosing ``option`` ("group/option"), or None when it is usable."""
    modules, extra = NEEDS.get(option, ((), ""))
    missing = [m for m in modules if not installed(m)]
    if not missing:
        return None
    group, _, name = option.rpartition("/")
    return (
        f"{group}={name} needs `pip install fedprox_cli[{extra}]` "
        f"(from a checkout: pip install -e '.[{extra}]'); {missing[0]} is not installed"
    )


def check(choices: dict[str, Any]) -> None:
    """Refuse group choices (Hydra's ``runtime.choices``) whose extra is missing."""
    for group, choice in choices.items():
        why = message(f"{group}/{choice}")
        if why:
            raise UserError(why)


def explain(error: BaseException) -> str | None:
    """The one line for a Hydra error caused by a missing extra (a config such as
    ``hydra/launcher/submitit_slurm`` that its uninstalled plugin would provide), else None."""
    for option in _NAMED.findall(str(error)):
        why = message(option)
        if why:
            return why
    return None


class Check(Callback):
    """Hydra callback (conf/config.yaml): :func:`check` a run's or a sweep's choices before
    Hydra builds its sweeper or launcher."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        refuse_in_callback(check, config.hydra.runtime.choices)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        refuse_in_callback(check, config.hydra.runtime.choices)
