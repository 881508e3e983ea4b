"""Units of a benchmark file under the results root: ``scripts/bench_prox.py``'s table (one unit
per model of the test's ``values``: the ``(r x)`` ratio in the test metric's column), or lines of
time per round (``T5 METHOD K=k STATUS s_per_round S ...``: one unit per compared method and K,
its time per round over the base method's at the same K)."""

from __future__ import annotations

import re
from pathlib import Path

from ..common import metric_table as mt
from ..common.errors import require
from .declare import Claim, Test
from .text import shown
from .units import Unit, within

PROX_ROW = re.compile(r"^(\S+)\s+[\d,]+\s+[\d.]+\s+(.*)$")
ROUND_ROW = re.compile(r"^\S+\s+(\S+)\s+K=(\d+)\s+finished\s+s_per_round\s+([\d.eE+-]+)")
PER_ROUND = {mt.TIME.name: "s_per_round"}  # a test's metric -> the column a per-round file holds


def _prox_units(t: Test, lines: list[str], path: Path, claim: Claim) -> list[Unit]:
    header: list[str] | None = None
    rows: dict[str, dict[str, float]] = {}  # model -> ratio by column
    for line in lines:
        if line.startswith("Models"):
            header = re.split(r"\s{2,}", line.strip())[3:]
        elif header and (m := PROX_ROW.match(line)):
            ratios = [float(x) for x in re.findall(r"\(([\d.]+)x\)", m.group(2))]
            rows.setdefault(m.group(1), dict(zip(header, ratios)))
    out = []
    for model in t.values:
        require(
            model in rows and t.metric in rows[model],
            f"claim {claim.id}: {path} has no {t.metric} ratio for {model}",
        )
        value = rows[model][t.metric]
        out.append(Unit(str(model), value, within(value, t.holds)))
    return out


def _round_units(t: Test, lines: list[str], path: Path, claim: Claim) -> list[Unit]:
    require(t.metric in PER_ROUND, f"claim {claim.id}: {path} holds no {t.metric} (time per round)")
    at: dict[tuple[str, int], float] = {}  # (method, K) -> seconds a round
    for line in lines:
        if m := ROUND_ROW.match(line):
            at[(m.group(1), int(m.group(2)))] = float(m.group(3))
    out = []
    for K in sorted({k for _, k in at}):
        base = at.get((shown(t.base), K))
        for v in t.values:
            if base and (shown(v), K) in at:
                value = at[(shown(v), K)] / base
                out.append(Unit(f"{shown(v)}, K={K}", value, within(value, t.holds)))
    require(out, f"claim {claim.id}: {path} has no {t.metric} of {shown(t.base)} and another")
    return out


def measures(t: Test, path: Path) -> bool:
    """Whether the benchmark file ``path`` holds the number ``t`` reads: a prox table's
    ratios for a test of the benchmark, a file of time per round for a ratio of times across the
    whole run set (no panels: the file has none)."""
    if t.source == "bench":
        return True
    return t.kind == "ratio" and t.metric in PER_ROUND and not t.panels and path.is_file()


def units(t: Test, path: Path, claim: Claim) -> list[Unit]:
    """The units of ``t`` read from the benchmark file ``path`` (either kind, by its rows)."""
    require(path.is_file(), f"claim {claim.id}: no benchmark file {path}")
    lines = path.read_text().splitlines()
    if any(line.startswith("Models") for line in lines):
        return _prox_units(t, lines, path, claim)
    return _round_units(t, lines, path, claim)
