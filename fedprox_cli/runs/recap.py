"""One run, read from its folder: what it did (:class:`RunRecord`: status, rounds, the last
metrics row, its overrides) and the closing line a run ends with (:func:`closing_line`).
Built from the folder's view (:mod:`view`): its status, its summary, the last row of
``metrics.csv`` and ``.hydra/overrides.yaml`` read leniently; a folder lacking any of them
still gets its record."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..common import metric_table as mt
from . import view
from .code_record import mixed_line
from .progress import duration


@dataclass
class RunRecord:
    folder: Path
    status: str  # view.RunView.status, "not started" without a summary
    round: int | None = None  # rounds done
    T: int | None = None
    final: dict[str, float] = field(default_factory=dict)  # the last metrics row
    overrides: list[str] = field(default_factory=list)
    error: str = ""  # the summary's one-line reason, unless finished
    mixed: str = ""  # a run continued with other code: :func:`code_record.mixed_line`


def _last_row(run: view.RunView) -> dict[str, float]:
    """The last row of ``metrics.csv`` (``{}`` without a readable one)."""
    table = run.metrics(strict=False)
    return {str(k): float(v) for k, v in table.iloc[-1].items()} if len(table) else {}


def record(folder: Path, status: str | None = None) -> RunRecord:
    """What ``folder`` holds (``status``: the caller's own, else the folder's; a status the
    folder's own record does not have, such as a job refused in the folder of an earlier run,
    gets no numbers from the folder)."""
    run = view.read(folder)
    own = run.status
    st = status or own
    if view.MISSING in (st, own):
        return RunRecord(run.path, view.NOT_STARTED if st == view.MISSING else st)
    if own == view.UNREADABLE:
        return RunRecord(run.path, st, error=run.error)
    if st != own:
        return RunRecord(run.path, st, overrides=run.overrides())
    s = run.summary
    return RunRecord(
        run.path,
        st,
        s.get("round"),
        s.get("T"),
        run.final if run.final is not None else _last_row(run),
        run.overrides(),
        run.error,
        mixed_line(s.get("code_history")) or "",
    )


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
