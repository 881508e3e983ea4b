"""A run folder's files, each written atomically (:mod:`atomic`): a reader never sees a
half-written file, and concurrent jobs never share one.

- ``metrics.csv``: one row per evaluated round (columns in :data:`metrics.COLUMNS`)
- ``config.yaml``: the resolved config
- ``partition.npz``: per-client index arrays into the training set
- ``summary.json``: the run's record (:class:`Summary`)
- ``metrics.png``: loss, accuracy and stationarity against round
- ``clients.csv``, ``clients_summary.csv``, ``clients.png``: per-client metrics, with
  ``metrics.per_client=true`` (:mod:`clients`)
- ``.hydra/``: Hydra's record of the command (config, hydra config, overrides)
- ``fedrun.log``: every line fedrun printed about this run; ``error.log``: the traceback of an
  internal error
- ``.fedrun.lock``: held (``flock``) by the one process running in the folder (:mod:`lock`)

``summary.json`` holds ``status`` (running / finished / diverged / interrupted / error),
``error`` (one line, unless finished), ``round`` (rounds done) of ``T``, ``final`` (the last
metrics row), ``pid``, ``host``, ``started``, ``ended`` and ``heartbeat`` (ISO 8601 UTC; the
heartbeat is refreshed at every evaluation and checkpoint and at least every
:data:`HEARTBEAT_S` seconds), ``slurm`` (job and array ids, when run under SLURM),
``git_commit`` (of the package's checkout, when it is one), ``command`` (the user's command,
rebuilt from Hydra's overrides), ``versions``, ``device``, ``engine`` (the engine and how it was
chosen: forced, measured with its timings, or from the cache), ``compile`` (whether the vmap
call is compiled, and how that was decided: :mod:`compile_choice`), ``data_source``, ``data`` (the
fingerprint of the data and partition it trained on: :mod:`provenance`), ``numerics`` (what its
numbers depend on beyond the config, used again on resume: :mod:`numerics`). A run whose process
died says ``running`` in its file; :func:`effective_status` tells the truth.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import os
import platform
import socket
import subprocess
import time
from importlib.metadata import version
from pathlib import Path

import numpy as np

from ..common import guarded, run_files
from ..common.clock import now
from ..common.files import atomic_write_text, write_text_in_place
from ..common.package import PACKAGE, VERSION
from .lock import is_held

HEARTBEAT_S = 60.0  # the heartbeat is at most this old while a run is alive
SLURM_VARS = {
    "job_id": "SLURM_JOB_ID",
    "array_job_id": "SLURM_ARRAY_JOB_ID",
    "array_task_id": "SLURM_ARRAY_TASK_ID",
    "restart_count": "SLURM_RESTART_COUNT",
}


def write_metrics(path: Path, rows: list[dict]) -> None:
    """Rows (dicts with the same keys) as CSV, floats written exactly (``repr``)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    atomic_write_text(path, buf.getvalue())


COUNTERS = ("round", "time_s", "grad_evals", "prox_calls", "bytes_up", "bytes_down")
LOWER_IS_BETTER = {
    "train_loss",
    "objective",
    "test_loss",
    "stationarity",
    "time_s",
}  # the rest: higher


def unfit_rows(table) -> tuple[np.ndarray, list[str]]:
    """The rows of a metrics table (a DataFrame or a dict of columns) whose loss is not finite,
    and its model metrics (the columns other than counters and losses): a diverged run's model
    in those rows holds NaN or inf, so its accuracy (the argmax of NaN logits, i.e. class 0),
    sparsity and stationarity describe no model."""
    losses = [c for c in ("train_loss", "objective") if c in table]
    if not losses:
        return np.zeros(0, bool), []
    bad = ~np.isfinite(np.column_stack([np.asarray(table[c], float) for c in losses])).all(axis=1)
    return bad, [c for c in table if c not in COUNTERS and c not in losses]


def model_metrics_only(df):
    """A metrics table (pandas) whose model metrics are blanked (NaN) in the rows of
    :func:`unfit_rows`. The counters and the losses themselves (nan or inf, as recorded) stay."""
    bad, models = unfit_rows(df)
    if bad.any():
        df = df.copy()
        df.loc[bad, models] = np.nan
    return df


def metric_columns(f) -> dict[str, np.ndarray]:
    """A metrics CSV (a binary file object) as float columns (a cell that is not a number:
    NaN), model metrics blanked as in :func:`model_metrics_only` -- without pandas."""
    header, *rows = csv.reader(io.TextIOWrapper(f, encoding="utf-8", newline=""))
    columns = {
        h: np.array([_number(r[i]) if i < len(r) else np.nan for r in rows], float)
        for i, h in enumerate(header)
    }
    bad, models = unfit_rows(columns)
    for c in models:
        columns[c][bad] = np.nan
    return columns


def _number(cell: str) -> float:
    try:
        return float(cell)
    except ValueError:
        return float("nan")


@functools.cache
def git_commit() -> str | None:
    """The commit of the checkout fedprox_cli runs from, or None (an installed copy)."""
    root = PACKAGE.parent
    if not (root / ".git").exists():
        return None
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def provenance(command: str) -> dict:
    """Where and what runs: pid, host, SLURM ids, git commit, versions, the command."""
    slurm = {k: os.environ[v] for k, v in SLURM_VARS.items() if v in os.environ}
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        **({"slurm": slurm} if slurm else {}),
        "git_commit": git_commit(),
        "command": command,
        "versions": {
            "fedprox_cli": VERSION,
            "torch": version("torch"),
            "python": platform.python_version(),
        },
    }


class Summary:
    """The run's ``summary.json``, rewritten atomically on every change."""

    def __init__(self, run_dir: Path, **fields):
        self.path = Path(run_dir) / run_files.SUMMARY
        self.fields = fields
        self._beat = 0.0

    def write(self, status: str, **fields) -> None:
        self.fields.update(fields, heartbeat=now())
        self.fields = {"status": status, **{k: v for k, v in self.fields.items() if k != "status"}}
        self._beat = time.monotonic()
        write_text_in_place(self.path, json.dumps(self.fields, indent=2, default=str) + "\n")

    def start(self, **fields) -> None:
        self.fields.pop("error", None)
        self.write("running", started=now(), **fields)

    def beat(self, force: bool = False, **fields) -> None:
        """Note ``fields`` (the rounds done: a later end records them even when no beat was
        written since) and refresh the file if forced or :data:`HEARTBEAT_S` has passed."""
        self.fields.update(fields)
        if force or time.monotonic() - self._beat >= HEARTBEAT_S:
            self.write("running")

    def end(self, status: str, **fields) -> None:
        self.write(status, ended=now(), **fields)


def runs_in(folder: Path) -> list[Path]:
    """The run folders a job wrote: ``folder`` itself, or its ``seed_<s>/`` folders (``seeds=R``)
    -- those holding a ``summary.json``."""
    folder = Path(folder)
    if (folder / run_files.SUMMARY).exists():
        return [folder]
    return sorted(
        (p.parent for p in folder.glob(f"{run_files.SEED_PREFIX}*/{run_files.SUMMARY}")),
        key=lambda p: (
            int(p.name[len(run_files.SEED_PREFIX) :])
            if p.name[len(run_files.SEED_PREFIX) :].isdigit()
            else -1
        ),
    )


SCHEMA = {
    "status": str,
    "error": str,
    "exit_code": int,
    "round": int,
    "T": int,
    "final": dict,
    "versions": dict,
    "heartbeat": str,
    "started": str,
    "ended": str,
    "command": str,
    "code": dict,
}


def read_summary(run_dir: Path) -> dict:
    """``run_dir``'s ``summary.json``: a JSON object whose fields of :data:`SCHEMA` have their
    types (a field of another type is left out, as if absent: any file, fedrun's or another
    tool's, reads without surprises); :class:`guarded.Unreadable` (a ValueError) for a file
    that cannot be read as a JSON object (cut short, too large, nested too deep)."""
    path = Path(run_dir) / run_files.SUMMARY
    d = guarded.read_json(path)
    if not isinstance(d, dict):
        raise guarded.Unreadable(path, f"not a JSON object (a {type(d).__name__})")
    return {
        k: v
        for k, v in d.items()
        if k not in SCHEMA
        or (isinstance(v, SCHEMA[k]) and not (SCHEMA[k] is int and isinstance(v, bool)))
    }


def is_fedrun_summary(s: dict) -> bool:
    return isinstance(s, dict) and "status" in s and "fedprox_cli" in s.get("versions", {})


def effective_status(run_dir: Path) -> str:
    """The recorded status, except for a run recorded as ``running``: ``dead`` when no process
    holds the folder's lock (it was killed, or its machine went down). The lock decides, never a
    clock: a reader's clock may be skewed against the writer's (another node, a clock jump), so
    a heartbeat's age says nothing a held lock does not. ``missing`` without a summary,
    ``unreadable`` with one that cannot be read (:func:`read_summary`)."""
    try:
        status = read_summary(run_dir)["status"]
    except guarded.Unreadable:
        return "unreadable"
    except (OSError, ValueError, KeyError, TypeError):
        return "missing"
    if status != "running":
        return status
    return "running" if is_held(Path(run_dir)) else "dead"
