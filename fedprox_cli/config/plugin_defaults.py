"""An installed plugin without a YAML: its defaults make its config.

``fedrun algorithm=NAME`` needs ``algorithm/NAME.yaml`` somewhere on Hydra's search path. For
an installed plugin (an entry point, :mod:`fedprox_cli.common.registry`) that ships none,
:func:`store` puts its defaults into Hydra's ConfigStore as that option: a dataclass's field
defaults (an algorithm, regularizer, compressor), a model builder's keyword defaults (with
``init: default``), a dataset loader's name alone. A YAML found on the search path (fedrun's,
``--config-dir``, ``hydra.searchpath``, a search-path plugin's) wins: nothing is stored then.
A plugin whose parameter has no default is one line saying what to add. A class named by its
dotted path (``algorithm=my_module.MyAlgorithm``, :func:`common.dotted.dotted`: the rule
``fedrun-check-algorithm`` follows too) is stored the same way, with ``_target_`` its path.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import MISSING, fields, is_dataclass
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, cast

from ..common.dotted import dotted, located
from ..common.errors import UserError
from ..common.package import CONF_DIR

if TYPE_CHECKING:
    from ..common.registry import Lookup
    from .hydra_private import ConfigRepository

GROUPS = {
    "algorithm": "algorithms",
    "regularizer": "regularizers",
    "compressor": "compressors",
    "model": "models",
    "dataset": "datasets",
}  # config group -> entry-point group's plural
CLASSES = (
    "algorithm",
    "regularizer",
    "compressor",
)  # groups whose plugin may be named by dotted path
_CHOICE = re.compile(r"^(?P<group>\w+)=(?P<values>.+)$")
_SEARCHPATH = re.compile(r"^\+*hydra\.searchpath=\[(?P<paths>.*)\]$")


def lookup(group: str) -> Lookup[Any]:
    """The registry lookup ``(name, target=None) -> object`` of a config group (imported here:
    torch loads only when one is needed)."""
    from importlib import import_module

    module = {
        "algorithm": "fedprox_cli.algorithms.base",
        "regularizer": "fedprox_cli.operators.regularizers",
        "compressor": "fedprox_cli.operators.compressors",
        "model": "fedprox_cli.engine.models",
        "dataset": "fedprox_cli.data.datasets",
    }[group]
    return cast("Lookup[Any]", import_module(module).lookup)


def defaults(group: str, name: str, obj: Any) -> dict[str, Any]:  # a plugin's class or function
    """The option's config from the plugin's own defaults (module docstring)."""
    if group == "dataset":
        return {"name": name}
    if is_dataclass(obj):
        params = {f.name: f.default for f in fields(obj) if f.init}
    else:
        sig = list(inspect.signature(obj).parameters.values())[2:]  # after input_shape, num_classes
        params = {
            p.name: MISSING if p.default is inspect.Parameter.empty else p.default
            for p in sig
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        }
    missing = [k for k, v in params.items() if v is MISSING]
    if missing:
        raise UserError(
            f"{group} plugin '{name}' has no config {group}/{name}.yaml and its parameter "
            f"{', '.join(missing)} has no default: give {'it' if len(missing) == 1 else 'them'} "
            f"a default, or add {group}/{name}.yaml (name: {name} and every parameter) to a "
            f"config dir (--config-dir DIR)"
        )
    return {"name": name, **({"init": "default"} if group == "model" else {}), **params}


def by_path(group: str, target: str) -> dict[str, Any]:
    """The option ``GROUP=package.module.Class`` (:func:`common.dotted.dotted`): the class's
    defaults under its own ``name``, with ``_target_`` its path; the class contract checked at
    the door (a broken one is one line naming it)."""
    cls = located(target)
    lookup(group)(getattr(cls, "name", "?"), target)
    return {**defaults(group, cls.name, cls), "_target_": target}


def _repository(overrides: list[str], config_dir: str | None) -> ConfigRepository:
    """Hydra's config repository for fedrun's search path plus ``config_dir`` and the
    overrides' ``hydra.searchpath``."""
    from .hydra_private import ConfigRepository, create_config_search_path

    path = create_config_search_path(str(CONF_DIR))
    extra = [f"file://{config_dir}"] if config_dir else []
    for o in overrides:
        m = _SEARCHPATH.match(o)
        if m:
            extra += [p.strip().strip("'\"") for p in m["paths"].split(",") if p.strip()]
    for p in extra:
        path.append("command-line", p if "://" in p else f"file://{p}")
    return ConfigRepository(path)


def store(overrides: list[str], config_dir: str | None = None) -> None:
    """For each ``GROUP=NAME`` (or ``GROUP=A,B``) of ``overrides`` naming an installed plugin
    whose YAML is nowhere on the search path, store its defaults as the option ``GROUP/NAME``."""
    wanted = []
    for o in overrides:
        m = _CHOICE.match(o.lstrip("+"))
        if m and m["group"] in GROUPS:
            names = [n.strip() for n in re.sub(r"^\w+\((.*)\)$", r"\1", m["values"]).split(",")]
            names = [
                n for n in names if not (CONF_DIR / m["group"] / f"{n}.yaml").exists()
            ]  # fedrun's own
            if m["group"] in CLASSES:
                paths = [
                    n
                    for n in names
                    if ("." in n or ":" in n) and not set("/$ ") & set(n) and dotted(n)
                ]
                wanted += [(m["group"], n) for n in paths]
                names = [n for n in names if n not in paths]
            if names:
                installed = {
                    ep.name for ep in entry_points(group=f"fedprox_cli.{GROUPS[m['group']]}")
                }
                wanted += [(m["group"], n) for n in names if n in installed]
    if not wanted:
        return
    from hydra.core.config_store import ConfigStore

    repo = _repository(overrides, config_dir)
    for group, name in wanted:
        if not repo.config_exists(f"{group}/{name}"):
            node = (
                by_path(group, name) if dotted(name) else defaults(group, name, lookup(group)(name))
            )
            ConfigStore.instance().store(
                group=group, name=name, node=node, provider="fedprox_cli plugin defaults"
            )
