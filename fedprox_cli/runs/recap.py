"""One run, read from its folder: what it did (:class:`RunRecord`: status, rounds, the last
metrics row, its overrides) and the closing line a run ends with (:func:`closing_line`).
A view of the folder's files read leniently (:mod:`common.run_files`): ``summary.json``, the
last row of ``metrics.csv`` and ``.hydra/overrides.yaml``; a folder lacking any of them still
gets its record."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..common import metric_table as mt
from ..common import run_files
from .code_record import mixed_line
from .outputs import effective_status
from .progress import duration


@dataclass
class RunRecord:
    folder: Path
    status: str  # outputs.effective_status, "not started" without a summary
    round: int | None = None  # rounds done
    T: int | None = None
    final: dict[str, Any] = field(default_factory=dict)  # the last metrics row
    overrides: list[str] = field(default_factory=list)
    error: str = ""  # the summary's one-line reason, unless finished
    mixed: str = ""  # a run continued with other code: :func:`code_record.mixed_line`


def _last_row(folder: Path) -> dict[str, Any]:
    """The last row of ``metrics.csv`` (``{}`` without a readable one)."""
    table = run_files.read_metrics(folder, strict=False)
    return {k: float(v) for k, v in table.iloc[-1].items()} if len(table) else {}


def record(folder: Path, status: str | None = None) -> RunRecord:
    """What ``folder`` holds (``status``: the caller's own, else the folder's effective one; a
    status the folder's own record does not have, such as a job refused in the folder of an
    earlier run, gets no numbers from the folder)."""
    folder = Path(folder)
    own = effective_status(folder)
    if own == "missing" and _unreadable(folder):  # a summary of wrong types: corrupt
        own = "unreadable"
    st = status or own
    if st == "missing" or own == "missing":
        return RunRecord(folder, "not started" if st == "missing" else st)
    if own == "unreadable":
        return RunRecord(folder, st, error=_unreadable(folder))
    if st != own:
        return RunRecord(folder, st, overrides=run_files.read_overrides(folder, strict=False))
    s = run_files.read_summary(folder, strict=False)
    final = s["final"] if isinstance(s.get("final"), dict) else _last_row(folder)
    overrides = run_files.read_overrides(folder, strict=False)
    return RunRecord(
        folder,
        st,
        s.get("round"),
        s.get("T"),
        final,
        overrides,
        str(s.get("error", "")),
        mixed_line(s.get("code_history")) or "",
    )


def _unreadable(folder: Path) -> str:
    """The line saying why ``folder``'s summary.json cannot be read (its fields' types
    included), "" when it can or is not there."""
    try:
        run_files.read_summary(folder, typed=True)
    except ValueError as e:
        return str(e)
    except OSError:
        pass
    return ""


def rounds(r: RunRecord) -> str:
    """``done/T`` (``?`` where the record has no number)."""
    return f"{r.round if r.round is not None else '?'}/{r.T if r.T is not None else '?'}"


def closing_line(folder: Path, status: str | None = None) -> str:
    """``finished, 3/3 rounds: test accuracy 0.8972, objective 0.331, stationarity 0.00122,
    training 0.9s (rounds only); FOLDER`` -- the line a run ends with. Its clock is metrics.csv's
    ``time_s``: the rounds' computation alone, without the evaluations, checkpoints and start-up
    that the progress line's wall-clock "elapsed" includes."""
    r = record(folder, status)
    f = r.final
    return (
        f"{r.status}, {rounds(r)} rounds: "
        + "".join(f"{m.words} {m.number(f.get(m.name))}, " for m in mt.SHOWN)
        + f"training {duration(f[t]) + ' (rounds only)' if (t := mt.TIME.name) in f else '-'}; "
        f"{r.folder}" + (f" ({r.mixed})" if r.mixed else "")
    )
