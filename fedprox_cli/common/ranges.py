"""Declared parameter ranges: the one way a parameter of an algorithm, regularizer or compressor
(a field of its dataclass) says which values it takes.

A field declares its range with :func:`param`::

    mu: float = param(0.01, ge=0)          # mu >= 0
    alpha_dr: float = param(1.95, gt=0, lt=2)
    p: float | None = param(None, gt=0, le=1, none=True)

A field that declares nothing takes its kind's default range by its type (:data:`DEFAULTS`:
an algorithm's float is a step size, > 0; a regularizer's float a coefficient, >= 0; an int
anywhere a count, >= 1; a bool true or false). The same declarations give validation's error
lines (``algorithm.mu must be >= 0, got -1 (as declared by algorithm fedprox)``), ``fedrun
--help``'s parameter lists
and the conformance check (:mod:`fedprox_cli.cli.check_algorithm`).
"""

from __future__ import annotations

import math
import types
import typing
from dataclasses import MISSING, dataclass, field, fields
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

from .errors import require


@dataclass(frozen=True)
class Range:
    """Bounds of a number (``gt``/``ge`` below, ``lt``/``le`` above; None = unbounded),
    whether it must be an integer, whether null is accepted; ``boolean``: true or false."""

    gt: float | None = None
    ge: float | None = None
    lt: float | None = None
    le: float | None = None
    integer: bool = False
    none: bool = False
    boolean: bool = False

    def ok(self, v: object) -> bool:
        if v is None:
            return self.none
        if self.boolean:
            return isinstance(v, bool)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            return False
        if self.integer and not isinstance(v, int):
            return False
        return (
            (self.gt is None or v > self.gt)
            and (self.ge is None or v >= self.ge)
            and (self.lt is None or v < self.lt)
            and (self.le is None or v <= self.le)
        )

    def __str__(self) -> str:
        if self.boolean:
            return "true or false"
        low = (
            f"({self.gt:g}"
            if self.gt is not None
            else f"[{self.ge:g}"
            if self.ge is not None
            else None
        )
        high = (
            f"{self.lt:g})"
            if self.lt is not None
            else f"{self.le:g}]"
            if self.le is not None
            else None
        )
        if low and high:
            text = f"in {low}, {high}"
        elif low:
            text = f"{'>' if low[0] == '(' else '>='} {low[1:]}"
        elif high:
            text = f"{'<' if high[-1] == ')' else '<='} {high[:-1]}"
        else:
            text = "a finite number"
        if self.integer:
            text = "an integer" + ("" if text == "a finite number" else " " + text)
        return text + (" or null" if self.none else "")


POSITIVE = Range(gt=0)
NONNEGATIVE = Range(ge=0)
COUNT = Range(ge=1, integer=True)
BOOLEAN = Range(boolean=True)

# A field's range when it declares none, by the kind of object and the field's type.
DEFAULTS: dict[str, dict[object, Range]] = {
    "algorithm": {float: POSITIVE, int: COUNT, bool: BOOLEAN},
    "regularizer": {float: NONNEGATIVE, int: COUNT, bool: BOOLEAN},
    "compressor": {float: POSITIVE, int: COUNT, bool: BOOLEAN},
}


def param(
    default: Any,
    *,
    gt: float | None = None,
    ge: float | None = None,
    lt: float | None = None,
    le: float | None = None,
    integer: bool = False,
    none: bool = False,
) -> Any:
    """A dataclass field with its default and its declared range (module docstring); typed
    ``Any``, as ``dataclasses.field`` is, so that it stands for the field's own type."""
    return field(default=default, metadata={"range": Range(gt, ge, lt, le, integer, none)})


def _base_type(tp: object) -> object:
    """``float`` for ``float``, ``"float"``, ``float | None`` and ``Optional[float]``; the
    type itself otherwise (the resolved annotation, or its string when it cannot resolve)."""
    names = {"float": float, "int": int, "bool": bool}
    if isinstance(tp, str):
        parts = [p.strip() for p in tp.replace("Optional[", "").rstrip("]").split("|")]
        parts = [p for p in parts if p != "None"]
        return names.get(parts[0], tp) if len(parts) == 1 else tp
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    union = typing.get_origin(tp) in (typing.Union, types.UnionType)
    return args[0] if union and len(args) == 1 else tp


def _optional(tp: object) -> bool:
    return ("None" in tp) if isinstance(tp, str) else type(None) in typing.get_args(tp)


def declared(cls: type[DataclassInstance], kind: str) -> dict[str, Range]:
    """Each parameter of the dataclass ``cls`` with its range: declared, or its kind's default
    by type; a field of another type and without a declaration is left out."""
    out: dict[str, Range] = {}
    for f in fields(cls):
        if "range" in f.metadata:
            out[f.name] = f.metadata["range"]
            continue
        r = DEFAULTS[kind].get(_base_type(f.type))
        if r is not None:
            out[f.name] = (
                Range(**{**vars(r), "none": _optional(f.type)}) if _optional(f.type) else r
            )
    return out


class Parameterized(Protocol):
    """An algorithm, regularizer or compressor: a dataclass with a registry name."""

    __dataclass_fields__: ClassVar[dict[str, Any]]
    name: ClassVar[str]


def check(obj: Parameterized, kind: str) -> None:
    """Refuse the first parameter of ``obj`` outside its range: ``algorithm.mu must be >= 0,
    got -1 (as declared by algorithm fedprox)`` (a :class:`UserError`)."""
    for name, r in declared(type(obj), kind).items():
        v = getattr(obj, name)
        require(r.ok(v), f"{kind}.{name} must be {r}, got {v!r} (as declared by {kind} {obj.name})")


def signature(cls: type[DataclassInstance], kind: str) -> str:
    """``alpha > 0 (1), mu >= 0 (0.01)``: the parameters with their ranges and defaults."""
    ranges = declared(cls, kind)
    return ", ".join(
        (f"{f.name} {ranges[f.name]}" if f.name in ranges else f.name)
        + ("" if f.default is MISSING else f" ({f.default!r})")
        for f in fields(cls)
    )
