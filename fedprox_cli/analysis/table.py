"""Tables of run groups (``fedrun-table``): final metrics, mean ± std over seeds, as Markdown,
LaTeX (booktabs: one header row, the caption saying what is shown; :func:`.latex.booktabs`) or CSV.

One mechanism, :class:`Spec`: any metrics (``metrics.csv`` columns) and any grouping by name --
``rows`` (config keys; by default the keys that tell the groups apart) and an optional
``column`` key whose values become columns (one per value and metric). Cells come from
:func:`pivot` (a cell is exactly one group: nothing is pooled but seeds) and read
``0.8100 ± 0.0100`` in the metric's format (:mod:`common.metric_table`) or at ``precision``
decimals; a fraction the table says in percent (accuracy) reads ``82.5 ± 1.2`` in Markdown and
LaTeX, ``(%)`` after its name, with the decimals that give the metric's largest std over seeds
two significant digits (:meth:`Metric.format_for`), and stays a fraction (0-1) in the CSV,
which holds the numbers as the runs recorded them; how many runs a cell holds is said once below
the table when every cell holds as many, else in every cell (``(n=2)``), and runs left out are
always named in their cell (``(2 seeds; diverged 1 of 3)``). The best mean is bold -- the highest,
or the lowest where lower is better (:mod:`common.metric_table`) -- down each column, or across the
``column`` values of each row when there is a ``column`` (``bold``), only where it beats the
runner-up by more than the larger of their stds (the spread over seeds), as the note under the table
says; means equal at the precision shown are never bold. Methods read as the papers print them
(:mod:`.names`). The papers' layouts are named presets of it (:data:`PRESETS`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..common import metric_table as mt
from ..common.errors import require
from .caption import common_keys, listing, sentence
from .groups import (
    columns,
    config_key,
    fmt,
    shared,
    short,
)
from .latex import booktabs
from .legend import NAME
from .names import method_names
from .pivot import Table, pivot
from .run import Run
from .stats import Cell

FORMATS = {".md": "md", ".tex": "latex", ".csv": "csv"}
# The CSV's statistic columns: the ``:`` no config key has keeps them apart from the key columns
STATS = ("metric:name", "metric:mean", "metric:std", "metric:seeds", "metric:left_out")
BOLD = ("auto", "column", "row", "none")
Say = Callable[[str], str]  # a shown text as printed: renamed, or a method's printed name


@dataclass
class Spec:
    metrics: list[str] = field(default_factory=lambda: [mt.TEST_ACC.name])
    column: str | None = "algorithm.name"
    rows: list[str] | None = None  # None: the keys that tell the groups apart
    precision: int | None = None  # decimals; None: the metric's format (metric_table)
    bold: str = "auto"  # auto: across the column values if a column, else down columns
    ratio_to: str | None = None  # append each mean's ratio to this column value's, same row
    ratio_prev: bool = False  # ... and to the same column's mean in the previous row
    final: str = "last"
    # renames of shown values, keys, metrics (not in CSV)
    names: dict[str, str] = field(default_factory=dict)


PRESETS = {  # the papers' layouts
    "table6": Spec(metrics=[mt.TEST_ACC.name], column="algorithm.name"),  # FedCanon Table VI
    "table5": Spec(
        metrics=[mt.TIME.name],
        column="algorithm.name",
        rows=["K"],  # FedCanon Table V
        precision=1,
        ratio_to="fedcanon",
        ratio_prev=True,
    ),
}


def markdown(header: list[str], body: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in body]
    return "\n".join(lines)


@dataclass
class Built:
    """The table: per (row, column) its Cell, text and whether it is bold; the note under it."""

    index: pd.Index  # rows (a MultiIndex of the row keys' values, or one unnamed row)
    columns: pd.Index  # (metric, header) pairs, or the headers of one metric
    cells: pd.DataFrame  # Cell objects as shown: a fraction in percent (None: no such runs)
    text: pd.DataFrame  # the cells as text (without bold)
    bold: pd.DataFrame  # bool
    note: str
    tidy: pd.DataFrame  # one row per cell: row keys, column value, metric, mean, std, n, left out


def _spec(metric: str, precision: int | None, cells: list[Cell | None]) -> str:
    """The format of ``metric``'s numbers, ``cells`` as shown: ``precision`` decimals where
    given, else the metric's (:meth:`Metric.format_for`: for a percentage, the digits the
    largest spread over seeds supports)."""
    if precision is not None:
        return f".{precision}f"
    stds = [c.std for c in cells if c is not None and c.n > 1]
    return mt.metric(metric).format_for(max(stds) if stds else math.nan)


def _shown(cell: Cell | None, metric: str) -> Cell | None:
    """``cell`` as a table for people shows it: a fraction in percent (:meth:`Metric.shown`)."""
    m = mt.metric(metric)
    return (
        cell
        if cell is None or not m.percent
        else Cell(list(map(m.shown, cell.values)), cell.left_out)
    )


def _value(cell: Cell, spec: str, pm: str) -> str:
    return f"{cell.mean:{spec}}" + (f" {pm} {cell.std:{spec}}" if cell.n > 1 else "")


def _index(first: Table, say: Say) -> pd.Index:
    """The rows: a MultiIndex of the row keys' values (printed names), or one unnamed row."""
    if not first.row_keys:
        return pd.Index([""] * len(first.rows))
    return pd.MultiIndex.from_tuples(
        [
            tuple(say(fmt(r[k])) if r[k] is not None else "" for k in first.row_keys)
            for r in first.rows
        ],
        names=[say(name) for name in columns(first.row_keys).values()],
    )


def _columns(first: Table, spec: Spec, say: Say) -> pd.Index:
    """(metric, header) pairs, the headers of one metric, or the metrics (no column key), each
    metric with its unit (``test_acc (%)``)."""
    headers = [say(fmt(c)) + h[len(fmt(c)) :] for c, h in zip(first.cols, first.headers)]
    metrics = [say(m) + mt.metric(m).unit for m in spec.metrics]
    if not spec.column:
        return pd.Index(metrics)
    if len(spec.metrics) == 1:
        return pd.Index(headers)
    return pd.MultiIndex.from_tuples([(m, h) for m in metrics for h in headers])


def _texts(
    cells: pd.DataFrame,
    first: Table,
    spec: Spec,
    means: pd.DataFrame,
    uniform: bool,
    pm: str,
    specs: dict[str, str],
) -> pd.DataFrame:
    """Each cell as text (``0.8100 ± 0.0100``, its runs said in it unless ``uniform``), each
    metric in its format (``specs``, :func:`_spec`)."""
    text = pd.DataFrame("", index=cells.index, columns=cells.columns)
    for j, (m, c) in enumerate((m, c) for m in spec.metrics for c in first.cols):
        for i in range(len(cells.index)):
            cell = cells.iat[i, j]
            if cell is None:
                continue
            f = specs[m]
            t = _value(cell, f, pm) if uniform else cell.text(f).replace("±", pm)
            text.iat[i, j] = t + _ratios(spec, means, first.cols, i, j, c, m, first.row_keys)
    return text


def _bold(
    cells: pd.DataFrame, means: pd.DataFrame, first: Table, spec: Spec, specs: dict[str, str]
) -> pd.DataFrame:
    """Bold compares the means as printed: means equal to the precision shown are never bold."""
    stds = cells.map(lambda c: c.std if c is not None and c.n > 1 else 0.0)
    shown = means.copy()
    for j, (m, _) in enumerate((m, c) for m in spec.metrics for c in first.cols):
        f = specs[m]
        shown.iloc[:, j] = means.iloc[:, j].map(lambda v, f=f: float(f"{v:{f}}"))
    return _best(shown, stds, spec)


def caption(
    spec: Spec, first: Table, ns: Counter[int], uniform: bool, single: bool, say: Say
) -> str:
    """What the table shows, as sentences: the metrics at which evaluation, per what (the row
    and column keys), how many seeds a cell holds, and what bold means."""
    k = next(iter(ns)) if uniform else 0
    runs = (
        "one run (seed) per cell"
        if k == 1
        else f"mean ± std over {k} seeds per cell"
        if uniform
        else "mean ± std over the seeds in each cell"
    )
    final = (
        "the mean of the last 10% of evaluations" if spec.final == "tail" else "the last evaluation"
    )
    keys = [
        say(name)
        for name in columns([*first.row_keys, *([spec.column] if spec.column else [])]).values()
    ]
    per = f" per {listing(keys)}" if keys else ""
    what = listing(  # a metric in words (test accuracy), not its column name, unless renamed
        [
            (spec.names.get(m) or (mt.metric(m).words if m in mt.names() else m))
            + mt.metric(m).unit
            for m in spec.metrics
        ]
    )
    what = what[0].upper() + what[1:] if what.split()[0].isalpha() else what  # not test_acc
    text = f"{what} at {final}{per}: {runs}."
    if _how(spec) != "none":
        text += (
            f" Bold: the best mean {'of its row' if _how(spec) == 'row' else 'of its column'}, "
            f"where it beats the runner-up by more than the larger of their stds"
            + (" (one seed: by any margin shown)" if single else "")
            + "."
        )
    return text


def build(runs: list[Run], spec: Spec, pm: str = "±") -> Built:
    """The table of ``runs`` that ``spec`` describes (``pm``: the text of ±)."""
    require(spec.bold in BOLD, f"bold must be one of {', '.join(BOLD)}, got {spec.bold!r}")
    tables = {m: pivot(runs, m, spec.column, spec.final, spec.rows) for m in spec.metrics}
    first = next(iter(tables.values()))
    # methods as the papers print them, in the column's or a row key's values
    printed: dict[str, str] = {}
    for key in [*([spec.column] if spec.column else []), *(spec.rows or [])]:
        printed.update(method_names([r.config for r in runs], config_key(runs, key)))

    def say(v: str) -> str:
        return spec.names.get(v, printed.get(v, v))

    index, columns = _index(first, say), _columns(first, spec, say)
    cells = pd.DataFrame(  # as shown: a fraction in percent
        [
            [_shown(tables[m].cells.get((i, c)), m) for m in spec.metrics for c in first.cols]
            for i in range(len(first.rows))
        ],
        index=index,
        columns=columns,
    )
    width = len(first.cols)
    specs = {
        m: _spec(
            m, spec.precision, list(cells.iloc[:, b * width : (b + 1) * width].to_numpy().ravel())
        )
        for b, m in enumerate(spec.metrics)
    }
    every = [c for c in cells.to_numpy().ravel() if c is not None]
    ns = Counter(c.n for c in every)
    uniform = len(ns) == 1 and not any(c.left_out for c in every)
    means = cells.map(lambda c: c.mean if c is not None and c.n else math.nan)
    text = _texts(cells, first, spec, means, uniform, pm, specs)
    note = caption(spec, first, ns, uniform, any(c.n == 1 for c in every), say)
    common = shared(runs)
    told = [NAME, *([config_key(runs, spec.column)] if spec.column else [])]
    told += [config_key(runs, k) for k in spec.rows or []]
    named = method_names([r.config for r in runs], NAME)
    methods = list(dict.fromkeys(named.get(str(r.config.get(NAME)), "") for r in runs))
    where = sentence(
        [m for m in methods if m], common, common_keys(common, [r.config for r in runs]), told
    )
    note = f"{where} {note}" if where else note  # the setting all cells share, then what they show
    return Built(
        index,
        columns,
        cells,
        text,
        _bold(cells, means, first, spec, specs),
        note,
        _tidy(tables, spec),
    )


def _ratios(
    spec: Spec,
    means: pd.DataFrame,
    cols: list[Any],
    i: int,
    j: int,
    c: object,
    m: str,
    row_keys: list[str],
) -> str:
    notes = []
    here = means.iat[i, j]
    block = spec.metrics.index(m) * len(cols)
    if spec.ratio_to is not None and fmt(c) != spec.ratio_to and spec.ratio_to in map(fmt, cols):
        ref = means.iat[i, block + [fmt(v) for v in cols].index(spec.ratio_to)]
        if math.isfinite(here) and math.isfinite(ref):
            notes.append(f"{here / ref:.2f}× {spec.ratio_to}")
    if spec.ratio_prev and i > 0 and math.isfinite(here) and math.isfinite(means.iat[i - 1, j]):
        notes.append(
            f"{here / means.iat[i - 1, j]:.2f}× prev. {short(row_keys[0]) if row_keys else 'row'}"
        )
    return f" [{'; '.join(notes)}]" if notes else ""


def _how(spec: Spec) -> str:
    return spec.bold if spec.bold != "auto" else ("row" if spec.column else "column")


def _best(means: pd.DataFrame, stds: pd.DataFrame, spec: Spec) -> pd.DataFrame:
    """Whether each cell holds the best mean of its comparison (two or more finite means) by
    more than the spread: best - runner-up > max(std of either)."""
    bold = np.zeros(means.shape, bool)
    how = _how(spec)
    if how == "none":
        return pd.DataFrame(bold, index=means.index, columns=means.columns)
    width = means.shape[1] // len(spec.metrics)
    for b, m in enumerate(spec.metrics):
        part = means.iloc[:, b * width : (b + 1) * width].to_numpy(float)
        spread = stds.iloc[:, b * width : (b + 1) * width].to_numpy(float)
        sign = -float(mt.metric(m).direction.sign)
        scored = np.where(np.isfinite(part), sign * part, -np.inf)
        lines = scored.T if how == "column" else scored
        spreads = spread.T if how == "column" else spread
        out = np.zeros(lines.shape, bool)
        for i, line in enumerate(lines):
            order = np.argsort(-line, kind="stable")
            if np.isfinite(line).sum() < 2:
                continue
            first, second = order[0], order[1]
            margin = line[first] - line[second]
            if (
                margin > max(np.nan_to_num(spreads[i, first]), np.nan_to_num(spreads[i, second]))
                and margin > 0
            ):
                out[i, first] = True
        bold[:, b * width : (b + 1) * width] = out.T if how == "column" else out
    return pd.DataFrame(bold, index=means.index, columns=means.columns)


def _tidy(tables: dict[str, Any], spec: Spec) -> pd.DataFrame:
    """One row per cell: the row keys' and the column key's values as the runs have them,
    under names that no statistic column (:data:`STATS`) shares, then the statistics."""
    first = next(iter(tables.values()))
    keys = [*first.row_keys, *([spec.column] if spec.column else [])]
    name = columns(keys, reserved=STATS)
    records = []
    for m, t in tables.items():
        for (i, c), cell in t.cells.items():
            left = "; ".join(f"{why} {k}" for why, k in sorted(cell.left_out.items()))
            values = {**t.rows[i], **({spec.column: c} if spec.column else {})}
            stats = (m, cell.mean, cell.std, cell.n, left)
            records.append({**{name[k]: values[k] for k in keys}, **dict(zip(STATS, stats))})
    return pd.DataFrame.from_records(records, columns=[*name.values(), *STATS])


def render(runs: list[Run], spec: Spec, fmt_name: str = "md", label: str = "") -> str:
    """The table as ``md`` (Markdown, the note as a line below), ``latex`` (booktabs, bold with
    ``\\textbf``, the note as the caption, ``label`` its ``\\label``: by default ``tab:`` and
    the metrics) or ``csv`` (one row per cell, numbers)."""
    if fmt_name == "csv":
        return str(build(runs, spec).tidy.to_csv(index=False))
    if fmt_name == "latex":
        return booktabs(build(runs, spec, pm=r"$\pm$"), label or "tab:" + "-".join(spec.metrics))
    require(fmt_name == "md", f"format must be md, latex or csv, got {fmt_name!r}")
    b = build(runs, spec)
    shown = b.text.where(~b.bold, "**" + b.text + "**")
    heads = [": ".join(map(str, c)) if isinstance(c, tuple) else str(c) for c in b.columns]
    names = [n for n in b.index.names if n is not None]
    rows = [
        [*(list(k) if isinstance(k, tuple) else ([k] if names else [])), *vals]
        for k, vals in zip(b.index, shown.to_numpy().tolist())
    ]
    return markdown([*names, *heads], rows) + f"\n\n{b.note}\n"


def output_format(out: Path | None, given: str | None) -> str:
    """``given``, else the format ``out``'s suffix names (.md, .tex, .csv), else Markdown."""
    if given:
        return given
    if out is None:
        return "md"
    require(
        out.suffix in FORMATS,
        f"--out {out}: the suffix names the format (.md, .tex or .csv), or give --format",
    )
    return FORMATS[out.suffix]


def preset(name: str, **changes: Any) -> Spec:  # changes: Spec's fields, None: the preset's
    require(name in PRESETS, f"unknown preset {name!r} (presets: {', '.join(PRESETS)})")
    return replace(PRESETS[name], **{k: v for k, v in changes.items() if v is not None})
