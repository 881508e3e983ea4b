"""A run's record, ``summary.json`` (:class:`Summary`, rewritten atomically on every change;
the run folder's other files: :mod:`common.run_files`) and where it ran (:func:`provenance`);
read back through :mod:`view`.

``summary.json`` holds ``status`` (running / finished / diverged / interrupted / error),
``error`` (one line, unless finished), ``round`` (rounds done) of ``T``, ``started_round`` (the
round this process began from: 0, or its checkpoint's), ``final`` (the last metrics row),
``progress`` (the latest progress line, :mod:`progress`), ``pid``, ``host``, ``started``,
``ended`` and ``heartbeat`` (ISO 8601 UTC; the heartbeat is refreshed at every evaluation and
checkpoint and at least every :data:`HEARTBEAT_S` seconds), ``slurm`` (job and array ids, when
run under SLURM), ``git_commit`` (of the package's checkout, when it is one), ``command``
(the user's command, rebuilt from Hydra's overrides), ``versions``, ``device``, ``engine``
(the engine and how it was chosen: forced, measured with its timings, or from the cache),
``compile`` (whether the vmap call is compiled, and how that was decided:
:mod:`engine.compile`), ``data_source``, ``data`` (the fingerprint of the data and partition it
trained on: :mod:`provenance`), ``numerics`` (what its numbers depend on beyond the config,
used again on resume: :mod:`numerics`). A run whose process died says ``running`` in its file;
its view's status (:attr:`view.RunView.status`) tells the truth.
"""

from __future__ import annotations

import functools
import json
import os
import platform
import socket
import subprocess
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any, Unpack

from ..common import run_files
from ..common.clock import now
from ..common.files import write_text_in_place
from ..common.package import PACKAGE, VERSION
from ..common.run_files import SummaryRecord

HEARTBEAT_S = 60.0  # the heartbeat is at most this old while a run is alive
SLURM_VARS = {
    "job_id": "SLURM_JOB_ID",
    "array_job_id": "SLURM_ARRAY_JOB_ID",
    "array_task_id": "SLURM_ARRAY_TASK_ID",
    "restart_count": "SLURM_RESTART_COUNT",
}


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


def provenance(command: str) -> dict[str, Any]:
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

    def __init__(self, run_dir: Path, **fields: Unpack[SummaryRecord]):
        self.path = Path(run_dir) / run_files.SUMMARY
        self.fields: SummaryRecord = fields
        self._beat = 0.0

    def write(self, status: str, /, **fields: Unpack[SummaryRecord]) -> None:
        self.fields.update(fields)
        self.fields["heartbeat"] = now()
        self.fields.pop("status", None)
        self.fields = {"status": status, **self.fields}
        self._beat = time.monotonic()
        write_text_in_place(self.path, json.dumps(self.fields, indent=2, default=str) + "\n")

    def start(self, **fields: Unpack[SummaryRecord]) -> None:
        self.fields.pop("error", None)
        record: SummaryRecord = {"started": now(), **fields}
        self.write("running", **record)

    def beat(self, force: bool = False, **fields: Unpack[SummaryRecord]) -> None:
        """Note ``fields`` (the rounds done: a later end records them even when no beat was
        written since) and refresh the file if forced or :data:`HEARTBEAT_S` has passed."""
        self.fields.update(fields)
        if force or time.monotonic() - self._beat >= HEARTBEAT_S:
            self.write("running")

    def end(self, status: str, /, **fields: Unpack[SummaryRecord]) -> None:
        record: SummaryRecord = {"ended": now(), **fields}
        self.write(status, **record)


def is_fedrun_summary(s: run_files.SummaryRecord) -> bool:
    return isinstance(s, dict) and "status" in s and "fedprox_cli" in s.get("versions", {})
