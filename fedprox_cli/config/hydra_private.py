"""Everything fedprox_cli uses of Hydra that is not Hydra's public API, in one module, written
against Hydra :data:`HYDRA_VERSION` (``tests/test_hydra_private.py`` pins it and checks each
name and signature used here, so that another Hydra fails there first, naming what moved):

- the config loader (:class:`ConfigLoaderImpl`: its ``load_sweep_config``, read for a sweep's
  jobs by :mod:`launch`, and its ``_apply_overrides_to_config``, by :mod:`composer` and
  :mod:`compose_once`), :func:`get_overrides_dirname` (a job's ``override_dirname``);
- the run's driver (:class:`Hydra`: ``get_mode``, :mod:`compose_once`);
- the basic sweeper's expansion of a sweep (:class:`BasicSweeper`, :mod:`compose`), the config
  repository on fedrun's search path (:class:`ConfigRepository`,
  :func:`create_config_search_path`, :mod:`plugin_defaults`) and the command line's parser
  (:func:`get_args_parser`, ``cli/main.py``);
- :func:`replace`: the one way a Hydra method is replaced while fedprox_cli runs (three are:
  ``ConfigLoaderImpl.load_sweep_config``, ``ConfigLoaderImpl._apply_overrides_to_config``,
  ``Hydra.get_mode``), put back by the same call with what it returned."""

from __future__ import annotations

from typing import Any

from hydra._internal.config_loader_impl import ConfigLoaderImpl, get_overrides_dirname
from hydra._internal.config_repository import ConfigRepository
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra._internal.hydra import Hydra
from hydra._internal.utils import create_config_search_path, get_args_parser

HYDRA_VERSION = "1.3.8"  # the Hydra these names and signatures are those of

__all__ = [
    "HYDRA_VERSION",
    "BasicSweeper",
    "ConfigLoaderImpl",
    "ConfigRepository",
    "Hydra",
    "create_config_search_path",
    "get_args_parser",
    "get_overrides_dirname",
    "replace",
]


def replace(owner: type, name: str, method: Any) -> Any:
    """``owner``'s attribute ``name`` set to ``method``; returns the one it replaces as the class
    holds it (a ``staticmethod`` stays one), which ``replace(owner, name, returned)`` puts
    back."""
    was = owner.__dict__[name]
    setattr(owner, name, method)
    return was
