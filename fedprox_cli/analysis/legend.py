"""What a figure's legend entries say, and the settings they leave to the caption.

An entry names only what tells its curve apart (:func:`curve_labels`): the method's printed name
(``display_name``) where the methods differ, then its parameters whose value differs between
curves in which they *mean the same* -- a parameter is known by its name and by the class that
declares it (:func:`meaning`): FedCanon's ``alpha`` (a server step) and FedCEF's or a FedDyn
plugin's ``alpha`` (a local step, a regularization weight) are three parameters, never one that
"varies" across the methods -- as the papers' symbols (``FedProx (μ = 0.01)``), then the other
keys that differ. A method's parameter that no entry names is its own setting, stated in the
caption with the method (:func:`method_settings`). ``names`` renames a part, a value, a key or a
whole label (:mod:`.renames`); the parameters a renamed label no longer shows go to the caption.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from .groups import Group, differing, fmt, short
from .names import algorithm_title, parameter_owner
from .plotting import symbol
from .renames import Renames
from .run import CHOICE

ALGORITHM = "algorithm."
NAME = "algorithm.name"


def meaning(algorithm: object, key: str) -> str:
    """What parameter ``key`` (``algorithm.alpha``) of method ``algorithm`` is: the class that
    declares the field (a subclass inheriting it means the same, :func:`parameter_owner`), or,
    where the method's class cannot be found here, the method itself (parameters of two such
    methods never merge)."""
    name = key.removeprefix(ALGORITHM)
    return parameter_owner(algorithm, name) or f"{algorithm}.{name}"


def part(key: str, value: object, names: Renames) -> str:
    """One ``key = value`` of a label, renamed by ``names``: the whole part (``K=10``), the value
    (``dir/0.1``), or the key (``algorithm.beta``, ``beta``); a parameter reads as its symbol."""
    k, v = short(key), fmt(value)
    whole = names.get(f"{k}={v}") or names.get(f"{key}={v}")
    if whole:
        return whole
    if names.get(v):
        return names[v]
    name = (
        names.get(key)
        or names.get(k)
        or (symbol(k) if key.startswith(ALGORITHM) or "." not in k else k)
    )
    return f"{name} = {v}"


def method(name: object, names: Renames) -> str:
    """A method as the legend prints it (its class's ``display_name``, renamed by ``names``)."""
    shown = algorithm_title(name)
    return names.get(str(name)) or names.get(shown) or shown


@dataclass
class Entry:
    """A curve's legend label and the keys it states (none when a rename replaced it whole)."""

    label: str
    states: frozenset[str]


def _parameter_classes(configs: list[dict[str, Any]]) -> dict[tuple[str, str], set[str]]:
    """(key, meaning) -> the values the configs give that parameter."""
    out: dict[tuple[str, str], set[str]] = {}
    for c in configs:
        for k in c:
            if k.startswith(ALGORITHM) and k != NAME:
                out.setdefault((k, meaning(c.get(NAME), k)), set()).add(repr(c[k]))
    return out


def varying_parameters(
    c: dict[str, Any], classes: dict[tuple[str, str], set[str]], shown: Collection[str] = ()
) -> list[str]:
    """The method parameters of config ``c`` whose value differs between the curves in which
    they mean the same (beyond the ``shown`` panel keys)."""
    return sorted(
        k
        for k in c
        if k.startswith(ALGORITHM)
        and k != NAME
        and k not in shown
        and len(classes[(k, meaning(c.get(NAME), k))]) > 1
    )


def _entry(
    c: dict[str, Any], names: Renames, several: bool, params: list[str], rest: list[str]
) -> tuple[str, set[str]]:
    head = method(c[NAME], names) if several and NAME in c else ""
    inner = ", ".join(part(k, c[k], names) for k in params)
    head = f"{head} ({inner})" if head and inner else head or inner
    others = [k for k in rest if k in c]
    label = ", ".join(p for p in (head, *(part(k, c[k], names) for k in others)) if p)
    return label, {*params, *others}


def curve_labels(groups: list[Group], names: Renames, shown: Collection[str] = ()) -> list[Entry]:
    """Each group's legend entry (module docstring); a group choice joins only where nothing
    else tells two curves apart; ``names`` may rename a whole label (old form ``k=v, k2=v2``
    too)."""
    configs = [g.config for g in groups]
    several = len({repr(c.get(NAME)) for c in configs}) > 1
    classes = _parameter_classes(configs)
    varies = {k for k in differing(configs) if len({repr(c[k]) for c in configs if k in c}) > 1}
    rest = sorted(k for k in varies if not k.startswith((ALGORITHM, CHOICE)) and k not in shown)
    made = [_entry(c, names, several, varying_parameters(c, classes, shown), rest) for c in configs]
    labels = [label for label, _ in made]
    choices = sorted(k for k in differing(configs) if k.startswith(CHOICE) and k not in shown)
    for i, g in enumerate(groups):
        if labels.count(labels[i]) > 1 and choices:
            extra = [part(k, g.config[k], names) for k in choices if k in g.config]
            labels[i] = ", ".join(p for p in (labels[i], *extra) if p)
    out = []
    for (lab, states), g in zip(zip(labels, (s for _, s in made)), groups):
        renamed = names.get(lab) or names.get(g.label)
        gone = renamed is not None and renamed != lab  # a new text states none of the keys
        out.append(Entry(renamed or lab or "all runs", frozenset() if gone else frozenset(states)))
    return out


def method_settings(
    groups: list[Group], entries: list[Entry], common: set[str], names: Renames
) -> list[str]:
    """Per method, in the curves' order, ``FedAvg (α = 1, β = 0.02)``: its parameters that
    every run does not share (``common``: said once in the caption) and that no entry of its
    curves states -- each method's own setting, so every parameter is on the figure. A curve
    whose label a rename replaced gets its own entry (``Fast (α = 0.5)``) for what it varies."""
    out: dict[str, list[str]] = {}
    for g, e in zip(groups, entries):
        c = g.config
        title = method(c.get(NAME, "?"), names)
        same = [h.config for h in groups if h.config.get(NAME) == c.get(NAME)]
        own = [
            k
            for k in sorted(c)
            if k.startswith(ALGORITHM)
            and k != NAME
            and k not in common
            and len({repr(d.get(k)) for d in same}) == 1
        ]
        stated = [k for k in own if k not in e.states]
        if stated:
            out.setdefault(title, [part(k, c[k], names) for k in stated])
        if not e.states and e.label != title:
            hidden = [
                k
                for k in sorted(c)
                if k.startswith(ALGORITHM) and k not in own and k != NAME and k not in common
            ]
            if hidden:
                out.setdefault(e.label, [part(k, c[k], names) for k in hidden])
    return [f"{m} ({', '.join(p)})" for m, p in out.items()]
