"""How the claims print a value: a config value as tables show it, a unit's label, a number,
and a number near the threshold its test reads it against (with the digits that decide it)."""

from __future__ import annotations

import math
from typing import Any

from ..analysis import groups


def shown(v: object) -> str:
    """A config value as tables show it: a preset's algorithm choice by its method's name."""
    text = groups.fmt(v)
    return (
        text.rsplit("/", 1)[-1]
        if isinstance(v, str) and ("_fig" in text or "_table" in text)
        else text
    )


def canon(v: object) -> str:
    """A declared value as a key: numbers in one format, the rest as text."""
    return (
        groups.fmt(float(v)) if isinstance(v, (int, float)) and not isinstance(v, bool) else str(v)
    )


def key_name(key: str) -> str:
    """A config key as labels show it (its last part)."""
    return groups.short(key).rsplit(".", 1)[-1]


def value_name(key: str, v: object) -> str:
    """A compared value with its key ("K=40"; a method by its name alone)."""
    return shown(v) if key == "algorithm" else f"{key_name(key)}={shown(v)}"


def label(panel: tuple[tuple[str, Any], ...], seed: object) -> str:
    """A unit's label: its panel's values, then its seed (or "mean of N seeds": a mean curve's
    unit, :mod:`.mean_curve`)."""
    said = str(seed) if str(seed).startswith("mean of ") else f"seed {seed}"
    return ", ".join([*(f"{key_name(k)}={shown(v)}" for k, v in panel), said])


def num(v: float) -> str:
    if not math.isfinite(v):
        return "diverged" if math.isnan(v) else "inf"
    return f"{v:.2e}" if 0 < abs(v) < 1e-2 else f"{v:.3g}"


NEAR = 0.01  # a value within 1% of a threshold is printed with the digits that decide it


def apart(a: float, b: float) -> tuple[str, str]:
    """``a`` and ``b`` with the fewest significant digits (3 at least, 6 at most) at which they
    print differently: equal strings only where they agree to 6 digits (a tie)."""
    digits = 3
    while digits < 6 and f"{a:.{digits}g}" == f"{b:.{digits}g}":
        digits += 1
    return f"{a:.{digits}g}", f"{b:.{digits}g}"


def against(v: float, holds: dict[str, Any]) -> str:
    """``v`` as :func:`num` prints it, or, within 1% of a bound of ``holds`` (``min``, ``max``),
    with the digits that decide it and the bound beside it ("1.101 (max 1.1)"): the fewest (3 at
    least) whose rounding moves ``v`` by less than half its distance to the bound, so the printed
    margin is the measured one's sign and size (1.1059 against 1.1 prints 1.106, not 1.11)."""
    text = num(v)
    for side in ("min", "max"):
        bound = holds.get(side)
        if (
            bound is None
            or not math.isfinite(v)
            or v == bound
            or abs(v - bound) > NEAR * abs(bound or 1)
        ):
            continue
        digits = 3
        while digits < 12 and abs(float(f"{v:.{digits}g}") - v) >= abs(v - bound) / 2:
            digits += 1
        return f"{v:.{digits}g} ({side} {bound:g})"
    return text
