"""Seed-batched runs: ``seeds=R`` runs seeds s, s+1, ..., s+R-1 of one config in one process.

Each run is built as on its own (its own partition, initial model, mini-batch and compressor
streams; the data is loaded once and shared) and writes its own run folder ``RUN/seed_<s>``,
which holds what ``fedrun seed=<s> engine=vmap`` would write: the same metrics (to float
rounding; bitwise where the joined products compute each row as on its own), config (with
``seeds: R``, a run-control key) and summary. The rounds of the R runs are made in lockstep,
one coroutine per run, and every local gradient step of all R x n clients is one vmap call
(:mod:`lockstep`): the algorithms run unchanged, each on its own state. Evaluations, prox
steps and the server's updates stay per run. ``time_s`` of a run is the wall time of the
joined rounds, which all R runs share.

A folder of the R runs is resumed, extended or re-run like one run; runs that already
finished are left alone; a run that diverges or fails ends with its own status while the
others go on. The exit code is the worst of the runs'.
"""

from __future__ import annotations

import sys
import time
from contextlib import ExitStack
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from .. import data
from ..common import run_files
from ..common.console import logging_to, say
from ..common.errors import EXIT, UserError, describe, require
from ..common.signals import StopAfterRound
from ..config.schema import RunConfig
from ..config.validate import typed
from ..engine.lockstep import Lockstep
from . import code_record, ending, experiment, numerics, run_folder, training
from .lock import RunLock
from .outputs import Summary, provenance
from .provenance import of_data


def folders(cfg: DictConfig | RunConfig, out: Path) -> list[tuple[int, Path]]:
    """(seed, run folder) of each of the ``seeds`` runs of ``cfg`` (composed or typed) in ``out``."""
    first, out = cfg.seed, Path(out)
    return [(s, out / run_files.seed_folder(s)) for s in range(first, first + cfg.seeds)]


def with_seed(composed: DictConfig, seed: int) -> DictConfig:
    """``composed`` with ``seed`` (keys that follow ``${seed}``, e.g. partition.seed, follow it)."""
    one = OmegaConf.create(OmegaConf.to_container(composed, resolve=False))
    one.seed = seed
    return one


def check_container(out: Path) -> None:
    """``out`` holds the runs' folders only (and fedrun's own files)."""
    require(not out.exists() or out.is_dir(), f"run folder {out} is a file, not a folder")
    if out.is_dir():
        other = sorted(
            p.name
            for p in out.iterdir()
            if not run_folder.is_scaffold(p)
            and not (p.is_dir() and not p.is_symlink() and p.name.startswith(run_files.SEED_PREFIX))
        )
        require(
            not other,
            f"{out} holds files that are not seed-batched runs ({', '.join(other[:4])}); "
            f"seeds=R writes its runs into {out}/{run_files.SEED_PREFIX}<seed>/; choose another folder",
        )


def run(
    composed: DictConfig,
    out: Path,
    progress: bool = True,
    command: str = "fedrun",
    hydra_record: dict[str, str] | None = None,
    reference: DictConfig | None = None,
    plot: ending.Plot | None = None,
) -> int:
    """Run the ``seeds`` runs of ``composed`` into ``out/seed_<s>`` (see the module docstring)
    and return the worst exit code. Nothing is written before every run is validated and built.
    ``plot``: as :func:`runner.run`'s."""
    out = Path(out)
    with ExitStack() as held:
        try:
            cfg = experiment.validate(composed, reference).cfg
            runs = folders(cfg, out)
            check_container(out)
            for _, folder in runs:
                run_folder.check_owned(folder)
            out.mkdir(parents=True, exist_ok=True)
            for _, folder in runs:
                folder.mkdir(exist_ok=True)
                held.enter_context(RunLock(folder))
        except (UserError, OSError) as e:
            say(describe(e), "error")
            return EXIT["error"]
        with logging_to(out):
            return _run_locked(composed, cfg, runs, progress, command, hydra_record, plot)


def _run_locked(composed, cfg, runs, progress, command, hydra_record, plot) -> int:
    todo, exps, ckpts, composeds, finished = [], [], [], [], []
    try:
        for seed, folder in runs:
            run_folder.recover(folder)
            one = with_seed(composed, seed)
            ckpt = run_folder.resume_point(one, folder)
            if ckpt is True:
                finished.append((one, folder))
                continue
            todo.append(folder), composeds.append(one), ckpts.append(ckpt)
        numerics.resume_with(
            next((c.numerics for c in ckpts if c), None), cfg, runs[0][1].parent
        )  # threads
        dataset = data.load_config(cfg)  # once for all runs, fingerprinted before a build moves it
        fingerprint = of_data(dataset)
        for one, folder in finished:
            run_folder.same_data(typed(one), folder, dataset, fingerprint)
            why = code_record.stale(folder, cfg)
            say(
                code_record.stale_line(folder, why)
                if why
                else f"the run in {folder} has already finished its {composed.T} rounds; nothing to do",
                stream=sys.stdout,
            )
        for one, folder, ckpt in zip(composeds, todo, ckpts):
            exps.append(
                experiment.build(one, dataset=dataset, runs=len(todo), data_fingerprint=fingerprint)
            )
            run_folder.fits(exps[-1], folder, ckpt)
    except (UserError, OSError) as e:
        say(describe(e), "error")
        return EXIT["error"]
    except KeyboardInterrupt:
        say("interrupted before the runs started")
        return EXIT["interrupted"]
    except Exception as e:  # a bug
        return ending.internal_error(runs[0][1], e, None)
    if not todo:
        return EXIT["finished"]
    lockstep = Lockstep(max_rows=max(e.oracle.chunk for e in exps) * len(exps))
    for exp in exps:
        exp.oracle.join(lockstep)
        exp.oracle.engine_choice = {
            "engine": "vmap",
            "source": f"seeds={cfg.seeds}: the clients of "
            f"{len(exps)} run{'s' if len(exps) > 1 else ''} in one vmap call",
        }
        exp.oracle.compile_choice = {
            "compiled": False,
            "source": f"seeds={cfg.seeds}: the joined call is not compiled",
        }
    return _train(composeds, exps, todo, ckpts, lockstep, progress, command, hydra_record, plot)


def _train(composeds, exps, outs, ckpts, lockstep, progress, command, hydra_record, plot) -> int:
    """The rounds of all runs in lockstep; each run's folder records its own end."""
    codes, live = [], {}
    summaries = [
        Summary(f, **provenance(command), T=e.cfg.T, code=code_record.of_config(e.cfg))
        for f, e in zip(outs, exps)
    ]

    def end(r: int, error: BaseException | None) -> None:
        run = live.pop(r, None)
        if run is not None:
            run.close()
        codes.append(
            ending.conclude(
                exps[r],
                composeds[r],
                outs[r],
                summaries[r],
                error,
                run.rows if run is not None else None,
                plot,
            )
        )

    for r, exp in enumerate(exps):
        try:
            run_folder.begin(exp, composeds[r], outs[r], ckpts[r], summaries[r], hydra_record)
            live[r] = training.Training(
                exp,
                outs[r],
                progress=False,
                ckpt=ckpts[r],
                summary=summaries[r],
                label=f"seed {composeds[r].seed}: ",
            )
            if live[r].done:
                end(r, None)
        except KeyboardInterrupt as e:  # a signal before training: every run stops (those not
            end(r, e)  # begun are left as they were)
            for q in list(live):
                end(q, e)
            return max(codes + [EXIT["interrupted"]])
        except BaseException as e:  # noqa: BLE001
            end(r, e)

    with StopAfterRound() as stop:
        try:
            while live:
                start = time.perf_counter()
                failed = lockstep.rounds({r: run.round for r, run in live.items()})
                training.sync(exps[0].cfg.torch_device)
                seconds = time.perf_counter() - start
                for r in list(live):
                    try:
                        if r in failed:
                            raise failed[r]
                        live[r].after(seconds, stop.signum)
                        if live[r].done:
                            end(r, None)
                    except KeyboardInterrupt:
                        raise
                    except BaseException as e:  # noqa: BLE001
                        end(r, e)
        except KeyboardInterrupt as e:  # a second signal: stop every run at once
            for r in list(live):
                end(r, e)
    return max(codes)
