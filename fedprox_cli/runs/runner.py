"""A run's life, the one for every run (``fedrun``, :func:`fedprox_cli.run`): a single run is
one (seed, folder) pair, ``seeds=R`` is R of them (``RUN/seed_<s>/``, :mod:`seeds`). The life:

1. the config validated once (:func:`experiment.validate`) into the typed object passed down;
2. the folders claimed: checked as ours, made and locked (:mod:`lock`), nothing else written
   -- a refused or failed start leaves a prior run's files byte for byte as they were, and a
   new run refused at validation no folder;
3. each run started: recovered, resumed or extended where its folder says so, finished ones
   left alone, everything built (:mod:`experiment`, :mod:`run_folder`);
4. trained (:mod:`training`; a batch's runs in lockstep, :func:`seeds.train`) and concluded
   (:mod:`ending`), each folder recording its own end.

Every step before training ends by one error ladder (:class:`Ladder`)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from omegaconf import DictConfig

from .. import data
from ..common.console import logging_to, say
from ..common.errors import EXIT, UserError, describe
from ..config.validate import resolved
from . import checkpoint, code_record, ending, experiment, numerics, run_folder, seeds, training
from .experiment import Experiment, Validated
from .lock import RunLock
from .outputs import Summary, provenance
from .provenance import of_data


@dataclass
class Ladder:
    """The error ladder of a run's steps before training, written once: bad input or a file
    fault is one line and exit code 2 (recorded in ``fresh``, a new folder's summary, if any);
    an interrupt exit code 130; a bug exit code 3 with its traceback in ``folder``'s error.log
    (:func:`ending.internal_error`). Without ``folder`` (nothing of the run's yet), only bad
    input and file faults are caught. ``code``: how the guarded step ended, None if it went on."""

    code: int | None = None

    @contextmanager
    def guard(
        self, folder: Path | None = None, fresh: Summary | None = None, what: str = "the run"
    ) -> Iterator[None]:
        try:
            yield
        except (UserError, OSError) as e:
            say(describe(e), "error")
            if fresh is not None:  # nothing to keep: the folder says why it holds no run
                ending.end(fresh, "error", error=describe(e))
            self.code = EXIT["error"]
        except KeyboardInterrupt:
            if folder is None:
                raise
            say(f"interrupted before {what} started")
            self.code = EXIT["interrupted"]
        except Exception as e:  # a bug
            if folder is None:
                raise
            self.code = ending.internal_error(folder, e, fresh)


@dataclass
class Start:
    """A run ready to train: built, with the checkpoint it continues from (None: round 0)."""

    exp: Experiment
    folder: Path
    ckpt: checkpoint.Checkpoint | None


def run(
    composed: DictConfig,
    out: Path,
    progress: bool = True,
    command: str = "fedrun",
    hydra_record: dict[str, str] | None = None,
    reference: DictConfig | None = None,
    plot: ending.Plot | None = None,
) -> int:
    """Run ``composed`` into folder ``out`` -- continuing the run already there when it is the
    same (see :mod:`checkpoint`) -- and return the exit code (:data:`errors.EXIT`; a batch's:
    the worst of its runs'). ``reference``: see :func:`experiment.validate`; ``plot``: draws a
    finished or diverged run's figures (:func:`ending.conclude`; default: none)."""
    out, ladder = Path(out), Ladder()
    with ladder.guard():  # an interpolation that fails is refused before anything reads it
        _first_problem(composed, reference)
    if ladder.code is not None:
        return ladder.code
    if composed.get("dry_run") is True:  # fedrun handles it before Hydra (dryrun.py); here: the API
        return _dry_run(composed, out, reference)
    with ExitStack() as held:
        with ladder.guard():
            v, pairs = _claim(composed, out, reference, held)
        if ladder.code is not None:
            return ladder.code
        with logging_to(out):
            if composed.get("seeds", 1) != 1:
                return _batch(v, pairs, out, command, hydra_record, plot)
            return _one(v, composed, out, progress, command, hydra_record, reference, plot)


def _first_problem(composed: DictConfig, reference: DictConfig | None) -> None:
    """Refuse a config whose interpolations fail, naming the first problem in validation's
    order (K=0 before the step 1/K it breaks)."""
    try:
        resolved(composed)
    except UserError:
        experiment.validate(composed, reference)


def _dry_run(composed: DictConfig, out: Path, reference: DictConfig | None) -> int:
    """Validate ``composed`` (no data, no folder) and say so; see :mod:`dryrun`."""
    ladder = Ladder()
    with ladder.guard():
        experiment.validate(composed, reference)
    if ladder.code is not None:
        return ladder.code
    say(
        f"dry run: the config is valid; it would run into {out} (nothing written)",
        stream=sys.stdout,
    )
    return EXIT["finished"]


def _claim(
    composed: DictConfig, out: Path, reference: DictConfig | None, held: ExitStack
) -> tuple[Validated | None, list[tuple[int, Path]]]:
    """Validate and claim the run's folders: ``out`` itself (one run: validated here unless it
    holds a prior run, whose own validation comes once it is locked), or ``out/seed_<s>/``
    for each seed of a batch; each checked as ours, made and locked (held by ``held``)."""
    if composed.get("seeds", 1) == 1:
        run_folder.check_owned(out)
        v = None if run_folder.has_prior_run(out) else experiment.validate(composed, reference)
        pairs = [(int(composed.seed), out)]
    else:
        v = experiment.validate(composed, reference)
        pairs = seeds.folders(v.cfg, out)
        seeds.check_container(out)
        for _, folder in pairs:
            run_folder.check_owned(folder)
    out.mkdir(parents=True, exist_ok=True)
    for _, folder in pairs:
        folder.mkdir(exist_ok=True)
        held.enter_context(RunLock(folder))
    return v, pairs


def _finished(
    cfg, folder: Path, dataset: data.Dataset | None = None, fingerprint: dict | None = None
) -> None:
    """Say that the run in ``folder`` has finished these T rounds (or was made by other code),
    once its data are checked the same (:func:`run_folder.same_data`)."""
    run_folder.same_data(cfg, folder, dataset, fingerprint)
    why = code_record.stale(folder, cfg)
    say(
        code_record.stale_line(folder, why)
        if why
        else f"the run in {folder} has already finished its {cfg.T} rounds; nothing to do",
        stream=sys.stdout,
    )


def _one(v, composed, out, progress, command, hydra_record, reference, plot) -> int:
    """A single run in the locked folder ``out``: started (resumed with the engine it began
    with), then trained."""
    run_folder.recover(out)
    prior = run_folder.has_prior_run(out)
    fresh = None if prior else Summary(out, **provenance(command), T=composed.get("T"))
    ladder = Ladder()
    with ladder.guard(out, fresh):
        v = v or experiment.validate(composed, reference)
        ckpt = run_folder.resume_point(composed, out, v.cfg)
        if ckpt is True:
            _finished(v.cfg, out)
            ending.say_closing(out, "finished")
            return EXIT["finished"]
        recorded = ckpt.numerics if ckpt is not None else None
        engine = numerics.resume_with(recorded, v.cfg, out)
        compiled = numerics.compiled_on_resume(recorded, v.cfg)
        exp = experiment.build(v, engine=engine, compiled=compiled)
        started = "recorded when the run started"  # auto's choices then, not ones made again now
        if engine:
            exp.oracle.engine_choice = {"engine": engine, "source": started}
        if compiled is not None:
            exp.oracle.compile_choice = {**exp.oracle.compile_choice, "source": started}
        run_folder.fits(exp, out, ckpt)
    if ladder.code is not None:
        return ladder.code
    summary = Summary(out, **provenance(command), T=exp.cfg.T, code=code_record.of_config(exp.cfg))
    try:  # the run proper, once everything is built: from here on the folder records it
        run_folder.begin(exp, out, ckpt, summary, hydra_record)
        rows = training.train(exp, out, progress, ckpt, summary)
    except BaseException as e:  # noqa: BLE001 (conclude sorts them out; others re-raise)
        return ending.conclude(exp, out, summary, e, plot=plot)
    return ending.conclude(exp, out, summary, None, rows, plot)


def _batch(v, pairs, out, command, hydra_record, plot) -> int:
    """The runs of a seed batch in their locked folders: each started (the data loaded once
    for all), those not finished trained together (:func:`seeds.train`)."""
    ladder, starts = Ladder(), []
    with ladder.guard(pairs[0][1], what="the runs"):
        starts = _start_batch(v, pairs, out)
    if ladder.code is not None:
        return ladder.code
    if not starts:
        return EXIT["finished"]
    return seeds.train(starts, v.cfg.seeds, command, hydra_record, plot)


def _start_batch(v: Validated, pairs: list[tuple[int, Path]], out: Path) -> list[Start]:
    """Each run of the batch recovered and validated once; those finished said so, the others
    built on the data loaded once."""
    todo, finished = [], []
    for seed, folder in pairs:
        run_folder.recover(folder)
        one = experiment.validate(seeds.with_seed(v.composed, seed))
        ckpt = run_folder.resume_point(one.composed, folder, one.cfg)
        if ckpt is True:
            finished.append((one, folder))
        else:
            todo.append((one, folder, ckpt))
    numerics.resume_with(next((c.numerics for _, _, c in todo if c), None), v.cfg, out)  # threads
    dataset = data.load_config(v.cfg)  # once for all runs, fingerprinted before a build moves it
    fingerprint = of_data(dataset)
    for one, folder in finished:
        _finished(one.cfg, folder, dataset, fingerprint)
    starts = []
    for one, folder, ckpt in todo:
        exp = experiment.build(one, dataset=dataset, runs=len(todo), data_fingerprint=fingerprint)
        run_folder.fits(exp, folder, ckpt)
        starts.append(Start(exp, folder, ckpt))
    return starts
