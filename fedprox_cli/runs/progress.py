"""A run's progress, wherever it runs.

On a terminal (and one job at a time): a tqdm bar. Otherwise -- stderr piped to a file, under
nohup, on a cluster node, in parallel sweep jobs -- a plain line at an evaluation when at least
``progress_every_s`` seconds (config key, default 30; 0 = every evaluation) have passed since the
last line, so a line comes every evaluation or every ``progress_every_s`` seconds, whichever is
rarer::

    fedrun: round 40/100, 1m12s elapsed, ~1m48s left; loss 0.3412, objective 0.3501, acc 0.9120

(``fedrun: job 3: round ...`` in a job of a sweep, whose jobs may run in parallel). "elapsed" is
the wall clock since the rounds began, evaluations and checkpoints included; the closing line's
"training Ns (rounds only)" is metrics.csv's ``time_s``, the rounds' computation alone.

The lines go through :func:`console.say`: to stderr and to the run folder's ``fedrun.log``
(with a bar, at the same cadence, to the log only).
"""

from __future__ import annotations

import math
import time

from tqdm import tqdm

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


def job_label() -> str:
    """``job 3: `` inside a job of a Hydra multirun (parallel jobs' lines interleave), else
    ``""``."""
    try:
        from hydra.core.hydra_config import HydraConfig

        mode = HydraConfig.get().mode if HydraConfig.initialized() else None
        if mode is not None and mode.name == "MULTIRUN":
            return f"job {HydraConfig.get().job.num}: "
    except Exception:  # no Hydra config of a job (the Python API)
        pass
    return ""


def progress_line(
    done: int, T: int, elapsed: float, left: float | None, row: dict, label: str = ""
) -> str:
    """The text of a progress line after ``done`` of ``T`` rounds (``label``: e.g. ``seed 3: ``)."""
    eta = f", ~{duration(left)} left" if left is not None else ""
    return (
        f"{job_label()}{label}round {done}/{T}, {duration(elapsed)} elapsed{eta}; loss "
        f"{row['train_loss']:.4g}, "
        f"objective {row['objective']:.4g}, acc {row['test_acc']:.4f}"
    )


class Progress:
    """Progress of rounds ``start``..``T``: a bar (``bar=True``) or lines every ``every_s``."""

    def __init__(
        self, T: int, start: int, bar: bool, every_s: float, desc: str = "", label: str = ""
    ):
        self.T, self.start, self.every_s, self.label = T, start, every_s, label
        self.t0 = self.last = time.monotonic()
        self.bar = tqdm(total=T, initial=start, desc=desc, dynamic_ncols=True) if bar else None

    def round_done(self) -> None:
        if self.bar is not None:
            self.bar.update(1)

    def evaluated(self, done: int, row: dict) -> None:
        """After the evaluation of round ``done`` (``row``: its metrics)."""
        now = time.monotonic()
        elapsed = now - self.t0
        left = elapsed / (done - self.start) * (self.T - done) if done > self.start else None
        if self.bar is not None:
            self.bar.set_postfix(loss=f"{row['train_loss']:.4f}", acc=f"{row['test_acc']:.3f}")
        if now - self.last >= self.every_s:
            (say if self.bar is None else log_only)(
                progress_line(done, self.T, elapsed, left, row, self.label)
            )
            self.last = now

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
