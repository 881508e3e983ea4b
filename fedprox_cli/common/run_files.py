"""The files of a run folder, by name: the one place they are spelled. Every file is written
atomically (:func:`files.atomic_write`): a reader never sees a half-written file, and
concurrent jobs never share one.

- :data:`METRICS` ``metrics.csv``: one row per evaluated round (``common.metric_table.names()``)
- :data:`CONFIG` ``config.yaml``: the resolved config
- :data:`PARTITION` ``partition.npz``: per-client index arrays into the training set
- :data:`SUMMARY` ``summary.json``: the run's record (``runs.outputs.Summary``)
- :data:`METRICS_FIGURE` ``metrics.png``: loss, accuracy and stationarity against round
- :data:`CLIENTS`, :data:`CLIENTS_SUMMARY`, :data:`CLIENTS_FIGURE` ``clients.csv``,
  ``clients_summary.csv``, ``clients.png``: per-client metrics, with ``metrics.per_client=true``
  (``engine.clients``)
- :data:`CHECKPOINT` ``checkpoint.pt``: the state to resume from (``runs.checkpoint``);
  :data:`TRACKER` ``tracker.json``: an experiment tracker's run id (``runs.trackers``)
- :data:`HYDRA` ``.hydra/``: Hydra's record of the command (its config,
  Hydra's config and the overrides: :data:`HYDRA_CONFIG`, :data:`HYDRA_RECORD`, :data:`OVERRIDES`)
- :data:`LOG` ``fedrun.log``: every line fedrun printed about this run; :data:`ERROR_LOG`
  ``error.log``: the traceback of an internal error
- :data:`LOCK` ``.fedrun.lock``: held (``flock``) by the one process running in the folder
  (``runs.lock``), whose :data:`OWNER` ``.fedrun.owner`` records that process (``runs.owner``);
  :data:`KEPT` ``.kept/``: a finished run's files while it is extended
  (``runs.keep``)
- ``seed_<s>/`` (:func:`seed_folder`): the run folders of a seed batch (``seeds=R``)

Each file that is read back has one reader here, and no other module reads a run file
(``tests/test_guarded.py``; the checkpoint and the partition, binary state, are read by their
formats' owners, ``runs.checkpoint`` and ``data.partition``): ``summary.json`` typed
(:func:`read_summary`: :class:`SummaryRecord`, every field), ``config.yaml``
(:func:`read_config`, :func:`read_config_node`), ``metrics.csv`` (:func:`read_metrics`,
:func:`read_metric_columns`; its numbers: :mod:`metrics_csv`), Hydra's record
(:func:`read_hydra_config`, :func:`read_choices`, :func:`read_overrides`), the per-client
tables (:func:`read_clients`), ``tracker.json`` (:func:`read_tracker`) and ``fedrun.log``
(:func:`read_log`). Strict or lenient by argument: strict, a file that is there but cannot be
read as what it must be is one :class:`RunFileError` (a missing one the OS's
``FileNotFoundError``); lenient, either is the empty value. :func:`write` and
:func:`write_metrics` are the writers (atomic). The records that read runs back (the API's
``Run``, ``analysis.run.Run``, ``runs.recap.RunRecord``) are views made with these readers.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from omegaconf import DictConfig, OmegaConf

from . import guarded, metric_table, metrics_csv
from .errors import first_line
from .files import atomic_write_text, open_regular
from .run_file_error import RunFileError as RunFileError  # the error its readers raise
from .summary_record import SUMMARY_TYPES, typed
from .summary_record import SummaryRecord as SummaryRecord  # the record its readers give

if TYPE_CHECKING:  # pandas loads with the first table read
    import pandas as pd

METRICS = "metrics.csv"
METRICS_FIGURE = "metrics.png"
SUMMARY = "summary.json"
CONFIG = "config.yaml"
PARTITION = "partition.npz"
PARTITION_FIGURE = "partition.png"  # fedrun-plot --partition's default
CHECKPOINT = "checkpoint.pt"
TRACKER = "tracker.json"
CLIENTS = "clients.csv"
CLIENTS_SUMMARY = "clients_summary.csv"
CLIENTS_FIGURE = "clients.png"
LOG = "fedrun.log"
ERROR_LOG = "error.log"
LOCK = ".fedrun.lock"
OWNER = ".fedrun.owner"
KEPT = ".kept"
HYDRA = ".hydra"
HYDRA_CONFIG, HYDRA_RECORD, OVERRIDES = "config.yaml", "hydra.yaml", "overrides.yaml"
SEED_PREFIX = "seed_"

# the files of a run's record, which a finished run keeps while it is extended (runs.keep)
RECORD = (
    METRICS,
    METRICS_FIGURE,
    SUMMARY,
    CONFIG,
    PARTITION,
    CHECKPOINT,
    TRACKER,
    CLIENTS,
    CLIENTS_SUMMARY,
    CLIENTS_FIGURE,
)


def seed_folder(seed: int) -> str:
    """The name of seed ``seed``'s run folder in a seed batch's folder."""
    return f"{SEED_PREFIX}{seed}"


MAX_COLUMNS = 10_000  # a metrics table has tens of columns; a wider file is refused unread
_HEADER_BYTES = 1 << 20


def _width(path: Path) -> None:
    """Refuse a metrics.csv wider than :data:`MAX_COLUMNS` from its first line alone, before the
    file is read (a table of millions of columns would take all memory to parse)."""
    fd = open_regular(path)
    try:
        head = os.read(fd, _HEADER_BYTES)
    finally:
        os.close(fd)
    line, end, _ = head.partition(b"\n")
    if not end and len(head) == _HEADER_BYTES:
        raise RunFileError(
            path, f"is too wide: its header is longer than {_HEADER_BYTES:,} bytes; not read"
        )
    if line.count(b",") + 1 > MAX_COLUMNS:
        raise RunFileError(
            path,
            f"is too wide: {line.count(b',') + 1:,} columns, more than the {MAX_COLUMNS:,} a "
            f"metrics table may have; not read",
        )


def _checked(path: Path, lines: Iterable[str]) -> list[str]:
    """The header of a metrics.csv's ``lines`` once every row is checked to have its fields,
    row by row (no copy of the table is made: a file of a million rows is read in the memory
    of its numbers); :class:`RunFileError` for a cut row, no rows, a stray quote."""
    rows = csv.reader(lines)
    try:
        header = next(rows)
        n = 0
        for n, row in enumerate(rows, 1):
            if len(row) != len(header):
                raise RunFileError(
                    path, f"is cut (line {n + 1} has {len(row)} of {len(header)} fields)"
                )
    except csv.Error as e:  # a cell over the csv module's field limit (128 KB), a stray quote
        raise RunFileError.unreadable(path, e) from None
    if not n:
        raise RunFileError(path, "has a header and no rows")
    return header


def _metrics(
    folder: Path, table: Callable[[bytes, list[str], Iterable[str]], Any] = metrics_csv.table
) -> Any:
    """``metrics.csv`` checked (:func:`_checked`) and read by ``table`` (default
    :func:`metrics_csv.table`: a DataFrame), its model metrics blanked where the loss is not
    finite."""
    path = folder / METRICS
    try:
        _width(path)
        data = guarded.read_bytes(path, guarded.TABLE_BYTES)
        if not data.strip():
            raise RunFileError(path, "is empty")
        if not data.endswith(b"\n"):
            raise RunFileError(path, "is cut (no end of line after its last row)")
        header = _checked(path, guarded.lines(path, data))
        if (t := metric_table.ROUND.name) not in header:
            raise RunFileError(path, f"has no column '{t}' (columns: {', '.join(header)})")
        read = table(data, header, guarded.lines(path, data))
    except (RunFileError, FileNotFoundError, NotADirectoryError):
        raise
    except (guarded.Unreadable, OSError) as e:
        raise RunFileError.unreadable(path, e) from None
    except ValueError as e:
        raise RunFileError(path, f"holds a value that is not a number ({first_line(e)})") from None
    return metrics_csv.model_metrics_only(read)


def read_metrics(folder: str | os.PathLike[str], strict: bool = True) -> pd.DataFrame:
    """``metrics.csv`` as numbers (model metrics blanked where the loss is not finite:
    :func:`metrics_csv.model_metrics_only`), read in about the memory of its bytes and its
    numbers. Strict: :class:`RunFileError` if it is empty, cut (a row with fewer fields than the
    header, or no end of line after the last row) or not numbers; lenient: an empty table for
    those and for a missing file."""
    import pandas as pd

    try:
        return _metrics(Path(folder))
    except (RunFileError, FileNotFoundError, NotADirectoryError):
        if strict:
            raise
        return pd.DataFrame()


def read_metric_columns(folder: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """``metrics.csv`` as one float array per column, read and checked as :func:`read_metrics`
    (strict) reads it, without pandas: a run's figure is drawn without loading it."""
    columns: dict[str, np.ndarray] = _metrics(Path(folder), metrics_csv.columns)
    return columns


def _summary(folder: str | os.PathLike[str]) -> tuple[SummaryRecord, RunFileError | None]:
    """``summary.json``'s fields of the right types and, for a field of another type, the
    :class:`RunFileError` saying so (``is corrupt: its field 'status' is a int, not a str``);
    :class:`RunFileError` for a file that cannot be read as a JSON object, the OS's error for
    one that is not there."""
    path = Path(folder) / SUMMARY
    try:
        d = guarded.read_json(path)
    except RunFileError:
        raise
    except guarded.Unreadable as e:
        raise RunFileError.unreadable(path, e) from None
    if not isinstance(d, dict):
        why = f"not a JSON object (a {type(d).__name__})"
        raise RunFileError(path, f"is unreadable: {why}", why)
    corrupt = None
    wrong = next((k for k in SUMMARY_TYPES if k in d and not typed(k, d[k])), None)
    if wrong is not None:
        why = f"its field {wrong!r} is a {type(d[wrong]).__name__}, not a "
        wanted = " or ".join(
            "null" if c is type(None) else c.__name__ for c in SUMMARY_TYPES[wrong]
        )
        corrupt = RunFileError(path, f"is corrupt: {why}{wanted}")
    return cast(SummaryRecord, {k: v for k, v in d.items() if typed(k, v)}), corrupt


def read_summary(
    folder: str | os.PathLike[str], strict: bool = True, typed: bool = False
) -> SummaryRecord:
    """``summary.json``: a JSON object whose fields of :class:`SummaryRecord` have their types
    (a field of another type is left out, as if absent: any file, fedrun's or another tool's,
    reads without surprises); strict: :class:`RunFileError` for a file that cannot be read as
    a JSON object (cut short, too large, nested too deep), and with ``typed`` (the readers that
    report runs) for a field of another type too (``is corrupt: its field 'status' is a int,
    not a str``: never a run "not started"); lenient: ``{}`` for those and for a missing
    file."""
    try:
        summary, corrupt = _summary(folder)
        if corrupt is not None and strict and typed:
            raise corrupt
    except (RunFileError, OSError):
        if strict:
            raise
        return {}
    return summary


def read_summary_checked(
    folder: str | os.PathLike[str],
) -> tuple[SummaryRecord, RunFileError | None]:
    """``summary.json`` read once for a view of the run (``runs.view``): its fields of the right
    types (``{}`` when it is missing or cannot be read) and the :class:`RunFileError` of a file
    that cannot be read or holds a field of another type (None: none, or no file)."""
    try:
        return _summary(folder)
    except RunFileError as e:
        return {}, e
    except OSError:
        return {}, None


def read_config(folder: str | os.PathLike[str], strict: bool = True) -> dict[str, Any]:
    """``config.yaml`` as a nested dict, interpolations as written; strict: :class:`RunFileError`
    for a file that cannot be read, is empty or is no mapping; lenient: ``{}``."""
    path = Path(folder) / CONFIG
    try:
        try:
            cfg = guarded.read_mapping(path)
        except Exception as e:  # noqa: BLE001 -- yaml, OmegaConf and OS errors alike
            raise RunFileError.unreadable(path, e) from None
        if not isinstance(cfg, dict) or not cfg:
            raise RunFileError(path, "is empty or not a mapping")
    except RunFileError:
        if strict:
            raise
        return {}
    return cfg


def read_config_node(folder: str | os.PathLike[str], strict: bool = True) -> DictConfig:
    """``config.yaml`` as a ``DictConfig`` (:func:`read_config`; its interpolations resolvable,
    its ``_target_`` nodes instantiable); lenient: an empty one."""
    cfg = read_config(folder, strict)
    try:
        return OmegaConf.create(cfg)
    except Exception as e:  # noqa: BLE001 -- OmegaConf's own refusals (a key it cannot hold)
        if strict:
            raise RunFileError.unreadable(Path(folder) / CONFIG, e) from None
        return OmegaConf.create()


def read_hydra_config(folder: str | os.PathLike[str], strict: bool = True) -> dict[str, Any]:
    """The config of Hydra's record (``.hydra/config.yaml``) as a nested dict, ``{}`` without
    one; strict: :class:`RunFileError` for a record that cannot be read as a mapping; lenient:
    ``{}``."""
    path = Path(folder) / HYDRA / HYDRA_CONFIG
    if not path.is_file():
        return {}
    try:
        return guarded.read_mapping(path)
    except Exception as e:  # noqa: BLE001 -- any unreadable record is one broken run
        if strict:
            raise RunFileError.unreadable(path, e) from None
        return {}


def read_tracker(folder: str | os.PathLike[str]) -> dict[str, Any]:
    """An experiment tracker's record of the run (``tracker.json``: its target and run id);
    ``{}`` without one or for one that cannot be read (the tracker starts a new series)."""
    try:
        state = guarded.read_json(Path(folder) / TRACKER)
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


def read_clients(folder: str | os.PathLike[str], name: str = CLIENTS) -> pd.DataFrame:
    """A per-client table of the run: ``clients.csv`` (each client's rows) or, ``name`` =
    :data:`CLIENTS_SUMMARY`, their spread per round; :class:`RunFileError` for one that cannot
    be read (the OS's ``FileNotFoundError`` for a missing one)."""
    path = Path(folder) / name
    try:
        return guarded.read_csv(path)
    except guarded.Unreadable as e:
        raise RunFileError.unreadable(path, e) from None


def read_log(folder: str | os.PathLike[str]) -> str:
    """What fedrun printed about the run (``fedrun.log``); ``""`` without one."""
    try:
        return guarded.read_text(Path(folder) / LOG, guarded.TABLE_BYTES)
    except (OSError, ValueError):
        return ""


def read_choices(folder: str | os.PathLike[str], strict: bool = True) -> dict[str, Any]:
    """The config groups' choices of Hydra's record (``.hydra/hydra.yaml``), ``{}`` without
    one; strict: :class:`RunFileError` for a record that cannot be read; lenient: ``{}``."""
    path = Path(folder) / HYDRA / HYDRA_RECORD
    if not path.exists():
        return {}
    try:
        try:
            choices = guarded.read_yaml(path, ("hydra", "runtime", "choices"))
            if not isinstance(choices, dict):
                raise ValueError("hydra.runtime.choices is not a mapping")
            return dict(choices)
        except Exception as e:  # noqa: BLE001 -- any unreadable record is one broken run
            raise RunFileError.unreadable(path, e) from None
    except RunFileError:
        if strict:
            raise
        return {}


def read_overrides(folder: str | os.PathLike[str], strict: bool = True) -> list[str]:
    """The command line's overrides of Hydra's record (``.hydra/overrides.yaml``); strict:
    :class:`RunFileError` for a record that cannot be read or is no list; lenient: ``[]``
    for those and for a missing one."""
    path = Path(folder) / HYDRA / OVERRIDES
    try:
        try:
            values = guarded.read_yaml(path)
        except (guarded.Unreadable, OSError) as e:
            if isinstance(e, FileNotFoundError):
                raise
            raise RunFileError.unreadable(path, e) from None
        if not isinstance(values, list):
            raise RunFileError(path, "is not a list")
    except (RunFileError, FileNotFoundError, NotADirectoryError):
        if strict:
            raise
        return []
    return [str(o) for o in values]


def write(folder: str | os.PathLike[str], name: str, text: str) -> None:
    """The file ``name`` of the run folder written atomically."""
    atomic_write_text(Path(folder) / name, text)


def write_metrics(folder: str | os.PathLike[str], rows: list[dict[str, Any]]) -> None:
    """``metrics.csv``: rows (dicts with the same keys), floats written exactly (``repr``)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    write(folder, METRICS, buf.getvalue())
