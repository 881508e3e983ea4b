"""A sweep's jobs seen from its launching process while they run, whatever the launcher (basic,
joblib, Ray, submitit): a thread (:class:`Watch`) reads each job's ``summary.json`` -- which
every run keeps up to date with its status, its rounds and its latest progress line
(:mod:`fedprox_cli.runs.progress`) -- and prints one whole line per event:

    fedrun: job 1: started, 300 rounds (seed=1)
    fedrun: job 1: round 5/300, 0.3s elapsed, ~17s left; loss 0.4012, objective 0.4123, acc 0.9011
    fedrun: job 1: summary: finished, 300/300 rounds: test accuracy 0.9583, ...; <folder>

(the start and progress lines on stderr, the closing line on stdout), all before the sweep's
report. A job started or resumed in the sweep counts, one a prior sweep left alone does not.
Jobs writing to the same stderr as this process leave these lines to it
(:func:`progress.watched`); on a terminal with the basic launcher the job's bar shows its
progress, and nothing is watched (:func:`bars`).
"""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from ..analysis.jobrecords import JobRecord
from ..common import streams
from ..common.run_files import SEED_PREFIX, SummaryRecord
from ..runs import face
from .jobtable import differing

POLL_S = 0.5  # between two readings of the jobs' summaries (plus PER_JOB_S per job not ended)
PER_JOB_S = 0.001


def bars(launcher: str) -> bool:
    """Whether a job launched by ``launcher`` (its ``_target_``) shows a bar: it runs in this
    process (the basic launcher), one at a time, and stderr is a terminal."""
    return launcher.endswith("BasicLauncher") and sys.stderr.isatty()


@dataclass
class _Run:
    """What was last read of one run's summary."""

    started: tuple[str | None, int | None] | None = None  # when and by which process it started
    progress: str | None = None
    begun: bool = False  # started (or resumed) during the sweep


def _started(summary: SummaryRecord) -> tuple[str | None, int | None]:
    return summary.get("started"), summary.get("pid")


def _read(run: Path) -> SummaryRecord:
    return face.read(run).summary


class Watch:
    """Prints the lines of the jobs ``planned`` (None: every job folder that appears in
    ``sweep``) while they run; :meth:`stop` prints the last ones and ends the thread."""

    def __init__(self, sweep: Path, planned: list[JobRecord] | None):
        self.sweep = Path(sweep)
        jobs = planned or []
        shown = differing([list(j.overrides) for j in jobs])
        self.jobs = {Path(j.folder): (f"job {j.num}", d) for j, d in zip(jobs, shown)}
        self.planned = planned is not None
        self.runs: dict[Path, _Run] = {}
        self.ended: set[Path] = set()
        for folder in self._folders():
            for run in face.runs_in(folder):
                s = _read(run)
                self.runs[run] = _Run(_started(s), s.get("progress"))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="fedrun-watch", daemon=True)

    def start(self) -> Watch:
        self._thread.start()
        return self

    def stop(self) -> None:
        """End the thread, then print what the jobs' summaries say since its last reading."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self.poll()

    def _loop(self) -> None:
        while not self._stop.wait(POLL_S + PER_JOB_S * (len(self.jobs) - len(self.ended))):
            try:
                self.poll()
            except (OSError, ValueError):  # a folder changing as it is read: the next poll
                continue

    def _folders(self) -> list[Path]:
        if self.planned:
            return [f for f in self.jobs if f not in self.ended]
        try:
            return [p for p in self.sweep.iterdir() if p.is_dir() and not p.name.startswith(".")]
        except OSError:
            return []

    def poll(self) -> None:
        """Read every job's runs not ended yet; print what is new."""
        for folder in self._folders():
            runs = face.runs_in(folder)
            for run in runs:
                self._news(folder, run)
            if self.planned and runs and all(r in self.ended for r in runs):
                self.ended.add(folder)

    def _news(self, folder: Path, run: Path) -> None:
        if run in self.ended:
            return
        s, was = _read(run), self.runs.setdefault(run, _Run())
        if not s:
            return
        label, shown = self.jobs.get(folder, (folder.name, []))
        of_run = label if run == folder else f"{label}: seed {run.name.removeprefix(SEED_PREFIX)}"
        if s.get("started") and _started(s) != was.started:
            was.started, was.begun = _started(s), True
            at = s.get("started_round") or 0
            streams.err(
                f"fedrun: {of_run}: {f'resumed at round {at} of' if at else 'started,'} "
                f"{s.get('T', '?')} rounds" + (f" ({' '.join(shown)})" if shown else "")
            )
        if was.begun and s.get("progress") and s["progress"] != was.progress:
            was.progress = s["progress"]
            streams.err(f"fedrun: {label}: {s['progress']}")  # seed runs': "seed 3: round ..."
        if was.begun and s.get("status") in face.ENDED:
            self.ended.add(run)
            streams.out(f"fedrun: {of_run}: summary: {face.closing_line(run, s['status'])}")


def start(sweep: Path, planned: list[JobRecord] | None, launcher: str) -> Watch | None:
    """Watch the sweep's jobs (:class:`Watch`) unless they show bars (:func:`bars`); the jobs
    learn from :data:`progress.WATCHED`, set here for them, that this process prints their
    lines."""
    if bars(launcher):
        return None
    os.environ[face.WATCHED] = streams.identity()
    return Watch(sweep, planned).start()


def stop(watch: Watch | None) -> None:
    """Print the jobs' last lines; the jobs of a later sweep of this process are not told."""
    os.environ.pop(face.WATCHED, None)
    if watch is not None:
        watch.stop()
