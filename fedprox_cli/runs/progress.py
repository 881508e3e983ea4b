"""A run's progress, wherever it runs.

On a terminal (and one job at a time): a tqdm bar. Otherwise -- stderr piped to a file, under
nohup, on a cluster node, in parallel sweep jobs -- a plain line at the first evaluation (the
estimate of the time left comes early), then at an evaluation once :data:`FIRST_S` seconds have
passed, then twice that, and so on up to ``progress_every_s`` (config key, default 30; 0 = every
evaluation), from then on every ``progress_every_s`` seconds (:class:`Progress`)::

    fedrun: round 40/100, 1m12s elapsed, ~1m48s left; loss 0.3412, objective 0.3501, acc 0.9120

(``fedrun: job 3: round ...`` in a job of a sweep: :func:`console.as_job`). "elapsed" is the
wall clock since the rounds began, evaluations and checkpoints included; the closing line's
"training Ns (rounds only)" is metrics.csv's ``time_s``, the rounds' computation alone.

Each line goes to the run folder's ``fedrun.log`` and, as the run's latest, to its
``summary.json`` (``progress``); and to stderr through :func:`console.say`, unless a bar shows
the progress, or the job is :func:`watched`: a sweep's launching process prints its jobs' lines
from their summaries (:mod:`fedprox_cli.cli.watch`), one whole line at a time whatever the
launcher.
"""

from __future__ import annotations

import math
import os
import time

from tqdm import tqdm

from ..common import metric_table as mt
from ..common import streams
from ..common.console import log_only, say


def duration(seconds: float) -> str:
    """``45s``, ``12m05s``, ``3h02m`` (``?`` for a value that is not a finite number >= 0)."""
    if not (isinstance(seconds, (int, float)) and math.isfinite(seconds) and seconds >= 0):
        return "?"
    s = int(round(seconds))
    if s < 60:
        return f"{seconds:.1f}s" if seconds < 10 else f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


FIRST_S = 5.0  # the interval before the second line; each next one doubles, up to progress_every_s
SHOWN = (("loss", mt.TRAIN_LOSS), (mt.OBJECTIVE.words, mt.OBJECTIVE), ("acc", mt.TEST_ACC))
WATCHED = "FEDRUN_WATCHED"  # set by a sweep's launching process that prints its jobs' lines


def watched() -> bool:
    """Whether this process's stderr is that of a sweep's launching process which prints the
    progress and closing lines of its jobs (:data:`WATCHED` names its stderr): jobs run in it or
    in workers sharing its stderr (the basic and joblib launchers) leave those lines to it, so
    that each comes once; a job writing elsewhere (a SLURM log, a Ray worker's) prints its own."""
    mark = os.environ.get(WATCHED, "")
    return bool(mark) and mark == streams.identity()


def progress_line(
    done: int, T: int, elapsed: float, left: float | None, row: dict[str, float], label: str = ""
) -> str:
    """The text of a progress line after ``done`` of ``T`` rounds (``label``: e.g. ``seed 3: ``;
    a sweep's job number is added where the line is printed)."""
    eta = f", ~{duration(left)} left" if left is not None else ""
    return f"{label}round {done}/{T}, {duration(elapsed)} elapsed{eta}; " + ", ".join(
        f"{short} {m.number(row[m.name])}" for short, m in SHOWN
    )


class Progress:
    """Progress of rounds ``start``..``T``: a bar (``bar=True``) or not, and lines at the first
    evaluation, then after :data:`FIRST_S` seconds, doubling up to ``every_s``; one due at round
    T goes to the log only (the closing line follows and says it); ``latest``: the last line
    shown, None before the first."""

    def __init__(
        self, T: int, start: int, bar: bool, every_s: float, desc: str = "", label: str = ""
    ):
        self.T, self.start, self.every_s, self.label = T, start, every_s, label
        self.t0 = self.last = time.monotonic()
        self.wait = 0.0  # before the next line
        self.latest: str | None = None
        self.bar = tqdm(total=T, initial=start, desc=desc, dynamic_ncols=True) if bar else None

    def round_done(self) -> None:
        if self.bar is not None:
            self.bar.update(1)

    def evaluated(self, done: int, row: dict[str, float]) -> None:
        """After the evaluation of round ``done`` (``row``: its metrics)."""
        now = time.monotonic()
        elapsed = now - self.t0
        left = elapsed / (done - self.start) * (self.T - done) if done > self.start else None
        if self.bar is not None:
            self.bar.set_postfix({short: m.number(row[m.name]) for short, m in SHOWN[::2]})
        if self.latest is None or now - self.last >= self.wait:
            line = progress_line(done, self.T, elapsed, left, row, self.label)
            if done >= self.T:  # the closing line follows and says it all
                log_only(line)
                return
            self.latest = line
            (say if self.bar is None and not watched() else log_only)(line)
            self.last, self.wait = now, min(max(2 * self.wait, FIRST_S), self.every_s)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
