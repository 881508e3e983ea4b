"""A run's life, the one for every run (``fedrun``, :func:`fedprox_cli.run`): a single run is
one (seed, folder) pair, ``seeds=R`` is R of them (``RUN/seed_<s>/``, :mod:`seeds`). The life:

1. the config validated once (:func:`validated`: :func:`experiment.validate`, each seed's
   run of a batch) into the typed objects passed down;
2. the folders claimed: checked as ours, made and locked (:mod:`lock`), nothing else written
   -- a refused or failed start leaves a prior run's files byte for byte as they were, and a
   new run refused at validation no folder;
3. each run started (:func:`_start`, one path for one run and for R): recovered, resumed or
   extended where its folder says so, finished ones left alone, everything built on the data
   loaded once (:mod:`experiment`, :mod:`run_folder`);
4. trained (:mod:`training`; a batch's runs in lockstep) and concluded (:mod:`ending`), each
   folder recording its own end (:func:`lives.train`).

Every step before training ends by one error ladder (:class:`Ladder`)."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import data
from ..common import run_files, signals
from ..common.console import logging_to, say
from ..common.errors import EXIT, UserError, describe
from ..config.forms import Composed
from ..config.schema import RunConfig
from . import code_record, ending, experiment, lives, numerics, run_folder, seeds
from .experiment import Validated
from .lives import Start
from .lock import RunLock
from .outputs import Summary, provenance
from .provenance import of_data


@dataclass
class Ladder:
    """The error ladder of a run's steps before training, written once: bad input or a file
    fault is one line and exit code 2 (recorded in ``fresh``, the summaries of new folders, as
    many as it holds when the step fails); an interrupt exit code 130; a bug exit code 3 with
    its traceback in ``folder``'s error.log (:func:`ending.internal_error`). Without ``folder``
    (nothing of the run's yet), only bad input and file faults are caught. ``code``: how the
    guarded step ended, None if it went on."""

    code: int | None = None

    @contextmanager
    def guard(
        self, folder: Path | None = None, fresh: Sequence[Summary] = (), what: str = "the run"
    ) -> Iterator[None]:
        try:
            yield
        except (UserError, OSError) as e:
            say(describe(e), "error")
            for summary in fresh:  # nothing to keep: each folder says why it holds no run
                ending.end(summary, "error", error=describe(e))
            self.code = EXIT["error"]
        except KeyboardInterrupt:
            if folder is None:
                raise
            with signals.stopping():  # a later signal cannot cut the record short
                first = signals.first()
                by = f" by {signals.name(first)}" if first is not None else ""
                say(f"interrupted before {what} started")
                for summary in fresh:  # each folder says so, not "running" or nothing
                    ending.end(summary, "interrupted", error=f"stopped{by} before {what} started")
                self.code = EXIT["interrupted"]
        except Exception as e:  # a bug
            if folder is None:
                raise
            self.code = ending.internal_error(folder, e, fresh)


def run(
    composed: Composed | list[Validated],
    out: Path,
    progress: bool = True,
    command: str = "fedrun",
    hydra_record: dict[str, str] | None = None,
    reference: Composed | None = None,
    plot: ending.Plot | None = None,
) -> int:
    """Run ``composed`` into folder ``out`` -- continuing the run already there when it is the
    same (see :mod:`checkpoint`) -- and return the exit code (:data:`errors.EXIT`; a batch's:
    the worst of its runs'). ``composed``: the config as composed, or its runs validated
    already (:func:`validated`, by a caller that raises on bad input). ``reference``: see
    :func:`experiment.validate`; ``plot``: draws a finished or diverged run's figures
    (:func:`ending.conclude`; default: none). A signal noted before it (a run before it in this
    process) is none of its own: :func:`signals.first` names what stops it."""
    signals.received.clear()
    out, ladder = Path(out), Ladder()
    if isinstance(composed, list):
        runs = composed
    else:
        with ladder.guard():
            runs = validated(composed, reference)
        if ladder.code is not None:
            return ladder.code
    first = runs[0].cfg
    if first.dry_run:  # fedrun handles it before Hydra (dryrun.py); here: the API
        say(
            f"dry run: the config is valid; it would run into {out} (nothing written)",
            stream=sys.stdout,
        )
        return EXIT["finished"]
    with ExitStack() as held:
        with ladder.guard():
            folders = _claim(first, out, held)
        if ladder.code is not None:
            return ladder.code
        with logging_to(out):
            fresh: list[Summary] = []
            with ladder.guard(out, fresh, "the runs" if len(folders) > 1 else "the run"):
                starts = _start(runs, folders, out, command, fresh)
            if ladder.code is not None:
                return ladder.code
            if not starts:
                return EXIT["finished"]
            return lives.train(starts, progress, command, hydra_record, plot)


def validated(composed: Composed, reference: Composed | None = None) -> list[Validated]:
    """``composed`` validated once (:func:`experiment.validate`; bad input, an interpolation
    that fails included, is a :class:`UserError` naming the first problem in validation's
    order): the run, or with ``seeds=R`` each seed's run (:func:`seeds.with_seed`; the first
    is ``composed``'s own). A dry run validates ``composed`` only."""
    v = experiment.validate(composed, reference)
    cfg = v.cfg
    if cfg.seeds == 1 or cfg.dry_run:
        return [v]
    return [v] + [
        experiment.validate(seeds.with_seed(composed, s))
        for s in range(cfg.seed + 1, cfg.seed + cfg.seeds)
    ]


def _claim(cfg: RunConfig, out: Path, held: ExitStack) -> list[Path]:
    """The run folders of ``cfg``, claimed: ``out`` itself, or ``out/seed_<s>/`` for each seed of
    a batch; each checked as ours, made and locked (held by ``held``)."""
    if cfg.seeds == 1:
        folders = [out]
    else:
        folders = seeds.folders(cfg, out)
        seeds.check_container(out)
    for folder in folders:
        run_folder.check_owned(folder)
    out.mkdir(parents=True, exist_ok=True)
    for folder in folders:
        folder.mkdir(exist_ok=True)
        held.enter_context(RunLock(folder))
    return folders


def _finished(
    cfg: RunConfig,
    held: run_folder.Held,
    dataset: data.Dataset | None = None,
    fingerprint: dict[str, Any] | None = None,
) -> None:
    """Say that the run ``held`` has finished these T rounds (or was made by other code), once
    its data are checked the same (:func:`run_folder.same_data`) and its metrics.csv reads as
    the readers of its evidence read it (strict: a damaged record is never "nothing to do"),
    and its closing line."""
    try:
        run_files.read_metrics(held.path)
    except (run_files.RunFileError, FileNotFoundError) as e:
        damage = str(e) if isinstance(e, run_files.RunFileError) else f"{e.filename} is missing"
        raise UserError(
            f"the run in {held.path} has finished its {cfg.T} rounds, but its record is "
            f"damaged: {damage}; it is kept as it is: to run it again, add resume=false"
        ) from None
    run_folder.same_data(cfg, held, dataset, fingerprint)
    why = code_record.stale(held.code, cfg)
    say(
        code_record.stale_line(held.path, why)
        if why
        else f"the run in {held.path} has already finished its {cfg.T} rounds; nothing to do",
        stream=sys.stdout,
    )
    ending.say_closing(held.path, "finished")


def _start(
    runs: list[Validated], folders: list[Path], out: Path, command: str, fresh: list[Summary]
) -> list[Start]:
    """Each run in its locked folder: recovered (``fresh`` gets the summary of each folder that
    holds no prior run, to record a start that fails); those finished said so, the others
    built on the data loaded once, a resume with the engine and compile choice its run
    started with (:mod:`numerics`)."""
    helds = [run_folder.recover(folder) for folder in folders]
    fresh += [
        Summary(h.path, **provenance(command), T=v.cfg.T)
        for v, h in zip(runs, helds)
        if not h.prior
    ]
    todo, finished = [], []
    for one, held in zip(runs, helds):
        ckpt = run_folder.resume_point(one.cfg, one.record, held)
        if ckpt is True:
            finished.append((one, held))
        else:
            todo.append((one, held, ckpt))
    cfg = runs[0].cfg
    recorded = next((c.numerics for _, _, c in todo if c is not None), None)
    engine = numerics.resume_with(recorded, cfg, out)  # the threads too
    compiled = numerics.compiled_on_resume(recorded, cfg)
    dataset = fingerprint = None
    if todo or any(held.data is not None for _, held in finished):
        dataset = data.load_config(cfg)  # once for all runs, fingerprinted before a build moves it
        fingerprint = of_data(dataset)
    for one, held in finished:
        _finished(one.cfg, held, dataset, fingerprint)
    starts = []
    for one, held, ckpt in todo:
        exp = experiment.build(
            one,
            dataset=dataset,
            runs=len(todo),
            data_fingerprint=fingerprint,
            engine=engine,
            compiled=compiled,
        )
        started = "recorded when the run started"  # auto's choices then, not ones made again now
        if engine:
            exp.oracle.engine_choice = {"engine": engine, "source": started}
        if compiled is not None:
            exp.oracle.compile_choice = {**exp.oracle.compile_choice, "source": started}
        run_folder.fits(exp, held, ckpt)
        starts.append(Start(exp, held, ckpt))
    return starts
