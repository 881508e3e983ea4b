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
and its runs joined for their rounds in lockstep (:func:`join`; trained by :mod:`lives`).
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

from omegaconf import OmegaConf

from ..common import run_files
from ..common.errors import require
from ..config.forms import Composed
from ..config.schema import RunConfig
from ..engine.lockstep import Lockstep
from . import run_folder
from .experiment import Experiment


def folders(cfg: RunConfig, out: Path) -> list[Path]:
    """The run folder of each of the ``seeds`` runs of ``cfg`` in ``out``, seed by seed."""
    return [Path(out) / run_files.seed_folder(s) for s in range(cfg.seed, cfg.seed + cfg.seeds)]


def with_seed(composed: Composed, seed: int) -> Composed:
    """``composed`` with ``seed`` (keys that follow ``${seed}``, e.g. partition.seed, follow it)."""
    one = OmegaConf.create(OmegaConf.to_container(composed, resolve=False))
    one.seed = seed
    return cast(Composed, one)


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


def join(exps: list[Experiment]) -> Lockstep:
    """The batch's runs ``exps`` joined (:class:`Lockstep`): every local step of all their
    clients one vmap call, uncompiled, which each run's oracle records as its engine and compile
    choice."""
    R = exps[0].cfg.seeds
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
    return lockstep
