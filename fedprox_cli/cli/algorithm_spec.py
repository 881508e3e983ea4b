"""Which algorithm ``fedrun-check-algorithm`` checks: a name, a class by dotted path or an
option's YAML, resolved to its config name and the overrides that choose it."""

from __future__ import annotations

from pathlib import Path

from ..common import guarded
from ..common.errors import UserError


def resolve(spec: str) -> tuple[str, list[str]]:
    """The algorithm's config name and the overrides that choose it, by the rule ``fedrun``
    follows (:func:`common.dotted.dotted`, :func:`config.plugin_defaults.store`): a registered
    or installed name, a dotted path to its class, or an option's YAML (:func:`_from_yaml`)."""
    from .. import algorithms
    from ..common.dotted import dotted, located
    from ..config import plugin_defaults

    params: list[str] = []
    if spec.endswith((".yaml", ".yml")):
        spec, params = _from_yaml(Path(spec))
    target = dotted(spec)
    if target is None:
        algorithms.base.lookup(spec)  # a UserError naming the options (did you mean) if unknown
    plugin_defaults.store([f"algorithm={spec}"])
    return (located(target).name if target else spec), [f"algorithm={spec}", *params]


def _from_yaml(path: Path) -> tuple[str, list[str]]:
    """An option's YAML (``name``, ``_target_`` if a class by dotted path, its parameters):
    what chooses the class and the overrides giving its values; a key the class does not take
    is the line ``fedrun`` says for it, naming the file."""
    import json
    from dataclasses import fields

    from .. import algorithms
    from ..common.errors import no_parameter, require

    try:
        node = guarded.read_yaml(path)
    except (OSError, guarded.Unreadable) as e:
        raise UserError(f"{path} cannot be read as YAML ({getattr(e, 'why', e)})") from None
    require(
        isinstance(node, dict) and isinstance(node.get("name"), str),
        f"{path} is no option's YAML: it needs name: <the algorithm's name> (docs/extending.md)",
    )
    name, target = node.pop("name"), node.pop("_target_", None)
    takes = [f.name for f in fields(algorithms.base.lookup(name, target))]
    unknown = sorted(set(node) - set(takes))
    if unknown:
        raise UserError(
            no_parameter("algorithm", name, unknown[0], takes, target) + f" (set in {path})"
        )
    return target or name, [f"algorithm.{k}={json.dumps(v)}" for k, v in node.items()]
