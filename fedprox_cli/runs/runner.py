"""One run from a config into a folder (``fedrun``, :func:`fedprox_cli.run`): validate and
build everything first, then train and write the run folder through the lifecycle every run
shares (:mod:`lifecycle`); ``seeds=R`` runs go to :mod:`seeds`."""

from __future__ import annotations

import sys
from pathlib import Path

from omegaconf import DictConfig

from . import lifecycle, seeds
from .console import logging_to, say
from ..common.errors import EXIT, UserError, describe
from ..config.validate import resolved
from .lock import RunLock
from . import code_record
from .outputs import Summary, provenance


def run(cfg: DictConfig, out: Path, progress: bool = True, command: str = "fedrun",
        hydra_record: dict[str, str] | None = None, reference: DictConfig | None = None) -> int:
    """Run ``cfg`` into folder ``out`` -- continuing the run already there when it is the same
    (see :mod:`checkpoint`) -- and return the exit code (:data:`errors.EXIT`). Everything is
    validated and built before the folder changes: a refused or failed start leaves a prior
    run's files byte for byte as they were, and a new run refused at validation no folder. One process at a time holds the folder
    (:mod:`lock`). ``reference``: see :func:`validate`."""
    out = Path(out)
    try:  # an interpolation that fails is bad input, refused before anything reads the config
        resolved(cfg)
    except UserError:
        try:  # the first problem in validation's order (K=0 before the step 1/K it breaks)
            lifecycle.validate(cfg, reference)
        except (UserError, OSError) as e:
            say(describe(e), "error")
            return EXIT["error"]
    if cfg.get("dry_run") is True:  # fedrun handles it before Hydra (dryrun.py); here: the API
        return _dry_run(cfg, out, reference)
    if cfg.get("seeds", 1) != 1:
        return seeds.run(cfg, out, progress, command, hydra_record, reference)
    try:
        lifecycle.check_owned(out)
        if not lifecycle.has_prior_run(out):  # refused at validation: no folder, no record
            lifecycle.validate(cfg, reference)
        out.mkdir(parents=True, exist_ok=True)
        lock = RunLock(out).__enter__()
    except (UserError, OSError) as e:
        say(describe(e), "error")
        return EXIT["error"]
    try:
        with logging_to(out):
            return _run_locked(cfg, out, progress, command, hydra_record, reference)
    finally:
        lock.__exit__()


def _dry_run(cfg: DictConfig, out: Path, reference: DictConfig | None) -> int:
    """Validate ``cfg`` (no data, no folder) and say so; see :mod:`dryrun`."""
    try:
        lifecycle.validate(cfg, reference)
    except (UserError, OSError) as e:
        say(describe(e), "error")
        return EXIT["error"]
    say(f"dry run: the config is valid; it would run into {out} (nothing written)", stream=sys.stdout)
    return EXIT["finished"]


def _run_locked(cfg, out, progress, command, hydra_record, reference) -> int:
    lifecycle.recover(out)
    prior = lifecycle.has_prior_run(out)
    fresh = None if prior else Summary(out, **provenance(command), T=cfg.get("T"))
    try:
        v = lifecycle.validate(cfg, reference)
        ckpt = lifecycle.resume_point(cfg, out, v.s)
        if ckpt is True:
            lifecycle.same_data(v.s, out)
            why = code_record.stale(out, v.s)
            say(code_record.stale_line(out, why) if why else
                f"the run in {out} has already finished its {v.s.T} rounds; nothing to do", stream=sys.stdout)
            lifecycle.say_closing(out, "finished")
            return EXIT["finished"]
        exp = lifecycle.build(cfg, validated=v)
        lifecycle.fits(exp, out, ckpt)
    except (UserError, OSError) as e:
        say(describe(e), "error")
        if fresh is not None:  # nothing to keep: the folder says why it holds no run
            lifecycle.end(fresh, "error", error=describe(e))
        return EXIT["error"]
    except KeyboardInterrupt:
        say("interrupted before the run started")
        return EXIT["interrupted"]
    except Exception as e:  # a bug
        return lifecycle.internal_error(out, e, fresh)
    return _train_into(exp, cfg, out, ckpt, progress, command, hydra_record)


def _train_into(exp, cfg, out, ckpt, progress, command, hydra_record) -> int:
    """The run proper, once everything is built: from here on the folder records it."""
    summary = Summary(out, **provenance(command), T=exp.s.T, code=code_record.of_config(exp.s))
    try:
        lifecycle.begin(exp, cfg, out, ckpt, summary, hydra_record)
        rows = lifecycle.train(exp, out, progress, ckpt, summary)
    except BaseException as e:  # noqa: BLE001 (conclude sorts them out; others re-raise)
        return lifecycle.conclude(exp, cfg, out, summary, e)
    return lifecycle.conclude(exp, cfg, out, summary, None, rows)
