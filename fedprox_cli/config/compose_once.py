"""One composition for a run (not a multirun): Hydra's ``_run_hydra`` composes the config twice,
once to read ``hydra.mode`` (``Hydra.get_mode``, in multirun mode) and once to run, each
reading and merging the whole config tree. Within :func:`composed_once`, ``get_mode`` composes
the run's config itself -- as ``Hydra.run`` will ask for it -- and hands it to that one request
instead of composing again. The config is the one Hydra's second composition gives: the same
overrides in run mode, then ``hydra.mode=RUN`` applied and recorded as Hydra appends it
(``tests/test_startup.py`` compares them). Anything else (a multirun, a config that sets
``hydra.mode``, a composition that fails, any other request) goes Hydra's own way.

The same composition keeps the config as it stood before the command line's values were applied
to it (:func:`reference`): the same group choices without any other override, which is what the
validation's reference config is (:func:`compose.reference_config` composes it anew)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, cast

from hydra.types import RunMode
from omegaconf import open_dict

from .forms import Composed
from .hydra_private import ConfigLoaderImpl, Hydra, replace

if TYPE_CHECKING:
    from hydra.core.config_loader import ConfigLoader
    from hydra.core.override_parser.types import Override

_MODE_OVERRIDE = "hydra.mode=RUN"  # what Hydra's _run_app appends for a run of no set mode
_REFERENCE: list[Composed] = []  # the composed run's config before its overrides, in the block


def reference() -> Composed | None:
    """Within :func:`composed_once`'s block, once the run's config is composed there: that
    config as it stood before the command line's values were applied (the Hydra node
    removed, as Hydra's compose API removes it); else None."""
    return _REFERENCE[-1] if _REFERENCE else None


@contextmanager
def _before_overrides() -> Iterator[list[Composed]]:
    """Within the block, a composition keeps a copy of its config as it stands just before the
    overrides' values are applied (``ConfigLoaderImpl._apply_overrides_to_config``)."""
    apply = ConfigLoaderImpl._apply_overrides_to_config
    kept: list[Composed] = []
    name = "_apply_overrides_to_config"

    def keep_then_apply(overrides: list[Override], cfg: Composed) -> None:
        before = copy.deepcopy(cfg)
        with open_dict(before):
            del before["hydra"]
        kept.append(before)
        apply(overrides, cfg)

    hydras = replace(ConfigLoaderImpl, name, staticmethod(keep_then_apply))
    try:
        yield kept
    finally:
        replace(ConfigLoaderImpl, name, hydras)


@contextmanager
def composed_once(multirun: bool = False) -> Iterator[None]:
    """Within the block, a Hydra run composes its config once (module docstring); nothing
    changes for a ``multirun`` (``-m``)."""
    if multirun:
        yield
        return
    hydra_get_mode = Hydra.get_mode
    loaders: list[Any] = []  # the loaders handed a config, their own method restored at the end

    def get_mode(self: Hydra, config_name: str | None, overrides: list[str]) -> RunMode | None:
        loader = self.config_loader
        try:
            with _before_overrides() as before:
                cfg = loader.load_configuration(
                    config_name=config_name, overrides=list(overrides), run_mode=RunMode.RUN
                )
        except Exception:  # noqa: BLE001 -- Hydra's own composition says what is wrong
            return cast("RunMode | None", hydra_get_mode(self, config_name, overrides))
        if cfg.hydra.mode is not None or len(before) != 1:
            return cast("RunMode | None", hydra_get_mode(self, config_name, overrides))
        with open_dict(cfg.hydra):
            cfg.hydra.mode = RunMode.RUN
            cfg.hydra.overrides.hydra.append(_MODE_OVERRIDE)
        _hand_over(loader, config_name, [*overrides, _MODE_OVERRIDE], cfg)
        loaders.append(loader)
        _REFERENCE.append(before[0])
        return None

    hydras = replace(Hydra, "get_mode", get_mode)
    try:
        yield
    finally:
        replace(Hydra, "get_mode", hydras)
        for loader in loaders:
            vars(loader).pop("load_configuration", None)
        _REFERENCE.clear()


def _hand_over(
    loader: ConfigLoader, config_name: str | None, overrides: list[str], cfg: Composed
) -> None:
    """``loader``'s next ``load_configuration`` call, if it asks for ``overrides`` of
    ``config_name`` in run mode, returns ``cfg``; any call ends the hand-over."""
    compose = loader.load_configuration

    def load_configuration(*args: Any, **kwargs: Any) -> Composed:
        vars(loader).pop("load_configuration", None)
        if (
            not args
            and kwargs.get("config_name") == config_name
            and list(kwargs.get("overrides", ())) == overrides
            and kwargs.get("run_mode") == RunMode.RUN
            and kwargs.get("validate_sweep_overrides", True)
        ):
            return cfg
        return compose(*args, **kwargs)

    vars(loader)["load_configuration"] = load_configuration  # this loader's own, until popped
