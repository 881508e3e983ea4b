"""The two forms of a run's config, one type each: :data:`Composed`, the config as Hydra
composes it (interpolations unresolved, group choices in ``hydra:``), and :data:`Plain`, the
same resolved into plain containers, as a run's ``config.yaml`` holds it. Code takes one of
them; :func:`validate.resolved` turns the first into the second at the boundary."""

from __future__ import annotations

from typing import Any, TypeAlias

from omegaconf import DictConfig

Composed: TypeAlias = DictConfig
Plain: TypeAlias = dict[str, Any]
