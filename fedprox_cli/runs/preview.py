"""What a run would do in its folder, without running it (the dry run's and a sweep's check of
every job, ``cli/dryrun.py``): a job validated as a run validates it (:func:`check`), then its
folder read (:func:`state`: new, resumed from a round, finished already, stale, held by a
running process; a ``seeds=R`` job's runs one by one where their folders exist,
:func:`batch`). Nothing is written."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ..common import run_files
from ..config import extras
from ..config.compose import reference_config
from ..config.forms import Composed
from .lock import holder
from .view import seed_folders

if TYPE_CHECKING:  # a job's config holds torch's types: torch loads when jobs are listed
    from ..config.composer import Job
    from ..config.validate import Reference


def check(
    job: Job, references: dict[tuple[tuple[str, str], ...], Reference | None] | None = None
) -> tuple[str, int | dict[int, int]]:
    """Validate a job like a real run (:func:`config.validate.typed_resolved` against the job's
    reference, :func:`experiment.checks`, the folder checks); returns what the run would do in
    its folder and the round it would start from (with ``seeds=R``: the state of each
    ``seed_<s>/`` run and their start rounds counted, :func:`batch`). Raises
    :class:`UserError` (or Hydra's errors). ``references``: :class:`config.validate.Reference`
    by group choices, reused across a sweep's jobs."""
    from ..common.flatten import flatten
    from ..config.validate import Reference, typed_resolved  # noqa: F811 -- the class itself
    from . import experiment, seeds  # torch loads here: when a job is checked

    references = {} if references is None else references
    key = tuple(sorted((g, str(c)) for g, c in job.choices.items()))
    if key not in references:
        references[key] = Reference.of(reference_config(job.choices))
    extras.check(job.choices)
    experiment.checks(typed_resolved(flatten(job.plain), job.resolved, references[key]))
    values = cast(dict[str, Any], job.resolved.values)
    if values["seeds"] == 1:
        return state(lambda: job.cfg, job.folder, values["T"])
    seeds.check_container(job.folder)
    return batch(job)


def batch(job: Job) -> tuple[str, dict[int, int]]:
    """The state of each run of a ``seeds=R`` job and their start rounds counted: the seeds whose
    folder exists are checked one by one, the others are new runs (no folder: nothing to check),
    so the cost grows with the runs on disk, not with R."""
    from . import seeds

    values = cast(dict[str, Any], job.resolved.values)
    first, R, T = values["seed"], values["seeds"], values["T"]
    numbers = (int(p.name.removeprefix(run_files.SEED_PREFIX)) for p in seed_folders(job.folder))
    on_disk = [n for n in numbers if first <= n < first + R]
    starts: dict[int, int]
    said, starts, last = [], {}, first
    for s in sorted(on_disk):
        if s > last:
            said.append(_new(last, s - 1))
        what, start = state(
            cast(Callable[[], Composed], lambda s=s: seeds.with_seed(job.cfg, s)),
            job.folder / run_files.seed_folder(s),
            T,
        )
        said.append(f"seed {s} {what}")
        starts[start] = starts.get(start, 0) + 1
        last = s + 1
    if last < first + R:
        said.append(_new(last, first + R - 1))
    new = first + R - len(on_disk) - first
    if new:
        starts[0] = starts.get(0, 0) + new
    states = {x.split(" ", 2)[-1] for x in said}
    return f"{R} runs: " + (states.pop() if len(states) == 1 else ", ".join(said)), starts


def _new(a: int, b: int) -> str:
    return f"seed {a} new" if a == b else f"seeds {a}-{b} new"


def state(config: Callable[[], Composed], folder: Path, T: int) -> tuple[str, int]:
    """What a run of ``config()`` (made only for a folder that exists: a seed batch of many new
    runs costs no config each) would do in ``folder``, and the round it would start from (T: no
    work, as for a run another process holds, which this one would be refused)."""
    from ..config.validate import typed
    from . import code_record, run_folder
    from .experiment import Record

    run_folder.check_owned(folder)
    if not folder.exists():
        return "new", 0
    running = holder(folder)
    if running is not None:  # the run would be refused: the folder is in use
        return f"running now ({running}): refused", T
    composed = config()
    cfg = typed(composed)
    held = run_folder.read(folder)
    start = run_folder.resume_point(cfg, Record.of(composed), held)
    if start is True:
        why = code_record.stale(held.code, cfg)
        return (
            f"stale: made by other code ({'; '.join(why)}); resume=false re-runs it"
            if why
            else "finished already"
        ), T
    return (f"resumes from round {start.round}", start.round) if start is not None else ("new", 0)
