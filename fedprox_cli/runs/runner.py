"""One run from a config into a folder (``fedrun``, :func:`fedprox_cli.run`): validate and
build everything first (:mod:`experiment`), then train (:mod:`training`) and write the run
folder (:mod:`run_folder`, :mod:`ending`) as every run does; ``seeds=R`` runs go to
:mod:`seeds`."""

from __future__ import annotations

import sys
from pathlib import Path

from omegaconf import DictConfig

from ..common.console import logging_to, say
from ..common.errors import EXIT, UserError, describe
from ..config.validate import resolved
from . import code_record, ending, experiment, numerics, run_folder, seeds, training
from .lock import RunLock
from .outputs import Summary, provenance


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
    same (see :mod:`checkpoint`) -- and return the exit code (:data:`errors.EXIT`). Everything is
    validated and built before the folder changes: a refused or failed start leaves a prior
    run's files byte for byte as they were, and a new run refused at validation no folder. One
    process at a time holds the folder (:mod:`lock`). ``reference``: see
    :func:`experiment.validate`; ``plot``: draws a finished or diverged run's figures
    (:func:`ending.conclude`; default: none)."""
    out = Path(out)
    try:  # an interpolation that fails is bad input, refused before anything reads the config
        resolved(composed)
    except UserError:
        try:  # the first problem in validation's order (K=0 before the step 1/K it breaks)
            experiment.validate(composed, reference)
        except (UserError, OSError) as e:
            say(describe(e), "error")
            return EXIT["error"]
    if composed.get("dry_run") is True:  # fedrun handles it before Hydra (dryrun.py); here: the API
        return _dry_run(composed, out, reference)
    if composed.get("seeds", 1) != 1:
        return seeds.run(composed, out, progress, command, hydra_record, reference, plot)
    try:
        run_folder.check_owned(out)
        if not run_folder.has_prior_run(out):  # refused at validation: no folder, no record
            experiment.validate(composed, reference)
        out.mkdir(parents=True, exist_ok=True)
        lock = RunLock(out).__enter__()
    except (UserError, OSError) as e:
        say(describe(e), "error")
        return EXIT["error"]
    try:
        with logging_to(out):
            return _run_locked(composed, out, progress, command, hydra_record, reference, plot)
    finally:
        lock.__exit__()


def _dry_run(composed: DictConfig, out: Path, reference: DictConfig | None) -> int:
    """Validate ``composed`` (no data, no folder) and say so; see :mod:`dryrun`."""
    try:
        experiment.validate(composed, reference)
    except (UserError, OSError) as e:
        say(describe(e), "error")
        return EXIT["error"]
    say(
        f"dry run: the config is valid; it would run into {out} (nothing written)",
        stream=sys.stdout,
    )
    return EXIT["finished"]


def _run_locked(composed, out, progress, command, hydra_record, reference, plot) -> int:
    run_folder.recover(out)
    prior = run_folder.has_prior_run(out)
    fresh = None if prior else Summary(out, **provenance(command), T=composed.get("T"))
    try:
        v = experiment.validate(composed, reference)
        ckpt = run_folder.resume_point(composed, out, v.cfg)
        if ckpt is True:
            run_folder.same_data(v.cfg, out)
            why = code_record.stale(out, v.cfg)
            say(
                code_record.stale_line(out, why)
                if why
                else f"the run in {out} has already finished its {v.cfg.T} rounds; nothing to do",
                stream=sys.stdout,
            )
            ending.say_closing(out, "finished")
            return EXIT["finished"]
        recorded = ckpt.numerics if ckpt is not None else None
        engine = numerics.resume_with(recorded, v.cfg, out)
        compiled = numerics.compiled_on_resume(recorded, v.cfg)
        exp = experiment.build(composed, validated=v, engine=engine, compiled=compiled)
        started = "recorded when the run started"  # auto's choices then, not ones made again now
        if engine:
            exp.oracle.engine_choice = {"engine": engine, "source": started}
        if compiled is not None:
            exp.oracle.compile_choice = {**exp.oracle.compile_choice, "source": started}
        run_folder.fits(exp, out, ckpt)
    except (UserError, OSError) as e:
        say(describe(e), "error")
        if fresh is not None:  # nothing to keep: the folder says why it holds no run
            ending.end(fresh, "error", error=describe(e))
        return EXIT["error"]
    except KeyboardInterrupt:
        say("interrupted before the run started")
        return EXIT["interrupted"]
    except Exception as e:  # a bug
        return ending.internal_error(out, e, fresh)
    return _train_into(exp, composed, out, ckpt, progress, command, hydra_record, plot)


def _train_into(exp, composed, out, ckpt, progress, command, hydra_record, plot) -> int:
    """The run proper, once everything is built: from here on the folder records it."""
    summary = Summary(out, **provenance(command), T=exp.cfg.T, code=code_record.of_config(exp.cfg))
    try:
        run_folder.begin(exp, composed, out, ckpt, summary, hydra_record)
        rows = training.train(exp, out, progress, ckpt, summary)
    except BaseException as e:  # noqa: BLE001 (conclude sorts them out; others re-raise)
        return ending.conclude(exp, composed, out, summary, e, plot=plot)
    return ending.conclude(exp, composed, out, summary, None, rows, plot)
