"""The papers' tables in their rows and columns, the paper's numbers beside ours (FedCanon Tables
I, III, V and VI), as Markdown (in the report) and LaTeX (booktabs, beside it), from a claim's
``table:`` declaration: its ``kind`` says where ours come from, ``columns`` and ``paper`` (rows
of the paper's cells as printed) what the paper states.

- ``bench`` (Table I): a benchmark file's rows (``file``), one per model; each cell of ours
  ``ms (ratio×)`` beside the paper's.
- ``counts`` (Table III): per method row, the prox calls and floats per client per round that
  the runs counted (``prox_calls``, ``bytes_up + bytes_down`` over 4 bytes, n, T and d), beside
  the paper's formulas and their value at the runs' N and K.
- ``runs`` (Tables V, VI): the paper's rows, then ours in the same columns (``key`` rows,
  ``column`` methods, ``metric`` at ``at``): ``mean ± std`` or, with ``ratio``, the time and its
  ratios to the first column and to the previous row, as the paper prints them. Ours bold only
  where the best beats the runner-up by more than the larger std (the note says so); with one
  run per cell (no std) nothing is bold.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..analysis import groups as grouping
from ..analysis.names import method_names
from ..analysis.run import BYTES, Run
from ..analysis.stats import Cell
from ..common import guarded
from ..common import metric_table as mt
from ..common.files import atomic_write_text
from .declare import Claim

if TYPE_CHECKING:
    from .evidence import Evidence

Warn = Callable[[str], None]

FORMATS = ("md", "tex")


def paths(claim: Claim, root: Path) -> list[Path]:
    return [root / "tables" / f"{claim.id}.{fmt}" for fmt in FORMATS]


def _bench(spec: dict[str, Any], root: Path) -> list[list[str]]:
    """The first block of the benchmark file: per model ``ms (ratio×)`` per column."""
    rows, started = [], False
    for line in guarded.read_text(root / spec["file"]).splitlines():
        if line.startswith("Models"):
            if started:
                break
            started = True
            continue
        if started and line.strip() and not line.startswith("#"):
            parts = line.split()
            cells = [parts[2]] + [
                f"{parts[i]} {parts[i + 1].replace('x)', '×)')}"
                for i in range(3, len(parts) - 1, 2)
            ]
            rows.append(cells)
    return rows


def _runs(claim: Claim, evidence: list[Evidence], root: Path, warn: Warn) -> list[Run]:
    from .loading import load_runs

    for ev in evidence:
        if ev.present and ev.runset.folders:
            return [
                r
                for r in load_runs(claim, ev.read_as, root, warn)[0]
                if r.config.get("seed") in ev.read_as.seeds
            ]
    return []


def _by(runs: list[Run], key: str) -> dict[str, list[Run]]:
    out: dict[str, list[Run]] = {}
    for r in runs:
        out.setdefault(grouping.fmt(r.config.get(grouping.config_key([r], key))), []).append(r)
    return out


def _counts(spec: dict[str, Any], runs: list[Run]) -> dict[str, list[str]]:
    """Per method (its printed name): prox calls and floats per client per round, counted."""
    out: dict[str, list[str]] = {}
    names = method_names([r.config for r in runs], grouping.config_key(runs, spec["column"]))
    for value, rs in _by(runs, spec["column"]).items():
        r = rs[0]
        T, n = r.final(mt.ROUND.name), r.config["n"]
        d = r.summary.get("dimension")
        prox = r.final(mt.PROX_CALLS.name) / T
        floats = r.final(BYTES) / (4 * n * T * d) if d else math.nan
        out[names.get(value, value)] = [
            f"{prox:g}",
            f"{floats:.3g}d" if math.isfinite(floats) else "–",
        ]
    return out


def _ours_rows(spec: dict[str, Any], runs: list[Run]) -> tuple[list[list[str]], list[list[bool]]]:
    """Ours in the paper's columns: one row per value of ``key`` (after the ``extra`` leading
    cells of that value), a cell per method of ``column`` (``values`` in the paper's order);
    with ``ratio``, the mean and its ratios to the first column and to the previous row."""
    rows: list[list[str]] = []
    bold: list[list[bool]] = []
    before: dict[str, float] = {}
    at, prec = spec.get("at", "last"), spec.get("precision", 4)
    listed = list(spec.get("key_names", {}))  # the paper's row order, else by value
    for k, rs in sorted(
        _by(runs, spec["key"]).items(),
        key=lambda kv: (
            listed.index(kv[0]) if kv[0] in listed else len(listed),
            grouping.order([_num(kv[0])]),
        ),
    ):
        cells = {v: Cell.of(g, spec["metric"], at) for v, g in _by(rs, spec["column"]).items()}
        row: list[str] = []
        means: list[tuple[float, float]] = []
        for i, v in enumerate(spec["values"]):
            c = cells.get(v)
            if c is None or not c.n:
                row.append(c.text() if c is not None else "–")
                means.append((math.nan, 0.0))
                continue
            if spec.get("ratio"):
                base = cells.get(spec["values"][0])
                notes = [f"{c.mean / base.mean:.2f}×"] if i and base is not None and base.n else []
                notes += [f"{c.mean / before[v]:.2f}× prev."] if v in before else []
                text = f"{c.mean:.{prec}f}" + (f" ({'; '.join(notes)})" if notes else "")
            else:
                text = f"{c.mean:.{prec}f}" + (f" ± {c.std:.{prec}f}" if c.n > 1 else "")
            row.append(text)
            means.append((c.mean, c.std if c.n > 1 else math.nan))
        before = {v: c.mean for v, c in cells.items() if c.n}
        lead = [*spec.get("extra", []), spec.get("key_names", {}).get(k, k)]
        rows.append([*lead, *row])
        bold.append(
            [False] * len(lead)
            + ([False] * len(row) if spec.get("ratio") else _best(means, spec["metric"]))
        )
    return rows, bold


def _num(v: str) -> float | str:
    try:
        return float(v)
    except ValueError:
        return v


def _best(means: list[tuple[float, float]], metric: str) -> list[bool]:
    """Bold the best mean where it beats the runner-up by more than the larger of their stds
    (one run has no std: nothing bold)."""
    sign = -mt.metric(metric).direction.sign
    ok = [i for i, (m, _) in enumerate(means) if math.isfinite(m)]
    out = [False] * len(means)
    if len(ok) < 2:
        return out
    first, second = sorted(ok, key=lambda i: -sign * means[i][0])[:2]
    spread = (means[first][1], means[second][1])
    if all(math.isfinite(x) for x in spread) and sign * (means[first][0] - means[second][0]) > max(
        means[first][1], means[second][1]
    ):
        out[first] = True
    return out


def _paired(
    spec: dict[str, Any], paper: list[list[str]], ours: list[list[str]]
) -> tuple[list[str], list[list[str]]]:
    """Header and rows with each column as (paper, ours) beside each other."""
    header = [
        spec["columns"][0],
        *(f"{c} ({w})" for c in spec["columns"][1:] for w in ("paper", "ours")),
    ]
    return header, [
        [p[0], *(x for pair in zip(p[1:], o) for x in pair)] for p, o in zip(paper, ours)
    ]


def _counted(spec: dict[str, Any], paper: list[list[str]], runs: list[Run]) -> list[list[str]]:
    """Ours per row of a ``counts`` table (a row naming several methods: theirs, joined)."""
    ours = _counts(spec, runs)
    out: list[list[str]] = []
    for p in paper:
        found = [ours[m] for m in p[0].split(" / ") if m in ours]
        if not found:
            out.append(["–", "–"])
        elif all(f == found[0] for f in found):
            out.append(found[0])
        else:
            out.append([" / ".join(f[i] for f in found) for i in range(2)])
    return out


def build(
    claim: Claim, evidence: list[Evidence], root: Path, warn: Warn
) -> tuple[list[str], list[list[str]], list[list[bool]], str]:
    """The header, rows, bold marks and note of ``claim``'s table."""
    spec = claim.table_spec
    assert spec is not None, f"claim {claim.id} declares no table"
    kind, paper = spec["kind"], [[str(c) for c in row] for row in spec["paper"]]
    if kind in ("bench", "counts"):
        ours = (
            _bench(spec, root)
            if kind == "bench"
            else _counted(spec, paper, _runs(claim, evidence, root, warn))
        )
        header, rows = _paired(spec, paper, ours)
        return header, rows, [[False] * len(header) for _ in rows], spec["note"]
    runs = _runs(claim, evidence, root, warn)
    header = ["", *spec["columns"]]
    rows = [["paper", *p] for p in paper]
    bold = [[False, *(c.startswith("**") for c in p)] for p in paper]
    rows = [[c.strip("*") for c in r] for r in rows]
    mine, mine_bold = _ours_rows(spec, runs)
    rows += [["ours", *r] for r in mine]
    bold += [[False, *b] for b in mine_bold]
    note = spec["note"] + (
        "; ours bold where the best mean beats the runner-up by more than the larger of their "
        "stds (one run per cell: none)"
        if not spec.get("ratio")
        else ""
    )
    return header, rows, bold, note


def markdown(
    header: list[str], rows: list[list[str]], bold: list[list[bool]], note: str, caption: str
) -> str:
    def esc(s: str) -> str:
        return s.replace("|", "\\|")

    lines = [
        f"*{caption}*",
        "",
        "| " + " | ".join(map(esc, header)) + " |",
        "|" + "---|" * len(header),
    ]
    lines += [
        "| " + " | ".join(f"**{esc(c)}**" if b and c else esc(c) for c, b in zip(r, bs)) + " |"
        for r, bs in zip(rows, bold)
    ]
    return "\n".join([*lines, "", note]) + "\n"


def latex(
    header: list[str], rows: list[list[str]], bold: list[list[bool]], note: str, caption: str
) -> str:
    def tex(s: str) -> str:
        s = s.replace("\\", r"\textbackslash{}")
        for a, b in (
            ("&", r"\&"),
            ("%", r"\%"),
            ("_", r"\_"),
            ("#", r"\#"),
            ("±", r"$\pm$"),
            ("×", r"$\times$"),
            ("ℓ", r"$\ell$"),
            ("|", r"$|$"),
        ):
            s = s.replace(a, b)
        return s

    body = [
        " & ".join(rf"\textbf{{{tex(c)}}}" if b and c else tex(c) for c, b in zip(r, bs)) + r" \\"
        for r, bs in zip(rows, bold)
    ]
    return (
        "\n".join(
            [
                r"\begin{table}",
                r"\centering",
                rf"\caption{{{tex(caption)}}}",
                rf"\begin{{tabular}}{{{'l' * len(header)}}}",
                r"\toprule",
                " & ".join(map(tex, header)) + r" \\",
                r"\midrule",
                *body,
                r"\bottomrule",
                r"\end{tabular}",
                "",
                rf"\smallskip{{\footnotesize {tex(note)}}}",
                r"\end{table}",
            ]
        )
        + "\n"
    )


def texts(claim: Claim, evidence: list[Evidence], root: Path, warn: Warn) -> dict[str, str]:
    header, rows, bold, note = build(claim, evidence, root, warn)
    assert claim.table_spec is not None  # (build refuses a claim without one)
    caption = f"{claim.paper} {claim.where.split(', ')[-1]}: {claim.table_spec['caption']}"
    return {
        "md": markdown(header, rows, bold, note, caption),
        "tex": latex(header, rows, bold, note, caption),
    }


def write_claim(claim: Claim, evidence: list[Evidence], root: Path, warn: Warn) -> list[Path]:
    """Write ``claim``'s table (if it declares one) as Markdown and LaTeX under ``root``/tables."""
    if not claim.table_spec:
        return []
    made = texts(claim, evidence, root, warn)
    out = paths(claim, root)
    out[0].parent.mkdir(parents=True, exist_ok=True)
    for path in out:
        atomic_write_text(path, made[path.suffix[1:]])
    return out


def stale(claim: Claim, evidence: list[Evidence], root: Path, warn: Warn) -> list[str]:
    """One line per table file that differs from the one the runs make now (or is missing)."""
    if not claim.table_spec:
        return []
    made = texts(claim, evidence, root, warn)
    out = []
    for path in paths(claim, root):
        if not path.is_file():
            out.append(f"{claim.id}: {path} is missing (fedrun-reproduce report writes it)")
        elif path.read_text() != made[path.suffix[1:]]:
            out.append(f"{claim.id}: {path} differs from the table its runs make now")
    return out
