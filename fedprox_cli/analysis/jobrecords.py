"""A sweep's job records: ``SWEEP/.fedrun/jobs/<key>.json``, one per job and launch, written
when the job ends (:func:`write`; by the launcher for a job killed before it could,
:func:`lost`) and read back by the sweep's report, ``fedrun-report`` and the order in which
figures list a sweep's runs (:func:`records`). The key names the job's folder and the launch
(the ``fedrun -m`` command, :data:`LAUNCH` in the jobs' environment), so two sweeps over one
folder never overwrite each other's records. A record names the sweep folder it was written in
(``sweep``), so a sweep moved or copied since reads its jobs where they are now
(:func:`located`), and nothing outside it.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..common import guarded
from ..common.files import atomic_write_text
from ..runs import view

RECORDS = Path(".fedrun") / "jobs"
LAUNCH = "FEDRUN_SWEEP_LAUNCH"  # the launch's id, set by the launching process for its jobs


@dataclass
class JobRecord:
    num: int
    overrides: list[str]
    folder: str  # absolute
    code: int | None = None  # None: planned, not ended (yet)
    status: str = view.NOT_STARTED
    reason: str = ""
    written: float = field(default_factory=time.time)
    launch: str = field(default_factory=lambda: os.environ.get(LAUNCH, ""))
    sweep: str = ""  # the sweep folder (absolute) where it was written; "": an older record


def _record_path(sweep: Path, folder: Path, launch: str) -> Path:
    key = hashlib.sha256(os.path.abspath(folder).encode()).hexdigest()[:16]
    return Path(sweep) / RECORDS / f"{key}{'-' + launch if launch else ''}.json"


_unsaved: dict[Path, JobRecord] = {}  # records a full disk refused, for this process's report


def write(sweep: Path, rec: JobRecord) -> None:
    """Record ``rec`` in ``sweep``'s job records. A folder that cannot be written (a full disk)
    keeps it in memory for the report of a sweep whose jobs run in this process; the jobs' own
    lines and summaries still tell, and a report elsewhere goes by the folder."""
    rec.sweep = rec.sweep or os.path.abspath(sweep)
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
            str(d.get("sweep", "")),
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return rec


def _listed(sweep: Path) -> list[Path]:
    """The record files of ``sweep`` (none without the folder); ``OSError`` when it cannot be
    listed."""
    try:
        with os.scandir(Path(sweep) / RECORDS) as it:
            names = sorted(e.name for e in it if e.name.endswith(".json"))
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [Path(sweep) / RECORDS / n for n in names]


def records(sweep: Path, since: float = 0.0, launch: str | None = None) -> list[JobRecord]:
    """The job records in ``sweep`` written at ``since`` or later, of ``launch`` if given; one
    per folder, the latest."""
    try:
        paths = _listed(sweep)
    except OSError:  # held() names it
        paths = []
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


def located(sweep: Path, rec: JobRecord) -> Path | None:
    """Where ``rec``'s job folder is now that its sweep is ``sweep``: a folder that was below
    the sweep where the record was written is at the same place below ``sweep`` (named as
    ``sweep`` is given: a moved or copied sweep reads its own copy); one outside it is the
    recorded folder while the sweep has not moved, else None (no folder of this sweep). An
    older record, without its sweep folder: the folder at the shortest end of its path that
    ``sweep`` holds, or the recorded one when it is below ``sweep``."""
    here = Path(os.path.abspath(sweep))
    folder = Path(rec.folder)
    if not rec.sweep:
        if folder.is_relative_to(here):
            return Path(sweep) / folder.relative_to(here)
        ends = (Path(*folder.parts[k:]) for k in range(len(folder.parts) - 1, 0, -1))
        return next((Path(sweep) / end for end in ends if (here / end).is_dir()), None)
    was = Path(rec.sweep)
    if folder.is_relative_to(was):
        return Path(sweep) / folder.relative_to(was)
    return folder if was == here else None


def held(
    sweep: Path, warn: Callable[[str], None], since: float = 0.0
) -> list[tuple[JobRecord, Path]]:
    """The latest record of each job of ``sweep`` with its folder as :func:`located` finds it;
    each record whose folder lies outside a sweep moved or copied since is one ``warn``
    line."""
    try:
        _listed(sweep)
    except OSError as e:
        warn(
            f"the job records in {Path(sweep) / RECORDS} cannot be read ({e.strerror or e}): "
            f"the sweep's jobs are listed from the folders it holds"
        )
    out = []
    for r in records(sweep, since):
        where = located(sweep, r)
        if where is None:
            warn(
                f"skipped job {r.num} of {sweep}: its record names {r.folder}, which lies outside "
                f"this sweep folder, moved or copied since it ran"
                + (f" in {r.sweep}" if r.sweep else "")
            )
        else:
            out.append((r, where))
    return out


def lost(sweep: Path, rec: JobRecord, submitted: float) -> None:
    """Record, from the launching process, a job submitted at ``submitted`` that ended without
    recording its end (killed before or while fedrun ran): ``rec`` has the scheduler's word as
    its reason and no code, so the report takes its status from its folder. A record the job
    wrote itself since it was submitted is kept."""
    old = read(_record_path(sweep, Path(rec.folder), rec.launch))
    if old is None or old.code is None or old.written < submitted:
        write(sweep, rec)
