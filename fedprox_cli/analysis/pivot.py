"""A table's cells: the final metric per row x column, one run group per cell (:func:`pivot`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..common.errors import require
from .groups import config_key, fmt, group, is_number, label_keys, short, table_keys
from .run import Run
from .stats import Cell


@dataclass
class Table:
    row_keys: list[str]  # the config keys naming the rows
    rows: list[dict[str, Any]]  # per row: its values of row_keys
    cols: list[Any]  # the values of the column key (config values)
    headers: list[str]  # per column: its value, plus keys fixed by it alone
    cells: dict[tuple[int, Any], Cell]  # (row index, column value) -> Cell (absent: no such runs)


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
    header_keys: list[str] = []
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
