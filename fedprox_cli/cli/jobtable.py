"""The compact table of a sweep's jobs, one line per run read from its folder
(:mod:`runs.recap`): status, rounds, final test accuracy / objective / stationarity, training
time, the GPU it ran on (:func:`gpu`) and the overrides in which the jobs differ.

    job  status    rounds  test_acc  objective  stationarity  time  gpu                 overrides
    0    finished  3/3     0.8972    0.3310     1.221e-03     0.9s  0 (H100 80GB HBM3)  K=1 seed=0
    1    diverged  2/3     0.1000    nan        nan           0.4s  1 (H100 80GB HBM3)  K=2 seed=0
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..common import metric_table as mt
from ..common import run_files
from ..runs import face


def differing(overrides: list[list[str]]) -> list[list[str]]:
    """Each job's overrides (``key=value``) whose value is not the same in every job (jobs
    with no overrides known, such as jobs never started, do not count)."""
    parsed = [{o.split("=", 1)[0]: o for o in job} for job in overrides]
    known = [p for p in parsed if p]
    keys = {k for p in known for k in p}
    varied = {k for k in keys if len({p.get(k) for p in known}) > 1}
    return [[o for k, o in p.items() if k in varied] for p in parsed]


def _records(folder: Path, status: str | None, overrides: list[str] | None) -> list[face.RunRecord]:
    """The row(s) of one job: a seed-batched job gives one row per seed run (each with its own
    status and ``seed=<s>`` added to the job's overrides)."""
    runs = [] if face.holds_run(Path(folder)) else face.seed_folders(Path(folder))
    if not runs:
        r = face.record(folder, status)
        r.overrides = list(overrides) if overrides is not None else r.overrides
        return [r]
    out = []
    for run in runs:
        r = face.record(run)
        known = list(overrides) if overrides is not None else r.overrides
        r.overrides = [o for o in known if o.split("=", 1)[0].lstrip("+~") not in ("seed", "seeds")]
        r.overrides.append(f"seed={run.name[len(run_files.SEED_PREFIX) :]}")
        out.append(r)
    return out


def gpu(folder: Path) -> str:
    """The GPU a run ran on, from its summary's ``hardware``: ``2 (H100 80GB HBM3)`` -- the GPU's
    number on its machine (its ``CUDA_VISIBLE_DEVICES`` entry where the process was given some,
    else its CUDA index) and name -- or ``cpu``; ``cpu (given GPU 1)`` for a run given a GPU it
    could not use (Ray told of GPUs that are not there); ``-`` when unrecorded."""
    hw = face.read(folder).summary.get("hardware")
    if not isinstance(hw, dict) or "gpu" not in hw:
        return "-"
    given = str(hw.get("cuda_visible_devices") or "")
    if not isinstance(hw["gpu"], dict):
        return f"cpu (given GPU {given})" if given and hw.get("note") else "cpu"
    index = hw["gpu"].get("index", 0)
    ids = [g.strip() for g in given.split(",") if g.strip()]
    number = ids[index] if given and isinstance(index, int) and index < len(ids) else index
    return f"{number} ({str(hw['gpu'].get('name') or '?').removeprefix('NVIDIA ')})"


def table(
    folders: list[Path],
    root: Path | None = None,
    statuses: Sequence[str | None] | None = None,
    overrides: Sequence[list[str] | None] | None = None,
) -> list[str]:
    """The compact table of the runs in ``folders`` (names relative to ``root``), as lines;
    ``statuses`` and ``overrides``: what the caller knows of each (a sweep's job records: a job
    that failed before its folder recorded anything keeps its overrides). A seed-batched job
    (``seeds=R``) is listed run by run."""
    n = len(folders)
    records = [
        r
        for f, s, o in zip(folders, statuses or [None] * n, overrides or [None] * n)
        for r in _records(f, s, o)
    ]
    head = [
        "job",
        "status",
        "rounds",
        *(m.name for m in mt.SHOWN),
        "time",
        "gpu",
        "overrides",
    ]
    rows = [head]
    for r, diff in zip(records, differing([r.overrides for r in records])):
        f = r.final
        name = (
            str(r.folder.relative_to(root))
            if root and r.folder.is_relative_to(root)
            else str(r.folder)
        )
        rows.append(
            [
                name,
                r.status,
                face.rounds(r) if r.status != face.NOT_STARTED else "-",
                *(m.number(f.get(m.name)) for m in mt.SHOWN),
                face.duration(f[mt.TIME.name]) if mt.TIME.name in f else "-",
                gpu(r.folder) if r.status != face.NOT_STARTED else "-",
                " ".join(diff),
            ]
        )
    return align(rows)


def align(rows: list[list[str]], indent: int = 0) -> list[str]:
    """Rows of cells as lines of left-aligned columns."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        " " * indent + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows
    ]
