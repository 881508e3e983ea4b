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


def folders(cfg: RunConfig, out: Path) -> list[Path]:
    """The run folder of each of the ``seeds`` runs of ``cfg`` in ``out``, seed by seed."""
    return [Path(out) / run_files.seed_folder(s) for s in range(cfg.seed, cfg.seed + cfg.seeds)]


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
    batch = _Batch(starts, lockstep, command, plot)
    stopped = batch.begin(hydra_record)
    if stopped is not None:
        return stopped
    batch.rounds()
    return max(batch.codes)


class _Batch:
    """The runs of a batch in training: each run's folder records its own end (:meth:`end`),
    its exit code in :attr:`codes`."""

    def __init__(self, starts: list, lockstep: Lockstep, command: str, plot) -> None:
        self.exps = [st.exp for st in starts]
        self.held, self.ckpts = [st.held for st in starts], [st.ckpt for st in starts]
        self.outs = [h.path for h in self.held]
        self.lockstep, self.plot = lockstep, plot
        self.codes: list[int] = []
        self.live: dict[int, training.Training] = {}
        self.summaries = [
            Summary(f, **provenance(command), T=e.cfg.T, code=code_record.of_config(e.cfg))
            for f, e in zip(self.outs, self.exps)
        ]

    def end(self, r: int, error: BaseException | None) -> None:
        """Conclude run ``r`` (``error``: what stopped it; None: finished)."""
        run = self.live.pop(r, None)
        if run is not None:
            run.close()
        rows = run.rows if run is not None else None
        self.codes.append(
            ending.conclude(self.exps[r], self.outs[r], self.summaries[r], error, rows, self.plot)
        )

    def begin(self, hydra_record: dict[str, str] | None) -> int | None:
        """Each run's folder records its start; a signal before training stops every run (those
        not begun are left as they were) and returns the exit code; None: all began."""
        for r, exp in enumerate(self.exps):
            try:
                run_folder.begin(exp, self.held[r], self.ckpts[r], self.summaries[r], hydra_record)
                self.live[r] = training.Training(
                    exp,
                    self.outs[r],
                    progress=False,
                    ckpt=self.ckpts[r],
                    summary=self.summaries[r],
                    label=f"seed {exp.cfg.seed}: ",
                )
                if self.live[r].done:
                    self.end(r, None)
            except KeyboardInterrupt as e:
                self.end(r, e)
                for q in list(self.live):
                    self.end(q, e)
                return max(self.codes + [EXIT["interrupted"]])
            except BaseException as e:  # noqa: BLE001
                self.end(r, e)
        return None

    def rounds(self) -> None:
        """The rounds of the live runs in lockstep until each has ended; a second signal stops
        every run at once."""
        with StopAfterRound() as stop:
            try:
                while self.live:
                    start = time.perf_counter()
                    failed = self.lockstep.rounds({r: run.round for r, run in self.live.items()})
                    training.sync(self.exps[0].cfg.torch_device)
                    self.after(failed, time.perf_counter() - start, stop)
            except KeyboardInterrupt as e:
                for r in list(self.live):
                    self.end(r, e)

    def after(self, failed: dict, seconds: float, stop: StopAfterRound) -> None:
        """Each live run after a joined round of ``seconds``: failed, finished or going on."""
        for r in list(self.live):
            try:
                if r in failed:
                    raise failed[r]
                self.live[r].after(seconds, stop.signum)
                if self.live[r].done:
                    self.end(r, None)
            except KeyboardInterrupt:
                raise
            except BaseException as e:  # noqa: BLE001
                self.end(r, e)
