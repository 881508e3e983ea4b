"""Tables of run groups (``fedrun-table``): final metrics, mean ± std over seeds, as Markdown,
LaTeX (booktabs, through pandas' ``Styler.to_latex``) or CSV.

One mechanism, :class:`Spec`: any metrics (``metrics.csv`` columns) and any grouping by name --
``rows`` (config keys; by default the keys that tell the groups apart) and an optional
``column`` key whose values become columns (one per value and metric). Cells come from
:func:`pivot` (a cell is exactly one group: nothing is pooled but seeds) and read
``0.8100 ± 0.0100`` at ``precision`` decimals; how many runs a cell holds is said once below
the table when every cell holds as many, else in every cell (``(n=2)``), and runs left out are
always named in their cell (``(2 seeds; diverged 1 of 3)``). The best mean is bold -- the
highest, or the lowest for the metrics in :data:`LOWER_IS_BETTER` -- down each column, or across
the ``column`` values of each row when there is a ``column`` (``bold``), only where it beats the
runner-up by more than the larger of their stds (the spread over seeds), as the note under the
table says; means equal at the precision shown are never bold. Methods read as the papers print
them (:mod:`.names`). The papers' layouts are named presets of it (:data:`PRESETS`).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from ..common.errors import require
from ..runs.outputs import LOWER_IS_BETTER
from .groups import config_key, fmt, group, is_number, label_keys, short, table_keys
from .names import method_names
from .run import LOG_Y, Run
from .stats import Cell

FORMATS = {".md": "md", ".tex": "latex", ".csv": "csv"}
BOLD = ("auto", "column", "row", "none")


@dataclass
class Spec:
    metrics: list[str] = field(default_factory=lambda: ["test_acc"])
    column: str | None = "algorithm.name"
    rows: list[str] | None = None  # None: the keys that tell the groups apart
    precision: int | None = None  # decimals; None: 4 (3 significant digits for LOG_Y metrics)
    bold: str = "auto"  # auto: across the column values if a column, else down columns
    ratio_to: str | None = None  # append each mean's ratio to this column value's, same row
    ratio_prev: bool = False  # ... and to the same column's mean in the previous row
    final: str = "last"
    names: dict = field(default_factory=dict)  # renames of shown values, keys, metrics (not in CSV)


PRESETS = {  # the papers' layouts
    "table6": Spec(metrics=["test_acc"], column="algorithm.name"),  # FedCanon Table VI
    "table5": Spec(
        metrics=["time_s"],
        column="algorithm.name",
        rows=["K"],  # FedCanon Table V
        precision=1,
        ratio_to="fedcanon",
        ratio_prev=True,
    ),
}


@dataclass
class Table:
    row_keys: list[str]  # the config keys naming the rows
    rows: list[dict]  # per row: its values of row_keys
    cols: list  # the values of the column key
    headers: list[str]  # per column: its value, plus keys fixed by it alone
    cells: dict  # (row index, column value) -> Cell (absent: no such runs)


def pivot(
    runs: list[Run],
    metric: str,
    column: str | None = "algorithm.name",
    final: str = "last",
    rows: list[str] | None = None,
) -> Table:
    """Final ``metric`` per row x column: the columns are the values of ``column`` (one column,
    ``""``, without one), the rows the values of ``rows`` or, by default, of the keys that, with
    the column, tell every group apart (:func:`.groups.table_keys`), so a cell holds exactly one
    group and nothing is pooled (given ``rows`` that leave two groups in one cell are refused);
    a key fixed by the column alone is shown in the column header."""
    groups = group(runs, ignore=(), final=final)
    configs = [g.config for g in groups]
    if column is not None:
        column = config_key(runs, column)
        require(
            all(column in r.config for r in runs), f"some runs have no config key {short(column)!r}"
        )
    col_of = (lambda c: c[column]) if column else (lambda c: "")  # noqa: E731
    header_keys = []
    if rows is not None:
        keys = [config_key(runs, k) for k in rows]
        for k in keys:
            require(any(k in c for c in configs), f"no run has a config key {short(k)!r}")
        rest = label_keys(configs, given=[*([column] if column else []), *keys])
        require(
            not rest,
            f"rows {', '.join(map(short, keys)) or '(none)'} leave runs that differ in "
            f"{', '.join(map(short, rest))} in one cell; add them to --rows or filter with --where",
        )
    else:
        keys, header_keys = table_keys(configs, column)
    cols = list(dict.fromkeys(col_of(r.config) for r in runs))  # the sweep's order
    if all(is_number(c) for c in cols):
        cols.sort()
    table_rows, cells = [], {}
    for g in groups:
        values = {k: g.config.get(k) for k in keys}
        if values not in table_rows:
            table_rows.append(values)
        cell = (table_rows.index(values), col_of(g.config))
        assert cell not in cells, "two groups in one cell"  # by the choice of the row keys
        cells[cell] = Cell.of(g.runs, metric, final)
    by_col = {col_of(g.config): g.config for g in groups}
    headers = [
        fmt(c)
        + (
            " (" + ", ".join(f"{short(k)}={fmt(by_col[c].get(k))}" for k in header_keys) + ")"
            if header_keys
            else ""
        )
        for c in cols
    ]
    return Table(keys, table_rows, cols, headers, cells)


def markdown(header: list[str], body: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in body]
    return "\n".join(lines)


@dataclass
class Built:
    """The table: per (row, column) its Cell, text and whether it is bold; the note under it."""

    index: pd.Index  # rows (a MultiIndex of the row keys' values, or one unnamed row)
    columns: pd.Index  # (metric, header) pairs, or the headers of one metric
    cells: pd.DataFrame  # Cell objects (None: no such runs)
    text: pd.DataFrame  # the cells as text (without bold)
    bold: pd.DataFrame  # bool
    note: str
    tidy: pd.DataFrame  # one row per cell: row keys, column value, metric, mean, std, n, left out


def _spec(metric: str, precision: int | None) -> str:
    if precision is not None:
        return f".{precision}f"
    return ".3g" if metric in LOG_Y else ".4f"


def _value(cell: Cell, spec: str, pm: str) -> str:
    return f"{cell.mean:{spec}}" + (f" {pm} {cell.std:{spec}}" if cell.n > 1 else "")


def build(runs: list[Run], spec: Spec, pm: str = "±") -> Built:
    """The table of ``runs`` that ``spec`` describes (``pm``: the text of ±)."""
    require(spec.bold in BOLD, f"bold must be one of {', '.join(BOLD)}, got {spec.bold!r}")
    tables = {m: pivot(runs, m, spec.column, spec.final, spec.rows) for m in spec.metrics}
    first = next(iter(tables.values()))
    printed = {}  # methods as the papers print them, in the column's or a row key's values
    for key in [*([spec.column] if spec.column else []), *(spec.rows or [])]:
        printed.update(method_names([r.config for r in runs], config_key(runs, key)))
    say = lambda v: spec.names.get(v, printed.get(v, v))  # noqa: E731
    keys = [say(short(k)) for k in first.row_keys]
    if keys:
        index = pd.MultiIndex.from_tuples(
            [
                tuple(say(fmt(r[k])) if r[k] is not None else "" for k in first.row_keys)
                for r in first.rows
            ],
            names=keys,
        )
    else:
        index = pd.Index([""] * len(first.rows))
    headers = [say(fmt(c)) + h[len(fmt(c)) :] for c, h in zip(first.cols, first.headers)]
    metrics = [say(m) for m in spec.metrics]
    if len(spec.metrics) == 1:
        columns = pd.Index(headers) if spec.column else pd.Index(metrics)
    elif spec.column:
        columns = pd.MultiIndex.from_tuples([(m, h) for m in metrics for h in headers])
    else:
        columns = pd.Index(metrics)
    cells = pd.DataFrame(
        [
            [tables[m].cells.get((i, c)) for m in spec.metrics for c in first.cols]
            for i in range(len(first.rows))
        ],
        index=index,
        columns=columns,
    )
    ns = Counter(c.n for c in cells.to_numpy().ravel() if c is not None)
    uniform = len(ns) == 1 and all(c is None or not c.left_out for c in cells.to_numpy().ravel())
    means = cells.map(lambda c: c.mean if c is not None and c.n else math.nan)
    text = pd.DataFrame("", index=index, columns=columns)
    for j, (m, c) in enumerate((m, c) for m in spec.metrics for c in first.cols):
        for i in range(len(index)):
            cell = cells.iat[i, j]
            if cell is None:
                continue
            t = cell.text(_spec(m, spec.precision)).replace("±", pm)
            if uniform:
                t = _value(cell, _spec(m, spec.precision), pm)
            text.iat[i, j] = t + _ratios(spec, means, first.cols, i, j, c, m, first.row_keys)
    stds = cells.map(lambda c: c.std if c is not None and c.n > 1 else 0.0)
    shown = (
        means.copy()
    )  # bold compares the means as printed: equal to the precision shown, none bold
    for j, (m, _) in enumerate((m, c) for m in spec.metrics for c in first.cols):
        shown.iloc[:, j] = means.iloc[:, j].map(
            lambda v, f=_spec(m, spec.precision): float(f"{v:{f}}")  # noqa: B008 (bound per metric)
        )
    bold = _best(shown, stds, spec)
    k = next(iter(ns)) if uniform else 0
    n_text = (
        "one run (seed) per cell"
        if k == 1
        else f"mean {pm} std over {k} seeds per cell"
        if uniform
        else f"mean {pm} std over the seeds in each cell"
    )
    final = "mean of the last 10% of evaluations" if spec.final == "tail" else "last evaluation"
    note = f"{n_text}; {', '.join(map(say, spec.metrics))} at the {final}"
    if _how(spec) != "none":
        single = any(c is not None and c.n == 1 for c in cells.to_numpy().ravel())
        note += (
            f"; bold: the best mean {'of its row' if _how(spec) == 'row' else 'of its column'}, "
            f"where it "
            f"beats the runner-up by more than the larger of their stds"
            + (" (one seed: by any margin shown)" if single else "")
        )
    return Built(index, columns, cells, text, bold, note, _tidy(tables, spec))


def _ratios(
    spec: Spec, means: pd.DataFrame, cols: list, i: int, j: int, c, m: str, row_keys
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
        sign = -1.0 if m in LOWER_IS_BETTER else 1.0
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


def _tidy(tables: dict, spec: Spec) -> pd.DataFrame:
    records = []
    for m, t in tables.items():
        for (i, c), cell in t.cells.items():
            left = "; ".join(f"{why} {k}" for why, k in sorted(cell.left_out.items()))
            records.append(
                {
                    **{short(k): t.rows[i][k] for k in t.row_keys},
                    **({short(spec.column): c} if spec.column else {}),
                    "metric": m,
                    "mean": cell.mean,
                    "std": cell.std,
                    "n": cell.n,
                    "left_out": left,
                }
            )
    return pd.DataFrame.from_records(records)


def render(runs: list[Run], spec: Spec, fmt_name: str = "md") -> str:
    """The table as ``md`` (Markdown, the note as a line below), ``latex`` (booktabs, bold with
    ``\\textbf``, the note as the caption) or ``csv`` (one row per cell, numbers)."""
    if fmt_name == "csv":
        return build(runs, spec).tidy.to_csv(index=False)
    if fmt_name == "latex":
        return _latex(build(runs, spec, pm=r"$\pm$"))
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


def _latex(b: Built) -> str:
    styler = b.text.style.apply(
        lambda _: b.bold.map(lambda x: "textbf:--rwrap;" if x else ""), axis=None
    )
    styler = styler.format_index(escape="latex", axis=0).format_index(escape="latex", axis=1)
    if all(n is None for n in b.index.names) and len(b.index) <= 1:
        styler = styler.hide(axis="index")
    return styler.to_latex(
        hrules=True,
        caption=b.note.replace("_", r"\_"),
        position_float="centering",
        multicol_align="c",
        sparse_index=False,
    )


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


def preset(name: str, **changes) -> Spec:
    require(name in PRESETS, f"unknown preset {name!r} (presets: {', '.join(PRESETS)})")
    return replace(PRESETS[name], **{k: v for k, v in changes.items() if v is not None})
