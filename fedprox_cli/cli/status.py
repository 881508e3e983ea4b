"""``fedrun-report RUNS_OR_SWEEPS... [--csv]``: where every run of a sweep stands.

One row per run folder (a folder with ``summary.json``, ``config.yaml``, ``metrics.csv`` or
fedrun's ``.fedrun.lock``, found recursively under each argument): its status as
:mod:`..runs.view` derives it (finished, diverged, interrupted, error, running -- or dead when
the summary says running but no process holds the run folder's lock; "not started" for a job of
a sweep's job records without a summary yet, e.g. queued on SLURM, and for a run stopped before
its summary was written: its folder holds only its lock and log), rounds done of T, the
final metrics, and the config keys that tell the runs apart. It reads only the run folders, so
it works while a sweep runs and after its launcher died or was backgrounded.
"""

from __future__ import annotations

import csv
import io
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..analysis import groups, jobrecords
from ..common import guarded, run_files, streams
from ..common import metric_table as mt
from ..common.containers import as_dict
from ..common.errors import UserError, require
from ..common.flatten import flatten
from ..config.keys import complete
from ..runs import face
from . import usage
from .jobtable import align

METRICS = tuple(m.name for m in mt.WATCHED)
OWN = ("run", "status", "rounds", *METRICS, "error", "code")  # the report's columns, not keys


def _config(run_dir: Path, problems: list[str]) -> dict[str, Any]:
    """The run's config, flattened; {} when it has none yet, or (noted in ``problems``) one that
    cannot be read: the row shows what the summary has."""
    try:
        return complete(flatten(run_files.read_config(run_dir)))
    except run_files.RunFileError as e:
        if not isinstance(e.os_error, FileNotFoundError):
            problems.append(str(e))
    except Exception:  # noqa: BLE001 -- not a config of this version
        pass
    return {}


def find(paths: list[Path], warn: Callable[[str], None] = lambda _: None) -> list[Path]:
    """Run folders under ``paths`` (each a run folder or a folder searched recursively,
    :func:`..runs.face.find`: a folder that cannot be listed is one ``warn`` line), and the
    jobs a sweep among them recorded or planned that have no folder yet."""
    found = []
    for p in map(Path, paths):
        require(os.path.lexists(p), f"no such run or sweep folder: {p}")
        for d, names in face.find([p], warn):
            found += [d] if face.is_run(names) else []
            found += _planned(d, warn) if face.is_sweep(names) else []
    require(
        found,
        f"no run folders ({', '.join(sorted(face.MARKS))}) under {', '.join(map(str, paths))}",
    )
    return sorted(
        set(found), key=lambda d: [(0, int(x), "") if x.isdigit() else (1, 0, x) for x in d.parts]
    )


def _planned(sweep: Path, warn: Callable[[str], None]) -> list[Path]:
    """The job folders a sweep will have (started or not): from its job records
    (:func:`..analysis.jobrecords.held`: where they are now, nothing outside a moved sweep), or
    for a sweep of numbered folders (before those records) from its multirun.yaml."""
    from ..config.compose import sweep_jobs

    recorded = jobrecords.held(sweep, warn)
    if recorded:
        return [where for _, where in recorded]
    try:
        config = guarded.read_config(sweep / "multirun.yaml")
        jobs = sweep_jobs(config)
        numbered = as_dict(config.hydra.sweep)["subdir"] == "${hydra.job.num}"
    except Exception:  # not a sweep record this version can read: list what is on disk
        return []
    return [sweep / str(i) for i in range(len(jobs))] if jobs and numbered else []


def rows(
    paths: list[Path], problems: list[str] | None = None
) -> tuple[list[str], list[dict[str, Any]]]:
    """The table: column names and one dict per run; a file of a run that cannot be read is
    one line in ``problems`` (the run's row stays, its status ``unreadable`` when it is the
    summary)."""
    problems = [] if problems is None else problems
    runs = find(paths, problems.append)
    configs = {d: _config(d, problems) for d in runs}
    known = [c for c in configs.values() if c]  # jobs not started have no config yet
    keys = groups.label_keys(known) if len(known) > 1 else []
    name = groups.columns(keys, reserved=OWN)
    out = []
    for d in runs:
        r, cfg = face.record(d), configs[d]
        if r.T is None:
            r.T = cfg.get("T")
        row: dict[str, Any] = {
            "run": str(d),
            "status": r.status,
            "rounds": face.rounds(r) if r.status != face.NOT_STARTED else "-",
        }
        row.update({m: r.final.get(m, "") for m in METRICS})
        row.update({name[k]: cfg.get(k, "") for k in keys})
        if r.error:
            row["error"] = r.error
        if r.mixed:
            row["code"] = r.mixed
        if r.status == face.UNREADABLE:
            problems.append(r.error)
        out.append(row)
    columns = list(dict.fromkeys(k for r in out for k in r))
    return columns, out


def _cell(v: object) -> str:
    if isinstance(v, str):
        try:
            v = float(v) if "." in v or "e" in v else v
        except ValueError:
            pass
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def main(argv: list[str] | None = None) -> int:
    p = usage.parser("fedrun-report", __doc__, epilog=False)
    p.add_argument(
        "paths",
        nargs="+",
        type=Path,
        metavar="RUNS_OR_SWEEPS",
        help="run folders, sweep folders, or folders holding them (searched recursively)",
    )
    p.add_argument("--csv", action="store_true", help="CSV on stdout instead of a table")
    args = p.parse_args(argv)
    problems: list[str] = []
    try:
        columns, table = rows(args.paths, problems)
    except UserError as e:
        streams.err(f"fedrun-report: error: {e}")
        return 2
    for line in problems:
        streams.err(f"fedrun-report: {line}")
    if args.csv:
        text = io.StringIO()
        w = csv.DictWriter(text, fieldnames=columns, lineterminator="\n")
        w.writeheader()
        w.writerows(table)
        streams.out(text.getvalue().removesuffix("\n"))
        return 0
    for line in align([columns, *([_cell(r.get(c, "")) for c in columns] for r in table)]):
        streams.out(line)
    counts: dict[str, int] = {}
    for r in table:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    streams.out(f"{len(table)} runs: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    return 0


if __name__ == "__main__":
    streams.guard()
    sys.exit(main())
