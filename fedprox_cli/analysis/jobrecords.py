"""A sweep's job records: ``SWEEP/.fedrun/jobs/<key>.json``, one per job and launch, written
when the job ends (:func:`write`; by the launcher for a job killed before it could,
:func:`lost`) and read back by the sweep's report, ``fedrun-report`` and the order in which
figures list a sweep's runs (:func:`records`). The key names the job's folder and the launch
(the ``fedrun -m`` command, :data:`LAUNCH` in the jobs' environment), so two sweeps over one
folder never overwrite each other's records.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..common import guarded
from ..common.files import atomic_write_text

RECORDS = Path(".fedrun") / "jobs"
LAUNCH = "FEDRUN_SWEEP_LAUNCH"  # the launch's id, set by the launching process for its jobs


@dataclass
class JobRecord:
    num: int
    overrides: list[str]
    folder: str  # absolute
    code: int | None = None  # None: planned, not ended (yet)
    status: str = "not started"
    reason: str = ""
    written: float = field(default_factory=time.time)
    launch: str = field(default_factory=lambda: os.environ.get(LAUNCH, ""))


def _record_path(sweep: Path, folder: Path, launch: str) -> Path:
    key = hashlib.sha256(os.path.abspath(folder).encode()).hexdigest()[:16]
    return Path(sweep) / RECORDS / f"{key}{'-' + launch if launch else ''}.json"


_unsaved: dict[Path, JobRecord] = {}  # records a full disk refused, for this process's report


def write(sweep: Path, rec: JobRecord) -> None:
    """Record ``rec`` in ``sweep``'s job records. A folder that cannot be written (a full disk)
    keeps it in memory for the report of a sweep whose jobs run in this process; the jobs' own
    lines and summaries still tell, and a report elsewhere goes by the folder."""
    path = _record_path(sweep, Path(rec.folder), rec.launch)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(asdict(rec)) + "\n")
        _unsaved.pop(path, None)
    except OSError:
        _unsaved[path] = rec


def read(path: Path) -> JobRecord | None:
    """One record, or None when it is not one (any content is tolerated)."""
    try:
        d = guarded.read_json(path)
        rec = JobRecord(
            int(d["num"]),
            [str(o) for o in d["overrides"]],
            str(d["folder"]),
            None if d["code"] is None else int(d["code"]),
            str(d["status"]),
            str(d["reason"]),
            float(d["written"]),
            str(d.get("launch", "")),
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return rec


def records(sweep: Path, since: float = 0.0, launch: str | None = None) -> list[JobRecord]:
    """The job records in ``sweep`` written at ``since`` or later, of ``launch`` if given; one
    per folder, the latest."""
    paths = sorted((Path(sweep) / RECORDS).glob("*.json"))
    found = [
        *map(read, paths),
        *(r for p, r in _unsaved.items() if p.parent == Path(sweep) / RECORDS),
    ]
    latest = {}
    for r in sorted(
        (r for r in found if r is not None and r.written >= since and launch in (None, r.launch)),
        key=lambda r: r.written,
    ):
        latest[r.folder] = r
    return list(latest.values())


def lost(sweep: Path, rec: JobRecord, submitted: float) -> None:
    """Record, from the launching process, a job submitted at ``submitted`` that ended without
    recording its end (killed before or while fedrun ran): ``rec`` has the scheduler's word as
    its reason and no code, so the report takes its status from its folder. A record the job
    wrote itself since it was submitted is kept."""
    old = read(_record_path(sweep, Path(rec.folder), rec.launch))
    if old is None or old.code is None or old.written < submitted:
        write(sweep, rec)
