"""A run folder as every reader sees it (:class:`RunView`, made by :func:`read`), where run
folders are (:func:`find` below the paths given, :func:`runs_in` a job's), and the one place
a run's status is derived (:attr:`RunView.status`).

A folder is a *run folder* when it holds one of :data:`MARKS`: ``summary.json``,
``config.yaml``, ``metrics.csv``, or the lock a run takes before it writes its log or summary,
in its own folder and in no other (``.fedrun.lock``, :class:`.lock.RunLock`: not in a sweep's
folder, nor in a seed batch's own folder, whose ``fedrun.log`` is therefore no mark), which
alone marks a run stopped before its summary was written; a job of ``seeds=R`` holds one in each
``seed_<s>/`` folder. A view reads ``summary.json`` once, typed
(:func:`run_files.read_summary_checked`), and the other files when asked
(:meth:`RunView.config`, :meth:`RunView.metrics`, ...), each through its reader in
:mod:`common.run_files`. The status:

- the recorded one: ``finished``, ``diverged``, ``interrupted``, ``error``;
- ``running`` while a process holds the folder's lock, ``dead`` for a summary that says
  ``running`` when none does (it was killed, or its machine went down). The lock decides,
  never a clock: a reader's clock may be skewed against the writer's (another node, a clock
  jump), so a heartbeat's age says nothing a held lock does not;
- ``missing`` without a summary (a job's table says ``not started``, :data:`NOT_STARTED`), but
  ``running`` while a process holds the folder's lock (a run starting, its summary not yet
  written); ``unreadable`` for one that cannot be read or whose status is not a word
  (:attr:`RunView.fault` says why).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..common import run_files, scan
from .lock import is_held

if TYPE_CHECKING:  # pandas loads with the first table read
    import pandas as pd

RUNNING, DEAD, MISSING, UNREADABLE = "running", "dead", "missing", "unreadable"
NOT_STARTED = "not started"  # a job's status while its folder holds no summary
ENDED = frozenset({"finished", "diverged", "interrupted", "error"})  # what a run ends with
MARKS = frozenset({run_files.SUMMARY, run_files.CONFIG, run_files.METRICS, run_files.LOCK})
SWEEP_MARKS = frozenset({"multirun.yaml", ".fedrun"})  # Hydra's plan, fedrun's job records
PRUNE = (run_files.HYDRA, run_files.KEPT, ".fedrun", ".submitit")  # folders that hold no run


@dataclass(frozen=True, eq=False)
class RunView:
    """The run in ``path``: its summary (every field of its type; ``{}`` when missing or
    unreadable) and why that file cannot be read or holds a field of another type (``fault``;
    None: it can, or is not there)."""

    path: Path
    summary: run_files.SummaryRecord
    fault: run_files.RunFileError | None = None

    @property
    def recorded(self) -> str:
        """The status its summary records (``missing`` without one)."""
        return self.summary.get("status", MISSING)

    @cached_property
    def status(self) -> str:
        """The status every command shows (the module's list): derived here only."""
        recorded = self.recorded
        if recorded == MISSING and self.fault is not None:
            return UNREADABLE
        if recorded not in (RUNNING, MISSING):
            return recorded
        return RUNNING if is_held(self.path) else DEAD if recorded == RUNNING else MISSING

    @property
    def error(self) -> str:
        """The summary's one-line reason (unless finished), or why it cannot be read."""
        if self.status == UNREADABLE:
            return str(self.fault)
        return self.summary.get("error", "")

    @property
    def final(self) -> dict[str, float] | None:
        """The last metrics row the summary records (None: it records none)."""
        return self.summary.get("final")

    def config(self, strict: bool = True) -> dict[str, Any]:
        """``config.yaml`` (:func:`run_files.read_config`)."""
        return run_files.read_config(self.path, strict)

    def metrics(self, strict: bool = True) -> pd.DataFrame:
        """``metrics.csv`` as numbers (:func:`run_files.read_metrics`)."""
        return run_files.read_metrics(self.path, strict)

    def overrides(self) -> list[str]:
        """The command line's overrides of Hydra's record (``[]`` without one)."""
        return run_files.read_overrides(self.path, strict=False)

    def choices(self) -> dict[str, Any]:
        """The config groups' choices of Hydra's record (:func:`run_files.read_choices`)."""
        return run_files.read_choices(self.path)

    def has(self, name: str) -> bool:
        """Whether the folder holds the file ``name`` (:mod:`common.run_files`' names)."""
        return (self.path / name).exists()


def read(folder: str | os.PathLike[str]) -> RunView:
    """The view of the run in ``folder`` (its summary read now, the rest when asked)."""
    summary, fault = run_files.read_summary_checked(folder)
    return RunView(Path(folder), summary, fault)


def status(folder: str | os.PathLike[str]) -> str:
    """The status of the run in ``folder`` (:attr:`RunView.status`)."""
    return read(folder).status


def is_run(names: Iterable[str]) -> bool:
    """Whether a folder holding the entries ``names`` is a run folder (one of :data:`MARKS`)."""
    return not MARKS.isdisjoint(names)


def seed_folders(folder: Path) -> list[Path]:
    """The ``seed_<s>/`` folders of a seed-batched job (``seeds=R``) in ``folder``, by seed
    (started or not; [] without the folder)."""
    try:
        below = [p for p in Path(folder).iterdir() if p.is_dir() and not p.is_symlink()]
    except OSError:
        return []
    prefix = run_files.SEED_PREFIX
    seeds = [p for p in below if p.name.startswith(prefix) and p.name[len(prefix) :].isdigit()]
    return sorted(seeds, key=lambda p: int(p.name[len(prefix) :]))


def holds_run(folder: Path) -> bool:
    """Whether ``folder`` is a run folder (:func:`is_run`; False when it cannot be listed)."""
    try:
        return is_run(os.listdir(folder))
    except OSError:
        return False


def runs_in(folder: Path) -> list[Path]:
    """The run folders a job wrote: ``folder`` itself, or its ``seed_<s>/`` folders that are
    run folders (``seeds=R``)."""
    folder = Path(folder)
    if holds_run(folder):
        return [folder]
    return [p for p in seed_folders(folder) if holds_run(p)]


def is_sweep(names: Iterable[str]) -> bool:
    """Whether a folder holding the entries ``names`` is a sweep folder (one of
    :data:`SWEEP_MARKS`), whose job records or plan may name more job folders."""
    return not SWEEP_MARKS.isdisjoint(names)


def find(
    paths: Iterable[str | os.PathLike[str]], warn: Callable[[str], None]
) -> Iterator[tuple[Path, frozenset[str]]]:
    """Every run folder (:func:`is_run`) and sweep folder (:func:`is_sweep`) at or below
    ``paths``, with the names of the entries it holds, parents before their children, walked
    once as it is consumed (:func:`scan.walk`, which names each folder it cannot list through
    ``warn``)."""
    for d, names in scan.walk(map(Path, paths), warn, PRUNE):
        if is_run(names) or is_sweep(names):
            yield d, names
