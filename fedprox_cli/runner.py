"""One run: build everything from a config (validating it all first), train T rounds,
evaluate every ``eval_every`` rounds, and write the run folder (see :mod:`outputs`); continue
a stopped run from its checkpoint (see :mod:`checkpoint`)."""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

from . import algorithms, compressors, data, memory, models, regularizers
from .checkpoint import FILE as CHECKPOINT
from .checkpoint import Checkpoint, check_same_run, counters, restore_counters
from .checkpoint import load as load_checkpoint
from .checkpoint import save as save_checkpoint
from .config import RunSettings, params, settings
from .errors import UserError, describe, require
from .metrics import evaluate
from .models import FlatModel
from .oracle import ClientData, Oracle
from .outputs import note_in_summary, read_summary, write_metrics, write_summary
from .signals import StopAfterRound


class Diverged(Exception):
    """The objective became NaN or infinite."""


class Interrupted(Exception):
    """Stopped by a signal after ``round`` rounds (see :mod:`signals`)."""

    def __init__(self, round: int):
        super().__init__(f"interrupted after round {round}")
        self.round = round


@dataclass
class Experiment:
    s: RunSettings
    dataset: data.Dataset
    clients: list[np.ndarray]
    flat: FlatModel
    h: regularizers.Regularizer
    alg: algorithms.Algorithm
    env: algorithms.Env
    stationarity_step: float

    @property
    def oracle(self) -> Oracle:
        return self.env.oracle


def build(cfg: DictConfig) -> Experiment:
    """Validate ``cfg`` and build the run's pieces; every problem is a :class:`UserError`."""
    s = settings(cfg)
    alg = algorithms.build(cfg.algorithm.name, **params(cfg.algorithm))
    h = regularizers.build(cfg.regularizer.name, **params(cfg.regularizer))
    comp = compressors.build(cfg.compressor.name, **params(cfg.compressor))
    require(not (alg.smooth_only and not h.is_zero),
            f"algorithm {alg.name} is defined for h = 0 only; use regularizer=none")
    require(comp.is_identity or alg.takes_compressor,
            f"algorithm {alg.name} has no compressed uplink; use compressor=identity")
    require(s.participation == 1 or alg.partial_participation,
            f"algorithm {alg.name} is defined for full participation only; use participation=1")
    for name, step in alg.prox_steps(s.K, s.T).items():
        h.check_step(step, f"algorithm.{name} (prox parameter of {alg.name})")
    stat_step = cfg.metrics.stationarity_step or alg.stationarity_step(s.K)
    require(stat_step > 0, f"metrics.stationarity_step must be > 0, got {stat_step}")
    h.check_step(stat_step, "metrics.stationarity_step")

    ds = data.load(cfg.dataset.name, cfg.data.root)
    require(s.n <= len(ds.train_y), f"n = {s.n} clients exceeds the {len(ds.train_y)} training "
                                    f"samples of {ds.name}")
    part = params(cfg.partition, drop=("name", "seed", "min_size"))
    clients = data.partition(cfg.partition.name, ds.train_y.numpy(), s.n, cfg.partition.seed,
                             min_size=cfg.partition.min_size,
                             groups=None if ds.groups is None else ds.groups.numpy(), **part)
    torch.manual_seed(s.seed)
    module = models.build(cfg.model.name, ds.input_shape, ds.num_classes,
                          **params(cfg.model)).to(s.device, s.dtype)
    flat = FlatModel(module)
    cd = ClientData.build(ds.train_x.to(s.dtype), ds.train_y, clients, s.device)
    fp = memory.footprint(module, flat.d, ds.input_shape, s.dtype, s.device)
    chunk, eval_batch = memory.plan(fp, s.n, s.B or cd.index.shape[1], cfg.oracle.chunk,
                                    cfg.oracle.eval_batch, cfg.oracle.memory_gb)
    oracle = Oracle(flat, cd, s.B, s.seed, engine=s.engine, chunk=chunk, eval_batch=eval_batch,
                    train_samples=s.train_samples)
    env = algorithms.Env(oracle, h, comp, s.n, s.K, s.T, s.participation, s.seed)
    ds.test_x, ds.test_y = ds.test_x.to(s.device, s.dtype), ds.test_y.to(s.device)
    return Experiment(s, ds, clients, flat, h, alg, env, stat_step)


def _row(exp: Experiment, state: dict, t: int, train_time: float) -> dict:
    x = exp.alg.output(state)
    m = evaluate(x, exp.oracle, exp.h, exp.stationarity_step, exp.dataset.test_x, exp.dataset.test_y)
    env = exp.env
    return {"round": t, "time_s": train_time, "grad_evals": exp.oracle.grad_evals,
            "prox_calls": env.prox_calls, "bytes_up": env.bytes_up, "bytes_down": env.bytes_down, **m}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _start(exp: Experiment, ckpt: Checkpoint | None) -> Checkpoint:
    """Round 0 (initial state and its metrics row), or the checkpoint to continue from."""
    if ckpt is not None:
        restore_counters(exp.env, ckpt.counters)
        return ckpt
    state = exp.alg.init(exp.flat.flat(), exp.s.n)
    return Checkpoint(0, state, counters(exp.env), 0.0, [_row(exp, state, 0, 0.0)])


def train(exp: Experiment, out: Path, progress: bool = True, ckpt: Checkpoint | None = None) -> list[dict]:
    """Run rounds up to T (from ``ckpt`` if given), writing ``metrics.csv`` at every evaluation
    and ``checkpoint.pt`` every ``checkpoint_every`` rounds, when stopped by a signal and, with
    ``keep_checkpoint``, after the last round. Raises :class:`Diverged` or :class:`Interrupted`."""
    s, alg, env = exp.s, exp.alg, exp.env
    c = _start(exp, ckpt)
    state, rows, train_time = c.state, c.rows, c.train_time
    write_metrics(out / "metrics.csv", rows)
    bar = tqdm(range(c.round, s.T), desc=alg.name, disable=not progress, dynamic_ncols=True,
               initial=c.round, total=s.T)
    with StopAfterRound() as stop:
        for t in bar:
            start = time.perf_counter()
            env.start_round(t)
            state = alg.round(state, env, t)
            done = t + 1
            if done % s.eval_every == 0 or done == s.T:
                _sync(s.device)
                train_time += time.perf_counter() - start
                rows.append(_row(exp, state, done, train_time))
                write_metrics(out / "metrics.csv", rows)
                bar.set_postfix(loss=f"{rows[-1]['train_loss']:.4f}", acc=f"{rows[-1]['test_acc']:.3f}")
                if not (math.isfinite(rows[-1]["train_loss"]) and math.isfinite(rows[-1]["objective"])):
                    raise Diverged(f"objective is {rows[-1]['objective']} after round {done}")
            else:
                train_time += time.perf_counter() - start
            ce = s.checkpoint_every
            last = done == s.T
            if ce and (stop.requested or (done % ce == 0 and not last) or (last and s.keep_checkpoint)):
                save_checkpoint(out / CHECKPOINT,
                                Checkpoint(done, state, counters(env), train_time, rows))
            if stop.requested:
                raise Interrupted(done)
    return rows


def status_of(out: Path) -> str:
    """A run folder's status from its summary (``missing`` if it has none)."""
    try:
        return read_summary(out)["status"]
    except (OSError, ValueError, KeyError):
        return "missing"


def has_prior_run(out: Path) -> bool:
    """Whether ``out`` holds a run to resume or keep: a checkpoint, or a summary whose status
    is not ``error``."""
    return (out / CHECKPOINT).exists() or status_of(out) not in ("missing", "error")


def _resume_point(cfg: DictConfig, out: Path) -> Checkpoint | None | bool:
    """How to start in ``out`` (rules in :mod:`checkpoint`): the checkpoint to continue from,
    ``None`` to start from round 0, or ``True`` when the folder's run has already finished
    these T rounds. Refusals are :class:`UserError`."""
    s = settings(cfg)
    if not (s.resume and has_prior_run(out)):
        return None
    prior = check_same_run(out, cfg)
    path = out / CHECKPOINT
    ckpt = load_checkpoint(path, s.device) if path.exists() else None
    finished = status_of(out) == "finished"
    done = ckpt.round if ckpt else (prior["T"] if finished else 0)
    require(done <= s.T, f"T={s.T} is below the {done} rounds the run in {out} has done; "
                         f"T may only be extended (or set resume=false to start over)")
    if finished and done == s.T:
        return True
    if ckpt is None:
        print(f"fedrun: no checkpoint in {out}; starting it over from round 0", file=sys.stderr)
    return ckpt


def _refuse(out: Path, message: str) -> int:
    """Report a problem found before the run started. A prior run in ``out`` is kept as it
    was (its summary only notes the refusal); otherwise the summary says ``error``."""
    print(f"fedrun: error: {message}", file=sys.stderr)
    try:
        if has_prior_run(out) and (out / "summary.json").exists():
            note_in_summary(out / "summary.json", refused=message)
        elif out.is_dir():
            write_summary(out / "summary.json", "error", error=message)
    except OSError:
        pass  # an unwritable folder: the line above is all there is
    return 2


def run(cfg: DictConfig, out: Path, progress: bool = True) -> int:
    """Run ``cfg`` into folder ``out`` -- continuing the run already there when it is the same
    (see :mod:`checkpoint`) -- and return the exit code (0 finished, 1 diverged, 2 bad input,
    130 interrupted). Errors are one line on stderr."""
    summary = out / "summary.json"
    try:
        out.mkdir(parents=True, exist_ok=True)
        ckpt = _resume_point(cfg, out)
    except (UserError, OSError) as e:
        return _refuse(out, describe(e))
    if ckpt is True:
        print(f"fedrun: the run in {out} has already finished its {cfg.T} rounds; nothing to do")
        return 0
    try:
        if ckpt is None:
            for name in (CHECKPOINT, "metrics.png"):  # a previous run's, not overwritten below
                (out / name).unlink(missing_ok=True)
        write_summary(summary, "running")
        (out / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
        exp = build(cfg)
        data.save_partition(out / "partition.npz", exp.clients)
        rows = train(exp, out, progress, ckpt)
        from .plotting import plot_run  # matplotlib loads only for runs that get this far
        plot_run(out / "metrics.csv", out / "metrics.png",
                 title=f"{exp.alg.name} on {exp.dataset.name}, n={exp.s.n}, K={exp.s.K}")
    except (UserError, OSError) as e:
        write_summary(summary, "error", error=describe(e))
        print(f"fedrun: error: {describe(e)}", file=sys.stderr)
        return 2
    except Diverged as e:
        write_summary(summary, "diverged", error=str(e))
        print(f"fedrun: diverged: {e} (rows so far kept in {out / 'metrics.csv'})", file=sys.stderr)
        return 1
    except (Interrupted, KeyboardInterrupt) as e:
        after = {"round": e.round} if isinstance(e, Interrupted) else {}
        write_summary(summary, "interrupted", **after)
        print(f"fedrun: interrupted{f' after round {e.round}' if after else ''}; "
              + ("re-run the same command to resume" if (out / CHECKPOINT).exists()
                 else f"partial results in {out}"), file=sys.stderr)
        return 130
    write_summary(summary, "finished", final=rows[-1], device=str(exp.s.device),
                  dimension=exp.flat.d, rounds=exp.s.T)
    if not exp.s.keep_checkpoint:  # n x d numbers per state tensor: ~1 GB for ResNet-18, n = 10
        (out / CHECKPOINT).unlink(missing_ok=True)
    return 0
