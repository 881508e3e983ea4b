"""What the command line asks of the runs layer: ``cli/`` imports ``runs/`` through this module
only (tests/test_imports.py). Importing it loads no torch; a job's run and the check of a job
load it when called.

- a job run into its folder (:func:`run_job`), and what it would do there (:func:`check`);
- a run folder read back (:mod:`view`: :func:`read`, :func:`status`, the finder :func:`find`,
  a job's runs :func:`runs_in`), its record and closing line (:mod:`recap`), and a run that a
  stopped sweep left saying ``running`` marked as stopped (:func:`stopped`);
- the folders a run was refused for being held by another process (:data:`refused`), and who
  holds one (:func:`holder`);
- how a duration is written (:func:`duration`) and the variable that tells a sweep's jobs that
  their launcher prints their lines (:data:`WATCHED`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, cast

from omegaconf import DictConfig

from ..common.console import say
from ..common.errors import EXIT
from ..config.forms import Composed
from .lock import holder, refused
from .outputs import Summary
from .preview import check
from .progress import WATCHED, duration
from .recap import RunRecord, closing_line, record, rounds
from .view import (
    DEAD,
    ENDED,
    MARKS,
    MISSING,
    NOT_STARTED,
    UNREADABLE,
    RunView,
    find,
    holds_run,
    is_run,
    is_sweep,
    read,
    runs_in,
    seed_folders,
    status,
)

if TYPE_CHECKING:
    from hydra.conf import HydraConf

    from .ending import Plot  # torch: not at import

__all__ = [
    "DEAD",
    "ENDED",
    "MISSING",
    "NOT_STARTED",
    "MARKS",
    "UNREADABLE",
    "WATCHED",
    "RunRecord",
    "RunView",
    "check",
    "closing_line",
    "duration",
    "find",
    "holder",
    "holds_run",
    "is_run",
    "is_sweep",
    "read",
    "record",
    "refused",
    "rounds",
    "run_job",
    "runs_in",
    "seed_folders",
    "status",
    "stopped",
]


def run_job(
    hc: HydraConf,
    composed: Composed,
    out: Path,
    progress: bool,
    plot: Plot,
) -> int:
    """The job's run into ``out`` (``hc``: its Hydra config): its config validated once
    (:func:`runner.validated`, bad input ending by the run's own error ladder), then run
    (:func:`runner.run`). A run without ``-m`` of a preset whose ``hydra.sweeper.params``
    define a sweep first says, once its config is valid, that it runs one config (the preset's
    own values) and what ``-m`` would run."""
    from hydra.types import RunMode

    from ..config import compose_once
    from ..config.compose import command, hydra_files, one_of_a_sweep, overrides, reference_for
    from . import runner  # here, so that config errors are reported before torch loads

    reference = reference_for(
        composed, dict(hc.runtime.choices), overrides(hc), compose_once.reference()
    )
    ladder = runner.Ladder()
    with ladder.guard():
        runs = runner.validated(composed, reference)
    if ladder.code is not None:
        return ladder.code
    note = one_of_a_sweep(cast(DictConfig, hc)) if hc.mode != RunMode.MULTIRUN else None
    if note:
        say(note, "note")
    return runner.run(
        runs,
        out,
        progress=progress,
        command=command(hc),
        hydra_record=hydra_files(composed, hc),
        plot=plot,
    )


def stopped(run: RunView, why: str) -> None:
    """Record in ``run``'s summary that it was stopped (``interrupted``, and ``why``): a run whose
    process a sweep's interruption ended before it could record its end."""
    Summary(run.path, **run.summary).end("interrupted", exit_code=EXIT["interrupted"], error=why)
