"""One composition for a run (not a multirun): Hydra's ``_run_hydra`` composes the config twice,
once to read ``hydra.mode`` (``Hydra.get_mode``, in multirun mode) and once to run, each
reading and merging the whole config tree. Within :func:`composed_once`, ``get_mode`` composes
the run's config itself -- as ``Hydra.run`` will ask for it -- and hands it to that one request
instead of composing again. The config is the one Hydra's second composition gives: the same
overrides in run mode, then ``hydra.mode=RUN`` applied and recorded as Hydra appends it
(``tests/test_startup.py`` compares them). Anything else (a multirun, a config that sets
``hydra.mode``, a composition that fails, any other request) goes Hydra's own way."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from hydra._internal.hydra import Hydra
from hydra.types import RunMode
from omegaconf import open_dict

_MODE_OVERRIDE = "hydra.mode=RUN"  # what Hydra's _run_app appends for a run of no set mode


@contextmanager
def composed_once(multirun: bool = False) -> Iterator[None]:
    """Within the block, a Hydra run composes its config once (module docstring); nothing
    changes for a ``multirun`` (``-m``)."""
    if multirun:
        yield
        return
    hydra_get_mode = Hydra.get_mode
    loaders: list = []  # the loaders handed a config, their own method restored at the end

    def get_mode(self: Hydra, config_name: str | None, overrides: list[str]):
        loader = self.config_loader
        try:
            cfg = loader.load_configuration(
                config_name=config_name, overrides=list(overrides), run_mode=RunMode.RUN
            )
        except Exception:  # noqa: BLE001 -- Hydra's own composition says what is wrong
            return hydra_get_mode(self, config_name, overrides)
        if cfg.hydra.mode is not None:
            return hydra_get_mode(self, config_name, overrides)
        with open_dict(cfg.hydra):
            cfg.hydra.mode = RunMode.RUN
            cfg.hydra.overrides.hydra.append(_MODE_OVERRIDE)
        _hand_over(loader, config_name, [*overrides, _MODE_OVERRIDE], cfg)
        loaders.append(loader)
        return None

    Hydra.get_mode = get_mode  # type: ignore[method-assign]
    try:
        yield
    finally:
        Hydra.get_mode = hydra_get_mode  # type: ignore[method-assign]
        for loader in loaders:
            vars(loader).pop("load_configuration", None)


def _hand_over(loader, config_name: str | None, overrides: list[str], cfg) -> None:
    """``loader``'s next ``load_configuration`` call, if it asks for ``overrides`` of
    ``config_name`` in run mode, returns ``cfg``; any call ends the hand-over."""
    compose = loader.load_configuration

    def load_configuration(*args, **kwargs):
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

    loader.load_configuration = load_configuration
