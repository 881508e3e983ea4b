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

A folder of the R runs is resumed, extended or re-run like one run (their life is one run's,
:mod:`runner`); runs that already finished are left alone; a run that diverges or fails ends
with its own status while the others go on. The exit code is the worst of the runs'. Here: the
batch's folders (:func:`folders`, :func:`check_container`), a seed's config (:func:`with_seed`)
and the rounds of the runs in lockstep (:func:`train`).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import cast

from omegaconf import DictConfig, OmegaConf

from ..common import run_files
from ..common.errors import EXIT, require
from ..common.signals import StopAfterRound
from ..config.schema import RunConfig
from ..engine.lockstep import Lockstep
from . import code_record, ending, run_folder, training
from .outputs import Summary, provenance


def folders(cfg: DictConfig | RunConfig, out: Path) -> list[tuple[int, Path]]:
    """(seed, run folder) of each of the ``seeds`` runs of ``cfg`` (composed or typed) in
    ``out``."""
    first, out = cfg.seed, Path(out)
    return [(s, out / run_files.seed_folder(s)) for s in range(first, first + cfg.seeds)]


def with_seed(composed: DictConfig, seed: int) -> DictConfig:
    """``composed`` with ``seed`` (keys that follow ``${seed}``, e.g. partition.seed, follow it)."""
    one = OmegaConf.create(OmegaConf.to_container(composed, resolve=False))
    one.seed = seed
    return cast(DictConfig, one)


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
            f"seeds=R writes its runs into {out}/{run_files.SEED_PREFIX}<seed>/; choose another "
            f"folder",
        )


def train(starts: list, R: int, command: str, hydra_record: dict[str, str] | None, plot) -> int:
    """The rounds of the batch's runs ``starts`` (:class:`runner.Start`: built, with their
    checkpoints) in lockstep, every local step of all their clients one vmap call; each run's
    folder records its own end; the worst exit code."""
    exps = [st.exp for st in starts]
    lockstep = Lockstep(max_rows=max(e.oracle.chunk for e in exps) * len(exps))
    for exp in exps:
        exp.oracle.join(lockstep)
        exp.oracle.engine_choice = {
            "engine": "vmap",
            "source": f"seeds={R}: the clients of "
            f"{len(exps)} run{'s' if len(exps) > 1 else ''} in one vmap call",
        }
        exp.oracle.compile_choice = {
            "compiled": False,
            "source": f"seeds={R}: the joined call is not compiled",
        }
    outs, ckpts = [st.folder for st in starts], [st.ckpt for st in starts]
    return _rounds(exps, outs, ckpts, lockstep, command, hydra_record, plot)


def _rounds(exps, outs, ckpts, lockstep, command, hydra_record, plot) -> int:
    """The rounds of all runs in lockstep; each run's folder records its own end."""
    codes: list[int] = []
    live: dict[int, training.Training] = {}
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
                outs[r],
                summaries[r],
                error,
                run.rows if run is not None else None,
                plot,
            )
        )

    for r, exp in enumerate(exps):
        try:
            run_folder.begin(exp, outs[r], ckpts[r], summaries[r], hydra_record)
            live[r] = training.Training(
                exp,
                outs[r],
                progress=False,
                ckpt=ckpts[r],
                summary=summaries[r],
                label=f"seed {exp.cfg.seed}: ",
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
