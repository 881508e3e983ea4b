"""One run: build everything from a config (validating it all first), train T rounds,
evaluate every ``eval_every`` rounds, and write the run folder (see :mod:`outputs`)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

from . import algorithms, compressors, data, models, regularizers
from .config import RunSettings, params, settings
from .errors import UserError, require
from .metrics import evaluate
from .models import FlatModel
from .oracle import ClientData, Oracle
from .outputs import read_summary, write_metrics, write_summary
from .plotting import plot_run


class Diverged(Exception):
    """The objective became NaN or infinite."""


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
    oracle = Oracle(flat, cd, s.B, s.seed, engine=s.engine, chunk=cfg.oracle.chunk,
                    eval_batch=cfg.oracle.eval_batch)
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


def train(exp: Experiment, out: Path, progress: bool = True) -> list[dict]:
    """Run T rounds, writing ``metrics.csv`` at every evaluation. Raises :class:`Diverged`."""
    s, alg, env = exp.s, exp.alg, exp.env
    state = alg.init(exp.flat.flat(), s.n)
    rows = [_row(exp, state, 0, 0.0)]
    write_metrics(out / "metrics.csv", rows)
    train_time = 0.0
    bar = tqdm(range(s.T), desc=alg.name, disable=not progress, dynamic_ncols=True)
    for t in bar:
        start = time.perf_counter()
        env.start_round(t)
        state = alg.round(state, env, t)
        if (t + 1) % s.eval_every == 0 or t + 1 == s.T:
            _sync(s.device)
            train_time += time.perf_counter() - start
            rows.append(_row(exp, state, t + 1, train_time))
            write_metrics(out / "metrics.csv", rows)
            bar.set_postfix(loss=f"{rows[-1]['train_loss']:.4f}", acc=f"{rows[-1]['test_acc']:.3f}")
            if not (math.isfinite(rows[-1]["train_loss"]) and math.isfinite(rows[-1]["objective"])):
                raise Diverged(f"objective is {rows[-1]['objective']} after round {t + 1}")
        else:
            train_time += time.perf_counter() - start
    return rows


def status_of(out: Path) -> str:
    """A run folder's status from its summary (``missing`` if it has none)."""
    try:
        return read_summary(out)["status"]
    except (OSError, ValueError, KeyError):
        return "missing"


def run(cfg: DictConfig, out: Path, progress: bool = True) -> int:
    """Run ``cfg`` into folder ``out``; return the exit code (0 finished, 1 diverged,
    2 bad input, 130 interrupted). Errors are one line on stderr."""
    import sys
    out.mkdir(parents=True, exist_ok=True)
    summary = out / "summary.json"
    write_summary(summary, "running")
    try:
        (out / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
        exp = build(cfg)
        data.save_partition(out / "partition.npz", exp.clients)
        rows = train(exp, out, progress)
    except UserError as e:
        write_summary(summary, "error", error=str(e))
        print(f"fedrun: error: {e}", file=sys.stderr)
        return 2
    except Diverged as e:
        write_summary(summary, "diverged", error=str(e))
        print(f"fedrun: diverged: {e} (rows so far kept in {out / 'metrics.csv'})", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        write_summary(summary, "interrupted")
        print(f"fedrun: interrupted; partial results in {out}", file=sys.stderr)
        return 130
    plot_run(out / "metrics.csv", out / "metrics.png",
             title=f"{exp.alg.name} on {exp.dataset.name}, n={exp.s.n}, K={exp.s.K}")
    write_summary(summary, "finished", final=rows[-1], device=str(exp.s.device),
                  dimension=exp.flat.d, rounds=exp.s.T)
    return 0
