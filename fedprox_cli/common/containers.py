"""OmegaConf's containers as plain Python values, typed: ``OmegaConf.to_container`` is declared
to return any container (a dict, a list, a string or None) whatever it is given, so each
reader here says which one its node is."""

from __future__ import annotations

from typing import Any, cast

from omegaconf import OmegaConf


def as_dict(node: object, resolve: bool = False) -> dict[str, Any]:
    """The config mapping ``node`` (a ``DictConfig``) as a plain dict; interpolations resolved
    if ``resolve``."""
    return cast(dict[str, Any], OmegaConf.to_container(node, resolve=resolve))


def as_list(node: object, resolve: bool = False) -> list[Any]:
    """The config sequence ``node`` (a ``ListConfig``, e.g. Hydra's overrides) as a plain list;
    interpolations resolved if ``resolve``."""
    return cast(list[Any], OmegaConf.to_container(node, resolve=resolve))
