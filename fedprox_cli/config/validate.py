"""A composed run config checked and typed before any training (one clear error per problem):
:func:`typed` makes the :class:`schema.RunConfig` the rest of the code receives.

- :func:`check_keys`: no key beyond those of ``conf/config.yaml`` and the chosen group options
  (a ``+key=value`` typo is refused like an unknown key without ``+``, with the key it was
  probably meant to be), and none deleted;
- the top-level keys against the schema (:mod:`schema`: type and range), before anything else
  resolves (``K=0`` is named before a step ``${calc:1/${K}}`` fails);
- every value finite and within int64; each group option's values of its defaults' types and
  in :data:`GROUP_RANGES` (the algorithm, regularizer and compressor objects check their own
  parameters when built).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, cast

from omegaconf import Container, DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ..common.containers import as_dict
from ..common.errors import UserError, did_you_mean, no_parameter, require
from ..common.flatten import flatten
from .forms import Composed
from .schema import (
    GROUPS,
    Choice,
    Data,
    Metrics,
    Oracle,
    RunConfig,
    check,
    finite,
    is_int,
    is_number,
    positive_int,
)


def params(group: DictConfig, drop: tuple[str, ...] = ("name",)) -> dict[str, Any]:
    """A config group's entries as keyword arguments (without its ``name``)."""
    d = as_dict(group, resolve=True)
    return {k: v for k, v in d.items() if k not in drop}


# Ranges of the group keys that no built object checks (the algorithm, regularizer and
# compressor classes check their own parameters): key -> (test, what the value must be).
GROUP_RANGES = {
    "model.hidden": (positive_int, "a positive integer"),
    "model.gn_groups": (positive_int, "a positive integer"),
    "model.init": (lambda v: v in ("default", "zeros"), "default or zeros"),
    "partition.alpha": (lambda v: is_number(v) and v > 0, "a number > 0"),
    "partition.min_size": (positive_int, "a positive integer"),
    "partition.seed": (lambda v: is_int(v) and v >= 0, "an integer >= 0"),
}
SECTIONS = {"data": Data, "oracle": Oracle, "metrics": Metrics}


def resolved(
    cfg: Composed, skip: tuple[str, ...] = (), given: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The whole config (but its ``skip`` keys) with every interpolation resolved; one that fails
    (``${calc:1/0}``, an unset ``${oc.env:...}``, a missing key) is a :class:`UserError` naming
    its key. ``given``: the values of top-level keys known already (a value with no
    interpolation in it), taken as they are."""
    given = given or {}
    try:
        if not skip and not given:
            return as_dict(cfg, resolve=True)
        return {
            str(k): given[k]
            if k in given
            else OmegaConf.to_container(cfg[k], resolve=True)
            if isinstance(cfg[k], Container)
            else cfg[k]
            for k in cfg
            if k not in skip
        }
    except OmegaConfBaseException as e:
        why = str(e).splitlines()[0].split("raised while resolving interpolation: ")[-1]
        raise UserError(f"cannot resolve {e.full_key or 'the config'}: {why}") from None


@dataclass
class Resolved:
    """A config's values resolved, or why they cannot be: the schema's top-level keys (checked
    first, so that ``K=0`` is named before a step ``${calc:1/${K}}`` fails; None when one of
    them cannot be resolved), every value (None when some interpolation fails) and that
    failure."""

    top: dict[str, Any] | None
    values: dict[str, Any] | None
    error: UserError | None = None


def resolve(
    cfg: Composed, skip: tuple[str, ...] = (), given: dict[str, Any] | None = None
) -> Resolved:
    """:class:`Resolved` of ``cfg`` (but its ``skip`` keys; ``given``: :func:`resolved`)."""
    names = [k for k in RunConfig.__dataclass_fields__ if k not in GROUPS and k != "logger"]
    try:
        values = resolved(cfg, skip, given)
    except UserError as e:
        try:
            return Resolved(_top_level(cfg, names), None, e)
        except UserError as top:
            return Resolved(None, None, top)
    return Resolved({k: values[k] for k in names if k in values}, values)


def _top_level(cfg: Composed, names: list[str]) -> dict[str, Any]:
    """The schema's top-level keys and sections, resolved (not the groups)."""
    try:
        return {
            k: OmegaConf.to_container(cfg[k], resolve=True)
            if isinstance(cfg[k], Container)
            else cfg[k]
            for k in names
            if k in cfg
        }
    except OmegaConfBaseException:
        resolved(cfg)  # raises the UserError naming the key that does not resolve
        raise


class Reference:
    """What a config is checked against (:func:`compose.reference_config`, the same group
    choices composed without overrides): its keys as composed (flat) and its values resolved
    (flat: the types of the groups' values), each read once, when first needed (the values
    after the config's own top-level keys are checked: where the reference is the config
    itself, ``K=0`` is named before its ``${calc:1/${K}}`` fails)."""

    def __init__(self, cfg: Composed):
        self.cfg = cfg

    @cached_property
    def keys(self) -> dict[str, Any]:
        return flatten(as_dict(self.cfg, resolve=False))

    @cached_property
    def defaults(self) -> dict[str, Any]:
        return flatten(as_dict(self.cfg, resolve=True))

    @classmethod
    def of(cls, reference: Composed | None) -> Reference | None:
        return None if reference is None else cls(reference)


def typed(cfg: Composed, reference: Composed | None = None) -> RunConfig:
    """``cfg`` checked (module docstring) and typed. ``reference``: the same group choices
    composed without overrides (:func:`compose.reference_config`): it gives the keys a config may
    have and the types of the groups' values."""
    against = Reference.of(reference)
    if against is not None:
        check_keys(flatten(as_dict(cfg, resolve=False)), against.keys)
    return typed_resolved(None, resolve(cfg), against)


def typed_resolved(
    keys: dict[str, Any] | None, config: Resolved, reference: Reference | None
) -> RunConfig:
    """:func:`typed` of a config given as its keys as composed (flat; None: not checked against
    the reference) and its :class:`Resolved` values."""
    if keys is not None and reference is not None:
        check_keys(keys, reference.keys)
    top = config.top
    if top is None:
        raise cast(UserError, config.error)
    check(RunConfig, top)
    if config.error is not None:
        raise config.error
    values = cast(dict[str, Any], config.values)
    for key, v in sorted(
        flatten(values).items(), key=lambda kv: "." in kv[0]
    ):  # top-level keys first
        finite(key, v)
    _check_groups(values, reference.defaults if reference is not None else {})
    sections = {k: cls(**top[k]) for k, cls in SECTIONS.items()}
    choices: dict[str, Any] = {
        g: Choice(values[g]["name"], {k: v for k, v in values[g].items() if k != "name"})
        for g in GROUPS
    }
    return RunConfig(
        **{k: v for k, v in top.items() if k not in SECTIONS},
        **sections,
        **choices,
        logger=values.get("logger"),
    )


def _check_groups(values: dict[str, Any], defaults: dict[str, Any]) -> None:
    """Each group's values of its defaults' types (``defaults``: the reference's values, flat; a
    number where a number stands, a boolean where a boolean stands) and in
    :data:`GROUP_RANGES`."""
    flat = flatten({g: values[g] for g in GROUPS})
    for key, v in sorted(flat.items()):
        d = defaults.get(key)
        if isinstance(d, bool):
            require(isinstance(v, bool), f"{key} must be true or false, got {v!r}")
        elif is_number(d):
            kind = "an integer" if is_int(d) else "a number"
            require(
                is_number(v) and (not is_int(d) or is_int(v)), f"{key} must be {kind}, got {v!r}"
            )
    for key, (ok, what) in GROUP_RANGES.items():
        if key in flat:
            require(ok(flat[key]), f"{key} must be {what}, got {flat[key]!r}")


def check_keys(have: dict[str, Any], want: dict[str, Any]) -> None:
    """Refuse keys a config has (``have``: flat, as composed) beyond its reference's (``want``:
    the same group choices composed without overrides; what ``+key=value`` or ``++key=value``
    added), naming the closest one it has, and keys it lacks (``~key``)."""
    for key in sorted(set(have) - set(want)):
        group = key.split(".")[0]
        if group in GROUPS and "." in key:
            takes = [k.split(".", 1)[1] for k in want if k.startswith(group + ".")]
            raise UserError(
                no_parameter(
                    group,
                    cast(str, have.get(f"{group}.name")),
                    key.split(".", 1)[1],
                    takes,
                    have.get(f"{group}._target_"),
                )
            )
        raise UserError(
            f"unknown key {key!r}: fedrun has no such setting (see fedrun --help)"
            f"{did_you_mean(key, want)}"
        )
    missing = set(want) - set(have)
    whole = {
        g
        for g in GROUPS
        if any(k.startswith(g + ".") for k in want)  # ~group: named once
        and all(k in missing for k in want if k.startswith(g + "."))
    }
    gone = sorted({k.split(".")[0] if k.split(".")[0] in whole else k for k in missing})
    if gone:
        raise UserError(
            f"{', '.join(gone)} cannot be deleted (~): fedrun needs "
            f"{'it' if len(gone) == 1 else 'them'}; override the value instead"
        )
