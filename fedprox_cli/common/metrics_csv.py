"""The numbers of a ``metrics.csv`` (:func:`run_files.read_metrics` reads the file and checks its
rows): its rows as a pandas table (:func:`table`) or as float columns without pandas
(:func:`columns`), and the rows whose loss is not finite, where the model metrics describe no
model (:func:`unfit_rows`, :func:`model_metrics_only`)."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from . import guarded, metric_table

if TYPE_CHECKING:  # pandas loads with the first table read
    import pandas as pd


def unfit_rows(table: Any) -> tuple[np.ndarray, list[str]]:
    """The rows of a metrics table (a DataFrame or a dict of columns) whose loss is not finite,
    and its model metrics (the columns other than counters and losses): a diverged run's model
    in those rows holds NaN or inf, so its accuracy (the argmax of NaN logits, i.e. class 0),
    sparsity and stationarity describe no model."""
    losses = [c for c in metric_table.LOSSES if c in table]
    if not losses:
        return np.zeros(0, bool), []
    bad = ~np.isfinite(np.column_stack([np.asarray(table[c], float) for c in losses])).all(axis=1)
    return bad, [c for c in table if c not in metric_table.COUNTERS and c not in losses]


def model_metrics_only(df: Any) -> Any:
    """A metrics table (a DataFrame or a dict of columns) whose model metrics are blanked (NaN)
    in the rows of :func:`unfit_rows`. The counters and the losses themselves (nan or inf, as
    recorded) stay."""
    bad, models = unfit_rows(df)
    if not bad.any():
        return df
    if isinstance(df, dict):
        return {c: np.where(bad, np.nan, v) if c in models else v for c, v in df.items()}
    df = df.copy()
    df.loc[bad, models] = np.nan
    return df


def numbers(column: pd.Series) -> pd.Series:
    """A column of number strings as numbers; ``nan`` and ``inf`` (a diverged run's last row, as
    ``repr`` writes them), which ``pd.to_numeric`` refuses, through ``float``; an empty cell NaN."""
    import pandas as pd

    try:
        return pd.to_numeric(column)
    except ValueError:
        return column.map(lambda c: float(c) if c.strip() else np.nan)


def table(data: bytes, header: list[str], lines: Iterable[str]) -> pd.DataFrame:
    """The checked rows of a metrics.csv as numbers: pandas' C reader, every cell as written
    (no "NA" taken for missing); a column it leaves as text (``nan``, ``inf``, or not numbers)
    through :func:`numbers`. A header naming a column twice: cell by cell."""
    import pandas as pd

    if len(set(header)) != len(header):
        header, *rows = list(csv.reader(lines))
        return pd.DataFrame(rows, columns=header).apply(numbers)
    df = guarded.parse_csv(data, keep_default_na=False, na_values=[])
    text = [
        c
        for c, t in df.dtypes.items()
        if not pd.api.types.is_numeric_dtype(t) or pd.api.types.is_bool_dtype(t)
    ]  # from the dtypes: a column taken out (df[c]) stays cached in the table, and in memory
    for c in text:
        df[c] = numbers(df[c].astype(str))
    return df


def columns(data: bytes, header: list[str], lines: Iterable[str]) -> dict[str, np.ndarray]:
    """The checked rows of a metrics.csv as float columns: numpy's C reader, or cell by cell
    (``float``; an empty cell NaN) where it refuses a cell; a value that is not a number raises
    ``ValueError``. A column named twice: its last."""
    try:
        table = np.loadtxt(lines, delimiter=",", skiprows=1, dtype=float, comments=None, ndmin=2)
    except ValueError:
        _, *rows = csv.reader(io.StringIO(data.decode("utf-8"), newline=""))
        cells = [[float(c) if c.strip() else np.nan for c in row] for row in rows]
        table = np.array(cells, dtype=float).reshape(len(cells), len(header))
    return {c: table[:, i] for i, c in enumerate(header)}
