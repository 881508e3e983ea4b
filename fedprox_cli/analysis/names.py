"""Methods by the names the papers print (``FedCanon``, ``FedMiD``, ``ZA1``, ``SCAFFNEW``): the
``display_name`` an algorithm's class declares (a plugin's too), used by every figure and table.

The declaration is read from the class's source (``display_name = "FedCanon"`` in the class
body), found as the registry finds the class -- fedrun's own algorithms/ modules, then the
``fedprox_cli.algorithms`` entry points -- without importing it: an algorithm's module imports
torch (~0.5 GB), which no analysis command needs. The same sources say which class declares
each parameter (:func:`parameter_owner`). Where they do not tell (a ``display_name`` that is not
a literal, a base class not found), the class is imported and asked."""

from __future__ import annotations

import ast
import functools
import importlib.util
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from .run import CHOICE

_GROUP = "fedprox_cli.algorithms"
_UNREAD = object()  # what the source does not say as a literal: the class is imported and asked
_ROOTS = {"Algorithm", "Generic", "object"}  # bases declaring no parameter


@dataclass
class _Class:
    """What an algorithm class's source declares: its module and name, ``name`` and
    ``display_name`` (literals, else :data:`_UNREAD`), its own parameters (annotated fields
    that are not ``ClassVar``) and its bases' names."""

    module: str
    qualname: str
    values: dict[str, object] = field(default_factory=dict)
    fields: set[str] = field(default_factory=set)
    bases: list[str] = field(default_factory=list)

    @property
    def display(self) -> object:
        """``display_name``, else ``name`` (``Algorithm.__init_subclass__``'s default)."""
        return self.values.get("display_name", self.values.get("name", _UNREAD))


def _simple(node: ast.expr) -> str:
    """The name an expression of a class statement's bases or annotation ends in."""
    node = node.value if isinstance(node, ast.Subscript) else node
    return node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")


def _class(module: str, node: ast.ClassDef) -> _Class:
    out = _Class(module, node.name, bases=[_simple(b) for b in node.bases])
    target: ast.expr
    value: ast.expr | None
    for stmt in node.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            if _simple(stmt.annotation) != "ClassVar":
                out.fields.add(stmt.target.id)
            target, value = stmt.target, stmt.value
        elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target, value = stmt.targets[0], stmt.value
        else:
            continue
        if isinstance(target, ast.Name) and value is not None:
            literal = isinstance(value, ast.Constant) and isinstance(value.value, str)
            out.values[target.id] = value.value if literal else _UNREAD  # type: ignore[attr-defined]
    return out


def _classes(module: str, path: Path | None) -> list[_Class]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8")) if path is not None else None
    except (OSError, SyntaxError, ValueError):
        return []
    return [_class(module, n) for n in tree.body if isinstance(n, ast.ClassDef)] if tree else []


def _source(module: str) -> Path | None:
    """The file of ``module`` (dotted), found without importing it or its packages."""
    top, *rest = module.split(".")
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    path = Path(spec.origin) if spec is not None and spec.origin else None
    for part in rest:
        if path is None or path.name != "__init__.py":
            return None
        here = path.parent / part
        path = next(
            (p for p in (here / "__init__.py", here.with_suffix(".py")) if p.is_file()), None
        )
    return path if path is not None and path.suffix == ".py" else None


@functools.cache
def _index() -> tuple[dict[str, _Class], dict[str, list[_Class]]]:
    """``algorithm name -> its class`` as the registry finds it (fedrun's own algorithms/
    modules, then the installed plugins' entry points ``name = module:Class``, or a module
    registering it), and ``class name -> the classes of that name`` read."""
    named: dict[str, _Class] = {}
    every: list[_Class] = []
    for path in sorted((Path(__file__).parent.parent / "algorithms").glob("*.py")):
        read = _classes(f"fedprox_cli.algorithms.{path.stem}", path)
        every += read
        named.update(
            {str(c.values["name"]): c for c in read if isinstance(c.values.get("name"), str)}
        )
    for ep in entry_points(group=_GROUP):
        if ep.name in named:
            continue
        module, _, attr = (v.strip() for v in ep.value.partition(":"))
        read = _classes(module, _source(module))
        every += read
        found = [
            c for c in read if (c.qualname == attr if attr else c.values.get("name") == ep.name)
        ]
        if found:
            named[ep.name] = found[0]
    by_name: dict[str, list[_Class]] = {}
    for c in every:
        by_name.setdefault(c.qualname, []).append(c)
    return named, by_name


def _chain(cls: _Class) -> list[_Class] | None:
    """``cls`` and its bases, most derived first, as far as the sources tell (None where a
    base is not read: one not found, or two of its name)."""
    chain, todo = [], [cls]
    by_name = _index()[1]
    while todo:
        c = todo.pop(0)
        chain.append(c)
        for base in c.bases:
            if base in _ROOTS:
                continue
            same = [b for b in by_name.get(base, []) if b.module == c.module] or by_name.get(
                base, []
            )
            if len(same) != 1:
                return None
            todo.append(same[0])
    return chain


def parameter_owner(algorithm: object, name: str) -> str | None:
    """``module.Class.name`` of the class that declares parameter ``name`` of method
    ``algorithm`` (its most basic class declaring it), read from the sources; None where it is
    not one of its parameters or the class is not found here (a plugin not installed)."""
    cls = _index()[0].get(str(algorithm))
    chain = _chain(cls) if cls is not None else None
    if chain is None:
        return _imported_owner(str(algorithm), name) if cls is not None else None
    owner = next((c for c in reversed(chain) if name in c.fields), None)
    return f"{owner.module}.{owner.qualname}.{name}" if owner is not None else None


def _imported_owner(algorithm: str, name: str) -> str | None:
    """:func:`parameter_owner` from the class imported (its sources do not tell)."""
    from dataclasses import fields, is_dataclass

    from ..common.errors import UserError

    try:
        from .. import algorithms

        cls = algorithms.base.lookup(algorithm)
    except (UserError, ImportError):
        return None
    if not (isinstance(cls, type) and is_dataclass(cls)) or name not in {
        f.name for f in fields(cls)
    }:
        return None
    owner = next(k for k in reversed(cls.__mro__) if name in getattr(k, "__annotations__", {}))
    return f"{owner.__module__}.{owner.__qualname__}.{name}"


def _imported(name: str) -> str:
    """The class's ``display_name`` as the registry gives it (importing the class)."""
    from ..common.errors import UserError

    try:
        from .. import algorithms

        return str(algorithms.base.lookup(name).display_name)
    except (UserError, ImportError, AttributeError):
        return name


def algorithm_title(name: object) -> str:
    """An algorithm's printed name: its class's ``display_name`` (module docstring), or
    ``name`` if it cannot be found here (a plugin not installed where the figure is drawn)."""
    cls = _index()[0].get(str(name))
    if cls is None:
        return str(name)
    return _imported(str(name)) if cls.display is _UNREAD else str(cls.display)


def method_names(configs: list[dict[str, Any]], key: str) -> dict[str, str]:
    """Printed names for the values of ``key`` when it names the method: ``algorithm.name``'s
    values, or the values of a group choice (``algorithm=fedcanon_fig2/fedavg``) that each hold
    one method no other value holds (two choices of one method keep their own text). Empty for
    any other key."""
    if key not in ("algorithm.name", f"{CHOICE}algorithm"):
        return {}
    by_value: dict[str, set[str]] = {}
    for c in configs:
        if key in c and "algorithm.name" in c:
            by_value.setdefault(str(c[key]), set()).add(str(c["algorithm.name"]))
    one = {value: next(iter(algs)) for value, algs in by_value.items() if len(algs) == 1}
    shared = {a for a in one.values() if list(one.values()).count(a) > 1}
    return {value: algorithm_title(a) for value, a in one.items() if a not in shared}
