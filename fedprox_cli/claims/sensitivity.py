"""How far a claim's word depends on what the paper left open: a run set that declares
``choices`` (grid keys the paper does not fix, e.g. FedCEF's momentum eta, a step it does not
state) is read once per combination of their values, by the same primary tests and the same
rule (:func:`.verdict.word`); it never decides the claim's word. :func:`summary` says whether the
word holds across the choices ("robust") or on which it depends ("depends on eta: reproduced at
0.1, not at 0.3"); a combination not run yet is named, never guessed."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from ..analysis import groups
from .declare import Claim, Point, RunSet


@dataclass
class Choice:
    values: Point  # ((key, value), ...) of the open choices
    word: str  # the rule's word on the runs at these values ("not run": none made)
    present: int
    declared: int
    diverged: int = 0  # of the runs present
    supporting: bool = False  # a grid value the paper fixes, moved off it: shown, never deciding


def varied(rs: RunSet) -> list[str]:
    """The grid keys read per value: the open choices, then the keys the paper fixes that the
    grid also moves (outside ``where``; their first value is the paper's)."""
    fixed = [k for k, vs in rs.grid.items() if k not in rs.choices and k not in rs.where]
    return [*rs.choices, *(k for k in fixed if len(rs.grid[k]) > 1)]


def combos(rs: RunSet) -> list[Point]:
    keys = varied(rs)
    return [tuple(zip(keys, vs)) for vs in itertools.product(*(rs.grid[k] for k in keys))]


def supporting(rs: RunSet, values: Point) -> bool:
    """Whether ``values`` move a key the paper fixes off the paper's value (the grid's first)."""
    return any(k not in rs.choices and v != rs.grid[k][0] for k, v in values)


def label(values: Point) -> str:
    return ", ".join(f"{k.rsplit('.', 1)[-1]} = {groups.fmt(v)}" for k, v in values)


def summary(claim: Claim, rs: RunSet, found: list[Choice]) -> str:
    """One sentence: robust (the same word at every combination, all run), what the word
    depends on, or, while combinations are missing, the words so far and the missing ones;
    then the supporting combinations (a fixed value moved), each with its word, never deciding."""
    text = _deciding(rs, [c for c in found if not c.supporting])
    aside = [c for c in found if c.supporting]
    if aside:
        text += "; supporting, off the paper's fixed values (shown, never deciding): " + (
            "; ".join(
                f"{c.word} at {label(c.values)} ({c.diverged} of {c.present} runs diverged)"
                for c in aside
            )
        )
    names = " and ".join(k.rsplit(".", 1)[-1] for k in rs.choices)
    return f"Open choices ({names}): {text}."


def _deciding(rs: RunSet, found: list[Choice]) -> str:
    full = [c for c in found if c.present and c.present == c.declared]
    missing = [c for c in found if c.present < c.declared]
    words = {c.word for c in full}
    if not missing and len(words) == 1:
        text = (
            f"robust: **{words.pop()}** at each of the {len(full)} combinations ({_diverged(full)})"
        )
    elif not missing and (key := _deciding_key(rs, full)) is not None:
        per: dict[str, Any] = {}
        for c in full:
            per.setdefault(c.word, []).append(groups.fmt(dict(c.values)[key]))
        text = (
            f"depends on {key.rsplit('.', 1)[-1]}: "
            + ", ".join(f"{w} at {', '.join(dict.fromkeys(vs))}" for w, vs in per.items())
            + f" ({_diverged(full)})"
        )
    else:
        text = (
            "; ".join(
                f"{c.word} at {label(c.values)} ({c.diverged} of {c.present} runs diverged)"
                for c in full
            )
            or "no combination fully run"
        )
        if missing:
            text = f"not settled ({len(full)} of {len(found)} combinations fully run): {text}"
    if missing:
        text += "; not (fully) run here: " + "; ".join(
            f"{label(c.values)} ({c.present} of {c.declared} runs"
            + (f", {c.diverged} of them diverged" if c.present else "")
            + ")"
            for c in missing
        )
    return text


def _diverged(full: list[Choice]) -> str:
    """Where runs diverged, per combination (what a word of "robust" alone would not say)."""
    hit = [c for c in full if c.diverged]
    if not hit:
        return "no run diverged"
    rest = len(full) - len(hit)
    return (
        "runs diverged: "
        + "; ".join(f"{c.diverged} of {c.present} at {label(c.values)}" for c in hit)
        + (f"; none at the other {rest} combination{'s' * (rest > 1)}" if rest else "")
    )


def _deciding_key(rs: RunSet, full: list[Choice]) -> str | None:
    """The one open choice whose value alone fixes the word (None: no single one)."""
    for k in rs.choices:
        by: dict[object, set[str]] = {}  # the choice's value -> the words at it
        for c in full:
            by.setdefault(dict(c.values)[k], set()).add(c.word)
        if all(len(w) == 1 for w in by.values()):
            return k
    return None
