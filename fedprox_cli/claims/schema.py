"""A claims file checked where it comes in, before anything is typed or run: every key against
the fields of its record (:class:`.declare.Claim`, :class:`.declare.RunSet`, :class:`.declare.Test`,
:class:`.declare.Figure` and a figure's panels), every value against its field's type and choices,
the algorithms and datasets the runs name against fedrun's configs and installed plugins, the
metrics against ``metrics.csv``'s columns, and each test's key and values against its runs' grid.
A mistake is one line: the file, its line, the claim, the key, and the nearest known name.
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from collections.abc import Iterable
from dataclasses import MISSING, fields
from importlib.metadata import entry_points
from typing import Any, NoReturn

import yaml

from ..common import metric_table
from ..common.errors import UserError
from ..common.package import CONF_DIR
from . import declare

MODES = ("best", "chain")
SOURCES = ("runs", "bench")
PANEL = ("label", "title", "where", "x", "y", "ylabel", "logy", "kind", "key", "curves", "final")
MARK_KINDS = ("hline", "below", "slope")
X = ("round", "time", "bytes")
CHOICES = {  # record field -> its allowed values
    ("Test", "kind"): declare.KINDS,
    ("Test", "at"): declare.AT,
    ("Test", "curve"): declare.CURVES,
    ("Test", "role"): declare.ROLES,
    ("RunSet", "role"): declare.ROLES,
    ("Test", "mode"): MODES,
    ("Test", "source"): SOURCES,
    ("Figure", "x"): X,
}
RENAMED = {  # field -> its YAML key (None: made from another key, or from where it was read)
    "Claim": {"figure_spec": None, "table_spec": "table", "origin": None, "file": None}
}
YAML_TYPES = {("Claim", "figure"): str | declare.Figure}  # a link, or the figure to draw
NAMED = {"algorithm": "algorithms", "dataset": "datasets"}  # config group -> plugin group
# a field's type as typing.get_type_hints gives it (a class, a union, a generic alias): Any there
Hint = Any
KeyPath = tuple[str | int, ...]  # keys and indices into a claims file


def suggest(word: object, known: Iterable[object]) -> str:
    """`` (did you mean 'x'?)`` for the nearest of ``known``, else ""."""
    near = difflib.get_close_matches(str(word), [str(k) for k in known], n=1, cutoff=0.6)
    return f" (did you mean {near[0]!r}?)" if near else ""


def line(node: yaml.Node | None, path: KeyPath) -> int:
    """The 1-based line of ``path`` (keys and indices) in the composed YAML ``node``, or of the
    deepest part of it that exists; a mapping key's own line for the last key."""
    at = node.start_mark.line + 1 if node is not None else 1
    for step in path:
        if node is None:
            break
        if getattr(node, "tag", "").endswith(":map"):
            pair = next((kv for kv in node.value if kv[0].value == str(step)), None)
            if pair is None:
                break
            at, node = pair[0].start_mark.line + 1, pair[1]
        elif getattr(node, "tag", "").endswith(":seq") and isinstance(step, int):
            if step >= len(node.value):
                break
            node = node.value[step]
            at = node.start_mark.line + 1
        else:
            break
    return at


def at(file: str, node: yaml.Node | None, path: KeyPath) -> str:
    """``file:line`` of ``path`` (:func:`line`)."""
    return f"{file}:{line(node, path)}"


class _Check:
    """The walk over one file, raising the first mistake as one line."""

    def __init__(self, file: str, node: yaml.Node | None):
        self.file, self.node = file, node
        self.claim = ""

    def fail(self, path: KeyPath, message: str) -> NoReturn:
        who = f" claim {self.claim}:" if self.claim else ""
        shown = ".".join(str(p) if isinstance(p, str) else f"[{p}]" for p in path[1:])
        shown = shown.replace(".[", "[") + ": " if len(path) > 1 else ""
        raise UserError(f"{at(self.file, self.node, path)}:{who} {shown}{message}")

    def record(self, d: object, cls: type[Any], path: KeyPath) -> None:
        """``d`` against the fields of the dataclass ``cls``: keys, required keys, types."""
        if not isinstance(d, dict):
            self.fail(path, f"must be a mapping (the keys of {cls.__name__}), got {_kind(d)}")
        renamed = RENAMED.get(cls.__name__, {})
        hints = typing.get_type_hints(cls)
        keys = {}
        for f in fields(cls):
            name = renamed.get(f.name, f.name)
            if name is not None:
                keys[name] = (f, hints[f.name])
        for k in d:
            if k not in keys:
                self.fail(
                    (*path, k), f"unknown key {k!r} of a {_noun(cls)}" + suggest(k, list(keys))
                )
        for name, (f, hint) in keys.items():
            required = f.default is MISSING and f.default_factory is MISSING
            if name not in d:
                if required:
                    self.fail(path, f"a {_noun(cls)} needs the key {name!r}")
                continue
            field_id = (cls.__name__, f.name)
            self.typed(d[name], YAML_TYPES.get(field_id, hint), (*path, name), field_id)

    def typed(self, value: object, hint: Hint, path: KeyPath, field_id: tuple[str, str]) -> None:
        options = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
        if value is None and type(None) in options:
            return
        if not any(_fits(value, o) for o in options if o is not type(None)):
            want = " or ".join(_name(o) for o in options)
            self.fail(path, f"must be {want}, got {_kind(value)} {value!r}"[:300])
        allowed = CHOICES.get(field_id)
        if allowed and value not in allowed:
            self.fail(
                path,
                f"must be one of {', '.join(allowed)}, got {value!r}" + suggest(value, allowed),
            )


def _fits(value: object, hint: Hint) -> bool:
    """Whether ``value`` (as YAML loaded it) is of the kind ``hint`` names: a container's
    kind only (its items are checked where they are read)."""
    hint = _kind_of(hint)
    if hint is typing.Any or hint is object:
        return True
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is tuple:
        return isinstance(value, list)
    if hint in (declare.RunSet, declare.Figure):
        return isinstance(value, dict)
    return isinstance(value, hint)


def _kind_of(hint: Hint) -> Hint:
    """``tuple`` for ``tuple[str, ...]``, ``dict`` for ``dict[str, Any]``: the container."""
    return typing.get_origin(hint) or hint


def _name(hint: Hint) -> str:
    hint = _kind_of(hint)
    return {
        str: "text",
        int: "a whole number",
        float: "a number",
        bool: "true or false",
        tuple: "a list",
        dict: "a mapping",
        declare.RunSet: "a mapping (a run set)",
        declare.Figure: "a mapping (a figure)",
        type(None): "null",
    }.get(hint, getattr(hint, "__name__", str(hint)))


def _kind(value: object) -> str:
    return {
        dict: "a mapping",
        list: "a list",
        str: "text",
        bool: "a boolean",
        type(None): "null",
    }.get(type(value), type(value).__name__)


def _noun(cls: type[Any]) -> str:
    return {"Claim": "claim", "RunSet": "run set", "Test": "test", "Figure": "figure"}[cls.__name__]


def check(data: object, node: yaml.Node | None, file: str) -> None:
    """Raise one :class:`UserError` line for the first mistake of the claims file ``file``
    (``data`` as loaded, ``node`` as composed, for the lines)."""
    c = _Check(file, node)
    if not isinstance(data, list) or not data:
        c.fail((), "a claims file is a list of claims (- id: ...), got " + _kind(data))
    for i, d in enumerate(data):
        c.claim = str(d.get("id", "")) if isinstance(d, dict) else ""
        c.record(d, declare.Claim, (i,))
        runsets: list[tuple[object, dict[str, Any]]] = (
            [("paper_runs", d["paper_runs"])] if d.get("paper_runs") else []
        )
        runsets += [(("ran", j), rs) for j, rs in enumerate(d.get("ran") or ())]
        for where, rs in runsets:
            p = (i, *where) if isinstance(where, tuple) else (i, where)
            c.record(rs, declare.RunSet, p)
            _names(c, rs, p)
        ran = [rs for _, rs in runsets[1 if d.get("paper_runs") else 0 :]]
        for j, t in enumerate(d.get("tests") or ()):
            c.record(t, declare.Test, (i, "tests", j))
            _test(c, t, ran, (i, "tests", j))
        if isinstance(d.get("figure"), dict):
            _figure(c, d["figure"], (i, "figure"))
        if d.get("trained_metric"):
            _metric(c, d["trained_metric"], (i, "trained_metric"))
    c.claim = ""


def _metric(c: _Check, name: object, path: KeyPath) -> None:
    known = metric_table.names()
    if name not in known:
        c.fail(path, f"unknown metric {name!r} (a column of metrics.csv)" + suggest(name, known))


def _test(c: _Check, t: dict[str, Any], ran: list[dict[str, Any]], path: KeyPath) -> None:
    """A test of runs reads a metrics.csv column and compares values its runs' grid declares."""
    if t.get("source", "runs") != "runs":
        return
    _metric(c, t["metric"], (*path, "metric"))
    key = t.get("key")
    if key is None or not ran:
        return
    declared: dict[str, Any] = {}
    for rs in ran:
        for k, vs in (rs.get("grid") or {}).items():
            declared.setdefault(k, []).extend(vs if isinstance(vs, list) else [vs])
        for point in rs.get("points") or ():
            for k, v in point.items():
                declared.setdefault(k, []).append(v)
    if key not in declared:
        c.fail(
            (*path, "key"),
            f"{key!r} is no key of its runs' grid or points "
            f"({', '.join(map(str, declared)) or 'none'})" + suggest(key, list(declared)),
        )
    known = {str(v) for v in declared[key]}
    for v in [*(t.get("values") or ()), *([t["base"]] if t.get("base") is not None else [])]:
        if str(v) not in known:
            c.fail(
                (*path, "values"),
                f"{v!r} is not among its runs' values of {key} ({', '.join(sorted(known))})"
                + suggest(v, known),
            )


def _figure(c: _Check, fig: dict[str, Any], path: KeyPath) -> None:
    c.record(fig, declare.Figure, path)
    _metric(c, fig.get("y", metric_table.TEST_ACC.name), (*path, "y"))
    for j, panel in enumerate(fig.get("panels") or ()):
        p = (*path, "panels", j)
        if not isinstance(panel, dict):
            c.fail(p, f"a panel is a mapping ({', '.join(PANEL)}), got {_kind(panel)}")
        for k in panel:
            if k not in PANEL:
                c.fail((*p, k), f"unknown key {k!r} of a panel" + suggest(k, PANEL))
        if "y" in panel:
            _metric(c, panel["y"], (*p, "y"))
        if panel.get("x", "round") not in X:
            c.fail((*p, "x"), f"must be one of {', '.join(X)}" + suggest(panel["x"], X))
    for j, mark in enumerate(fig.get("marks") or ()):
        if not isinstance(mark, dict) or mark.get("kind") not in MARK_KINDS:
            c.fail((*path, "marks", j), f"a mark has a kind, one of {', '.join(MARK_KINDS)}")


def options(group: str) -> list[str]:
    """The names ``GROUP=NAME`` may take: fedrun's config options (``conf/GROUP/**.yaml``, by
    their path) and the installed plugins' entry points."""
    base = CONF_DIR / group
    shipped = [p.relative_to(base).with_suffix("").as_posix() for p in base.rglob("*.yaml")]
    plugins = [ep.name for ep in entry_points(group=f"fedprox_cli.{NAMED[group]}")]
    return sorted({*shipped, *plugins})


def _names(c: _Check, rs: dict[str, Any], path: KeyPath) -> None:
    """The algorithms and datasets a run set names (its overrides, grid, points, fixed, where)
    are fedrun's options, installed plugins or dotted paths (``my_module.Mine``)."""
    named: list[tuple[str, object, KeyPath]] = []
    for j, o in enumerate(rs.get("overrides") or ()):
        m = re.match(r"^\+?(\w+)=(.+)$", str(o))
        if m:
            named += [(m[1], v, (*path, "overrides", j)) for v in m[2].split(",")]
    for part in ("grid", "fixed", "where"):
        for k, vs in (rs.get(part) or {}).items():
            for v in vs if isinstance(vs, list) else [vs]:
                named.append((k.removesuffix(".name"), v, (*path, part, k)))
    for j, point in enumerate(rs.get("points") or ()):
        for k, v in (point or {}).items():
            named.append((k.removesuffix(".name"), v, (*path, "points", j, k)))
    for group, value, p in named:
        if group not in NAMED or not isinstance(value, str) or "." in value or value.isupper():
            continue  # a dotted path is checked where fedrun imports it; DIR a placeholder
        known = options(group)
        if value not in known:
            c.fail(
                p,
                f"unknown {group} {value!r} (fedrun's {group} options and installed plugins)"
                + suggest(value, known),
            )
