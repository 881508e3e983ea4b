"""One line per run, read from its folder: the closing summary a run prints, and the compact table
of a sweep's jobs (status, rounds, final test accuracy / objective / stationarity, training time,
and the overrides in which the jobs differ). Read-only: ``summary.json``, the last row of
``metrics.csv`` and ``.hydra/overrides.yaml``; a folder lacking any of them still gets its row.

    job  status    rounds  test_acc  objective  stationarity  time   overrides
    0    finished  3/3     0.8972    0.3310     1.221e-03     0.9s   K=1 seed=0
    1    diverged  2/3     0.1000    nan        nan           0.4s   K=2 seed=0
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from pathlib import Path

from ..common import guarded
from ..runs.outputs import SEED_PREFIX, effective_status, read_summary
from ..runs.progress import duration


@dataclass
class RunRecord:
    folder: Path
    status: str                 # outputs.effective_status, "not started" without a summary
    round: int | None = None    # rounds done
    T: int | None = None
    final: dict = field(default_factory=dict)   # the last metrics row
    overrides: list[str] = field(default_factory=list)
    error: str = ""             # the summary's one-line reason, unless finished


def _last_row(folder: Path) -> dict:
    try:
        rows = list(csv.DictReader(io.StringIO(guarded.read_text(folder / "metrics.csv", guarded.TABLE_BYTES),
                                               newline="")))
    except (OSError, csv.Error, ValueError):
        return {}
    out = {}
    for k, v in (rows[-1] if rows else {}).items():
        try:
            out[k] = float(v)
        except (TypeError, ValueError):
            pass
    return out


def _overrides(folder: Path) -> list[str]:
    try:
        return [str(o) for o in guarded.read_yaml(folder / ".hydra" / "overrides.yaml")]
    except Exception:  # missing or unreadable: the row shows none
        return []


def record(folder: Path, status: str | None = None) -> RunRecord:
    """What ``folder`` holds (``status``: the caller's own, else the folder's effective one; a
    status the folder's own record does not have, such as a job refused in the folder of an
    earlier run, gets no numbers from the folder)."""
    folder = Path(folder)
    own = effective_status(folder)
    st = status or own
    if st == "missing" or own == "missing":
        return RunRecord(folder, "not started" if st == "missing" else st)
    if own == "unreadable":
        return RunRecord(folder, st, error=_unreadable(folder))
    if st != own:
        return RunRecord(folder, st, overrides=_overrides(folder))
    try:
        s = read_summary(folder)
    except (OSError, ValueError):
        s = {}
    final = s.get("final") if isinstance(s.get("final"), dict) else _last_row(folder)
    return RunRecord(folder, st, s.get("round"), s.get("T"), final, _overrides(folder),
                     str(s.get("error", "")))


def _unreadable(folder: Path) -> str:
    """The line saying why ``folder``'s summary.json cannot be read."""
    try:
        read_summary(folder)
    except ValueError as e:
        return str(e)
    return ""


def _num(v, fmt: str) -> str:
    return format(v, fmt) if isinstance(v, (int, float)) and not isinstance(v, bool) else "-"


def rounds(r: RunRecord) -> str:
    """``done/T`` (``?`` where the record has no number)."""
    return f"{r.round if r.round is not None else '?'}/{r.T if r.T is not None else '?'}"


def closing_line(folder: Path, status: str | None = None) -> str:
    """``finished, 3/3 rounds: test acc 0.8972, objective 0.331, stationarity 1.221e-03,
    training 0.9s; FOLDER`` -- the line a run ends with."""
    r = record(folder, status)
    f = r.final
    return (f"{r.status}, {rounds(r)} rounds: test acc {_num(f.get('test_acc'), '.4f')}, "
            f"objective {_num(f.get('objective'), '.4g')}, "
            f"stationarity {_num(f.get('stationarity'), '.4g')}, "
            f"training {duration(f['time_s']) if 'time_s' in f else '-'}; {r.folder}")


def differing(overrides: list[list[str]]) -> list[list[str]]:
    """Each job's overrides (``key=value``) whose value is not the same in every job (jobs
    with no overrides known, such as jobs never started, do not count)."""
    parsed = [{o.split("=", 1)[0]: o for o in job} for job in overrides]
    known = [p for p in parsed if p]
    keys = {k for p in known for k in p}
    varied = {k for k in keys if len({p.get(k) for p in known}) > 1}
    return [[o for k, o in p.items() if k in varied] for p in parsed]


def seed_runs(folder: Path) -> list[Path]:
    """The runs of a seed-batched job (``seeds=R``: ``folder/seed_<s>/``), by seed; [] for a
    folder that is a run itself."""
    if (folder / "summary.json").exists() or not folder.is_dir():
        return []
    runs = [p for p in folder.iterdir() if p.name.startswith(SEED_PREFIX) and p.name[len(SEED_PREFIX):].isdigit()
            and p.is_dir() and not p.is_symlink()]
    return sorted(runs, key=lambda p: int(p.name[len(SEED_PREFIX):]))


def _records(folder: Path, status: str | None, overrides: list[str] | None) -> list[RunRecord]:
    """The row(s) of one job: a seed-batched job gives one row per seed run (each with its own
    status and ``seed=<s>`` added to the job's overrides)."""
    runs = seed_runs(Path(folder))
    if not runs:
        r = record(folder, status)
        r.overrides = list(overrides) if overrides is not None else r.overrides
        return [r]
    out = []
    for run in runs:
        r = record(run)
        known = list(overrides) if overrides is not None else r.overrides
        r.overrides = [o for o in known if not o.split("=", 1)[0].lstrip("+~") in ("seed", "seeds")]
        r.overrides.append(f"seed={run.name[len(SEED_PREFIX):]}")
        out.append(r)
    return out


def table(folders: list[Path], root: Path | None = None, statuses: list[str] | None = None,
          overrides: list[list[str]] | None = None) -> list[str]:
    """The compact table of the runs in ``folders`` (names relative to ``root``), as lines;
    ``statuses`` and ``overrides``: what the caller knows of each (a sweep's job records: a job
    that failed before its folder recorded anything keeps its overrides). A seed-batched job
    (``seeds=R``) is listed run by run."""
    n = len(folders)
    records = [r for f, s, o in zip(folders, statuses or [None] * n, overrides or [None] * n)
               for r in _records(f, s, o)]
    head = ["job", "status", "rounds", "test_acc", "objective", "stationarity", "time", "overrides"]
    rows = [head]
    for r, diff in zip(records, differing([r.overrides for r in records])):
        f = r.final
        name = str(r.folder.relative_to(root)) if root and r.folder.is_relative_to(root) else str(r.folder)
        rows.append([name, r.status, rounds(r) if r.status != "not started" else "-",
                     _num(f.get("test_acc"), ".4f"), _num(f.get("objective"), ".4g"),
                     _num(f.get("stationarity"), ".4g"),
                     duration(f["time_s"]) if "time_s" in f else "-", " ".join(diff)])
    return align(rows)


def align(rows: list[list[str]], indent: int = 0) -> list[str]:
    """Rows of cells as lines of left-aligned columns."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [" " * indent + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
