"""A run's life, shared by one run (:mod:`runner`) and seed-batched runs (:mod:`seeds`):
validate a config, build everything from it, decide where the run starts (fresh, resumed,
extended), train T rounds evaluating every ``eval_every`` rounds, and conclude: turn how it
ended into a status, a line and an exit code, and write the run folder (see :mod:`outputs`,
:mod:`checkpoint`)."""

from __future__ import annotations

import math
import os
import sys
import time
import traceback
from contextlib import ExitStack, closing, contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from .. import algorithms, data
from ..algorithms import contract
from ..engine import clients, choice as engine_choice, memory, models
from ..operators import compressors, regularizers
from . import keep, provenance
from ..cluster import loggers
from .checkpoint import FILE as CHECKPOINT
from .checkpoint import Checkpoint, check_fits, check_same_run, counters, restore_counters
from .checkpoint import digest as config_digest
from .checkpoint import digests as config_digests
from .checkpoint import load as load_checkpoint
from .checkpoint import save as save_checkpoint
from ..common.files import atomic_write_text, clear_temps, folder, inside, remove, temp_of
from ..config.schema import RunConfig
from ..config.validate import typed
from ..engine.device import hardware, set_matmul_precision
from .console import say
from ..common.errors import EXIT, UserError, describe, is_overflow, require, squeeze
from .lock import FILE as LOCK
from ..engine.metrics import evaluate
from ..engine.models import FlatModel
from ..engine.oracle import ClientData, Oracle
from .progress import Progress
from ..common.guarded import Unreadable
from .outputs import Summary, is_fedrun_summary, read_summary, write_metrics
from . import signals
from .signals import StopAfterRound


class Diverged(Exception):
    """The objective became NaN or infinite after round ``round``, or a step overflowed the
    run's number type in it (docs/robustness.md, "Divergence")."""

    def __init__(self, message: str, round: int):
        super().__init__(message)
        self.round = round


@contextmanager
def overflow_is_divergence(exp: "Experiment", where: str, round: int):
    """Arithmetic that overflows inside the block -- a finite step too large for the run's
    number type (torch: "value cannot be converted to type float without overflow"), a Python
    :class:`OverflowError` -- is :class:`Diverged` in ``round`` (``where``: ``round 3``, ``the
    evaluation of round 0``)."""
    try:
        yield
    except (RuntimeError, OverflowError) as e:
        if not is_overflow(e):
            raise
        dtype = str(exp.s.torch_dtype).removeprefix("torch.")
        raise Diverged(f"a step overflowed {dtype} in {where} ({squeeze(str(e), 120)})", round) from None


class Interrupted(Exception):
    """Stopped by signal ``signum`` after ``round`` rounds (see :mod:`signals`)."""

    def __init__(self, round: int, signum: int | None = None):
        super().__init__(f"interrupted after round {round}")
        self.round, self.signum = round, signum


@dataclass
class Experiment:
    s: RunConfig
    dataset: data.Dataset
    clients: list[np.ndarray]
    flat: FlatModel
    h: regularizers.Regularizer
    alg: algorithms.Algorithm
    env: algorithms.Env
    stationarity_step: float
    digest: str  # of the config that determines the numbers (checkpoint.digest)
    fingerprint: dict  # of the data and partition it trains on (provenance)

    @property
    def oracle(self) -> Oracle:
        return self.env.oracle


@dataclass
class Validated:
    """The parts of a run that need neither data nor a model, checked."""
    s: RunConfig
    alg: algorithms.Algorithm
    h: regularizers.Regularizer
    comp: compressors.Compressor
    stationarity_step: float


def validate(cfg: DictConfig, reference: DictConfig | None = None) -> Validated:
    """Every check that needs no data (:class:`UserError`), shared by the run and the dry run:
    the config typed (:func:`config.validate.typed`: keys against ``reference``, the same group
    choices without overrides; types and ranges), the sizes against the device's memory
    (:func:`memory.check_sizes`), the algorithm, regularizer and compressor with their
    parameters, and every prox parameter against h."""
    s = typed(cfg, reference)
    s.torch_device  # a CUDA device that is not here is refused now  # noqa: B018
    memory.check_sizes(s, s.model.name, s.model.without("init"), runs=s.seeds)
    alg = algorithms.build(s.algorithm.name, **s.algorithm.params)
    h = regularizers.build(s.regularizer.name, **s.regularizer.params)
    comp = compressors.build(s.compressor.name, **s.compressor.params)
    require(not (alg.smooth_only and not h.is_zero),
            f"algorithm {alg.name} is defined for h = 0 only; use regularizer=none")
    require(comp.is_identity or alg.takes_compressor,
            f"algorithm {alg.name} has no compressed uplink; use compressor=identity")
    subdir = (s.logger or {}).get("subdir")
    if subdir is not None:  # a tracker writes inside the run folder only
        inside("the run folder (logger.subdir)", str(subdir))
    require(s.participation == 1 or alg.partial_participation,
            f"algorithm {alg.name} is defined for full participation only; use participation=1")
    for name, step in contract.prox_steps(alg, s.K, s.T).items():
        h.check_step(step, f"algorithm.{name} (prox parameter of {alg.name})")
    stat_step = s.metrics.stationarity_step
    stat_step = contract.stationarity_step(alg, s.K) if stat_step is None else stat_step
    require(stat_step > 0, f"metrics.stationarity_step must be > 0, got {stat_step}")
    check_stationarity_step(stat_step, s.torch_dtype, natural=s.metrics.stationarity_step is None)
    h.check_step(stat_step, "metrics.stationarity_step")
    return Validated(s, alg, h, comp, stat_step)


def check_stationarity_step(step: float, dtype: torch.dtype, natural: bool = False) -> None:
    """Refuse a stationarity step ``s`` outside [eps, 1/eps] of the run's number type: below,
    ``s * grad f`` vanishes against x in ``x - s grad f`` (the gradient mapping measures
    rounding, or 0/0 = NaN), above, ``x`` vanishes against it. ``natural``: the step is the
    algorithm's own (no ``metrics.stationarity_step`` given), checked from below only: a step
    that large makes the run diverge, which the run reports."""
    eps = torch.finfo(dtype).eps
    if step < eps or (step > 1 / eps and not natural):
        given = f"the algorithm's natural step {step:.3g}" if natural else f"{step:.3g}"
        raise UserError(f"metrics.stationarity_step ({given}) must lie in [{eps:.3g}, {1 / eps:.3g}] for "
                        f"{str(dtype).removeprefix('torch.')} numbers, where the proximal gradient mapping "
                        f"measures the gradient and not rounding; set metrics.stationarity_step in that range")


def build(cfg: DictConfig, reference: DictConfig | None = None, dataset: data.Dataset | None = None,
          runs: int = 1, validated: Validated | None = None, data_fingerprint: dict | None = None) -> Experiment:
    """Validate ``cfg`` (unless ``validated`` is its :func:`validate`) and build the run's
    pieces; every problem is a :class:`UserError`. ``dataset``: the loaded data (default: load
    it); ``runs``: how many runs share one vmap call (:mod:`seeds`): its memory plan covers all
    of them. A run of a seed batch (``seeds`` > 1) computes with the vmap engine, uncompiled,
    also when it is the only one left to run (:data:`checkpoint.BATCHED`).
    ``data_fingerprint``: :func:`provenance.of_data` of ``dataset``, if made already (the
    runs of a batch share the data, which a build moves to the device)."""
    v = validated or validate(cfg, reference)
    s, alg, h, comp = v.s, v.alg, v.h, v.comp
    device, dtype = s.torch_device, s.torch_dtype
    set_matmul_precision(s.matmul_precision)  # process-wide: set by every run
    ds = dataset or data.load_config(s)
    fingerprint = data_fingerprint or provenance.of_data(ds)
    clients = split(s, ds)
    torch.manual_seed(s.seed)
    module = models.build(s.model.name, ds.input_shape, ds.num_classes, **s.model.params).to(device, dtype)
    flat = FlatModel(module)
    cd = ClientData.build(ds.train_x.to(dtype), ds.train_y, clients, device)
    fp = memory.footprint(module, flat.d, ds.input_shape, dtype, device)
    chunk, eval_batch = memory.plan(fp, s.n * runs, s.batch or cd.index.shape[1], s.oracle.chunk,
                                    s.oracle.eval_batch, s.oracle.memory_gb)
    batched = s.seeds > 1  # joined to the other seeds' calls, however many are left to run
    oracle = Oracle(flat, cd, s.batch, s.seed, engine="vmap" if batched else s.engine,
                    chunk=max(1, min(s.n, chunk // runs)) if runs > 1 else chunk, eval_batch=eval_batch,
                    train_samples=s.metrics.train_samples, compile=False if batched else s.compile,
                    client_steps=s.T * s.K * max(1, round(s.participation * s.n)))
    env = algorithms.Env(oracle, h, comp, s.n, s.K, s.T, s.participation, s.seed)
    ds.test_x, ds.test_y = ds.test_x.to(device, dtype), ds.test_y.to(device)
    return Experiment(s, ds, clients, flat, h, alg, env, v.stationarity_step, config_digest(cfg),
                      {**fingerprint, **provenance.of_partition(clients)})


def split(s: RunConfig, ds: data.Dataset) -> list[np.ndarray]:
    """The clients' sample ids: ``ds``'s training set partitioned as ``s`` says."""
    require(s.n <= len(ds.train_y), f"n = {s.n} clients exceeds the {len(ds.train_y)} training "
                                    f"samples of {ds.name}")
    p = s.partition
    return data.partition(p.name, ds.train_y.numpy(), s.n, p.params["seed"], min_size=p.params["min_size"],
                          groups=None if ds.groups is None else ds.groups.numpy(),
                          **p.without("seed", "min_size"))


def _row(exp: Experiment, state: dict, t: int, train_time: float) -> dict:
    x = contract.output(exp.alg, state, exp.flat.d)
    with overflow_is_divergence(exp, f"the evaluation of round {t}", t):
        m = evaluate(x, exp.oracle, exp.h, exp.stationarity_step, exp.dataset.test_x, exp.dataset.test_y)
    env = exp.env
    return {"round": t, "time_s": train_time, "grad_evals": exp.oracle.grad_evals,
            "prox_calls": env.prox_calls, "bytes_up": env.bytes_up, "bytes_down": env.bytes_down, **m}


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _start(exp: Experiment, ckpt: Checkpoint | None) -> Checkpoint:
    """Round 0 (initial state and its metrics row), or the checkpoint to continue from."""
    if ckpt is not None:
        restore_counters(exp.env, ckpt.counters)
        return ckpt
    state = contract.init(exp.alg, exp.flat.flat(), exp.s.n)
    return Checkpoint(0, state, counters(exp.env), 0.0, [_row(exp, state, 0, 0.0)], exp.digest, exp.fingerprint)


class Training:
    """One run's rounds from its start point to T, a round at a time: the metrics rows (written
    to ``metrics.csv`` at every evaluation; with ``metrics.per_client``, also each client's, to
    ``clients.csv``: :mod:`clients`), ``checkpoint.pt`` every ``checkpoint_every``
    rounds, when stopped by a signal and, with ``keep_checkpoint``, after the last round, the
    progress bar or lines (:mod:`progress`) and the ``summary``'s heartbeat (refreshed at each of
    these and at least every minute). :func:`train` runs one; :mod:`seeds` interleaves several."""

    def __init__(self, exp: Experiment, out: Path, progress: bool = True, ckpt: Checkpoint | None = None,
                 summary: Summary | None = None, label: str = ""):
        self.exp, self.out = exp, out
        self.beat = summary.beat if summary is not None else (lambda force=False, **f: None)
        c = _start(exp, ckpt)
        self.t, self.state, self.rows, self.train_time = c.round, c.state, c.rows, c.train_time
        write_metrics(out / "metrics.csv", self.rows)
        self.clients = None
        if exp.s.metrics.per_client:
            self.clients = clients.Log(out, c.round if ckpt is not None else None)
            if ckpt is None:
                self._evaluate_clients(0)
        self._open = ExitStack()
        self.bar = self._open.enter_context(closing(Progress(
            exp.s.T, c.round, bar=progress, every_s=exp.s.progress_every_s, desc=exp.alg.name, label=label)))
        self.tracker = self._open.enter_context(loggers.open(out, c.round, self.rows))

    @property
    def done(self) -> bool:
        return self.t >= self.exp.s.T

    def round(self) -> None:
        """Round t's computation (nothing else: the caller times it)."""
        self.exp.env.start_round(self.t)
        with overflow_is_divergence(self.exp, f"round {self.t + 1}", self.t + 1):
            self.state = contract.round(self.exp.alg, self.state, self.exp.env, self.t)

    def after(self, seconds: float, stop: int | None = None) -> None:
        """Book round t (``seconds`` of training) and go to t + 1: evaluate, write, checkpoint.
        Raises :class:`Diverged`, or :class:`Interrupted` once signal ``stop`` was noted."""
        s, exp = self.exp.s, self.exp
        evaluated = self.evaluates()
        self.t = done = self.t + 1
        self.train_time += seconds
        if evaluated:
            self.rows.append(_row(exp, self.state, done, self.train_time))
            write_metrics(self.out / "metrics.csv", self.rows)
            if self.clients is not None:
                self._evaluate_clients(done)
            self.tracker.log(self.rows[-1])
            self.bar.evaluated(done, self.rows[-1])
            if not (math.isfinite(self.rows[-1]["train_loss"]) and math.isfinite(self.rows[-1]["objective"])):
                raise Diverged(f"objective is {self.rows[-1]['objective']} after round {done}", done)
            self.beat(force=True, round=done)
        else:
            self.beat(round=done)
        self.bar.round_done()
        ce, last = s.checkpoint_every, done == s.T
        if ce and (stop or (done % ce == 0 and not last) or (last and s.keep_checkpoint)):
            save_checkpoint(self.out / CHECKPOINT, Checkpoint(done, self.state, counters(exp.env), self.train_time,
                                                              self.rows, exp.digest, exp.fingerprint))
            self.beat(force=True, round=done)
        if stop:
            raise Interrupted(done, stop)

    def _evaluate_clients(self, t: int) -> None:
        exp = self.exp
        self.clients.add(t, clients.evaluate(exp.oracle, contract.output(exp.alg, self.state, exp.flat.d), exp.dataset.test_x,
                                             exp.dataset.test_y, exp.dataset.num_classes))

    def evaluates(self) -> bool:
        """Whether round t is followed by an evaluation."""
        done = self.t + 1
        return done % self.exp.s.eval_every == 0 or done == self.exp.s.T

    def close(self) -> None:
        self._open.close()


def train(exp: Experiment, out: Path, progress: bool = True, ckpt: Checkpoint | None = None,
          summary: Summary | None = None) -> list[dict]:
    """Run rounds up to T (from ``ckpt`` if given; see :class:`Training`) and return the
    metrics rows. Raises :class:`Diverged` or :class:`Interrupted`."""
    run = Training(exp, out, progress, ckpt, summary)
    with StopAfterRound() as stop, closing(run):
        while not run.done:
            start = time.perf_counter()
            run.round()
            if run.evaluates():  # the evaluation reads the device's results
                sync(exp.s.torch_device)
            run.after(time.perf_counter() - start, stop.signum)
    return run.rows


# ---------------------------------------------------------------------- the run folder


def status_of(out: Path) -> str:
    """A run folder's recorded status (``missing`` without a readable summary)."""
    try:
        return read_summary(out)["status"]
    except (OSError, ValueError, KeyError, TypeError):
        return "missing"


def has_prior_run(out: Path) -> bool:
    """Whether ``out`` holds a run to resume or keep: a checkpoint, or a summary whose status
    is not ``error`` of a start that was not cut short (:func:`cut_short`)."""
    return (out / CHECKPOINT).exists() or (status_of(out) not in ("missing", "error") and not cut_short(out))


def cut_short(out: Path) -> bool:
    """Whether ``out`` holds only the start of a run that ended before it recorded its config
    (killed, stopped): a summary ``running`` or ``interrupted``, no ``config.yaml``, no
    checkpoint. Nothing of it trained, so a run into ``out`` starts it over. (A start refused
    or failed, a full disk's included, says ``error``: no prior run either.)"""
    return (status_of(out) in ("running", "interrupted") and not (out / "config.yaml").exists()
            and not (out / CHECKPOINT).exists())


SCAFFOLD = {".hydra", LOCK, "fedrun.log", "error.log"}  # what fedrun leaves before a run starts
OWN = {*keep.FILES, "error.log"}  # the files fedrun writes atomically in a run folder


def is_scaffold(p: Path) -> bool:
    """Whether ``p`` is one of :data:`SCAFFOLD` as fedrun makes it: ``.hydra`` a real folder,
    the others regular files (a link or a FIFO of that name is someone else's), or the temp
    file of a write of one of :data:`OWN` that a killed fedrun left."""
    if temp_of(p) in OWN:
        return True
    return p.name in SCAFFOLD and not p.is_symlink() and (p.is_dir() if p.name == ".hydra" else p.is_file())


def check_owned(out: Path) -> None:
    """Refuse a folder that is not a file, or holds files of something other than a fedrun
    run (a run folder's ``summary.json`` says it is one; an empty folder is free)."""
    require(not out.exists() or out.is_dir(), f"run folder {out} is a file, not a folder")
    if not out.is_dir():
        return
    try:
        ours = is_fedrun_summary(read_summary(out))
    except Unreadable as e:  # cut short, hand-edited, hostile: nothing to resume or keep
        raise UserError(f"{e}; choose another run folder") from None
    except (OSError, ValueError):
        ours = False
    if ours:
        return
    foreign = sorted(p.name for p in out.iterdir() if not is_scaffold(p))
    require(not foreign, f"run folder {out} holds files that are not a fedrun run "
                         f"({', '.join(foreign[:4])}{', ...' if len(foreign) > 4 else ''}); "
                         f"choose another folder")


def resume_point(cfg: DictConfig, out: Path, s: RunConfig | None = None) -> Checkpoint | None | bool:
    """How to start in ``out`` (rules in :mod:`checkpoint`): the checkpoint to continue from,
    ``None`` to start from round 0, or ``True`` when the folder's run has already finished
    these T rounds. Refusals are :class:`UserError`; nothing is written. ``s``: ``cfg`` typed,
    if it has been."""
    s = s or typed(cfg)
    if not (s.resume and has_prior_run(out)):
        return None
    prior = check_same_run(out, cfg)
    finished = status_of(out) == "finished"
    if finished and prior.get("T") == s.T:  # a checkpoint beside it is an extension's, stopped
        return True
    path = out / CHECKPOINT
    ckpt = load_checkpoint(path, s.torch_device, config_digests(cfg)) if path.exists() else None
    done = ckpt.round if ckpt else (prior["T"] if finished else 0)
    require(done <= s.T, f"T={s.T} is below the {done} rounds the run in {out} has done; "
                         f"T may only be extended (or set resume=false to start over)")
    if ckpt is None:
        say(f"no checkpoint in {out}; starting it over from round 0", "note")
    return ckpt


def end(summary: Summary, status: str, code: int | None = None, **fields) -> None:
    """Record the run's end (exit ``code``, by default the status's); a folder that can no
    longer be written keeps what it had (the lock, released as the process ends, then tells
    readers the run is not alive)."""
    try:
        summary.end(status, exit_code=EXIT[status] if code is None else code, **fields)
    except OSError:
        pass


def internal_error(out: Path, e: BaseException, summary: Summary | None) -> int:
    """A bug: one line on stderr, the traceback in ``out/error.log``, status error, exit 3
    (``FEDRUN_DEBUG=1`` re-raises). An allocation that failed is no bug: status error, exit 2."""
    if memory.exhausted(e):
        message = f"out of memory: {squeeze(str(e), 200)}; reduce n, B, oracle.memory_gb or the model"
        if summary is not None:
            end(summary, "error", error=message)
        say(message, "error")
        return EXIT["error"]
    where = out / "error.log"
    try:
        atomic_write_text(where, traceback.format_exc())
    except OSError:
        where = None
    message = f"internal error: {type(e).__name__}: {squeeze(str(e))}"
    if summary is not None:
        end(summary, "error", EXIT["internal"], error=message)
    say(message + (f"; traceback in {where}" if where else ""))
    if os.environ.get("FEDRUN_DEBUG"):
        raise e
    return EXIT["internal"]


def _write_hydra_record(out: Path, files: dict[str, str] | None) -> None:
    """Hydra's record of the command (``.hydra/``), written only once the run has started."""
    if not files:
        return
    record = folder(out, ".hydra")
    for name, text in files.items():
        atomic_write_text(record / name, text)


def recover(out: Path) -> None:
    """Clear what a killed fedrun left in ``out``, whose lock this process holds: the attempt
    on a finished run undone (:func:`keep.recover`), the temp files of its writes deleted."""
    if keep.recover(out):
        say(f"a killed attempt on the finished run in {out} was undone", "note")
    gone = clear_temps(out)
    if gone:
        say(f"deleted {len(gone)} temp file{'s' if len(gone) > 1 else ''} of writes a killed fedrun "
            f"left in {out} ({', '.join(str(p.relative_to(out)) for p in gone[:3])}"
            f"{', ...' if len(gone) > 3 else ''})", "note")
    if cut_short(out):
        say(f"the run in {out} ended before it recorded its config; starting it over", "note")


def fits(exp: Experiment, out: Path, ckpt: Checkpoint | None) -> None:
    """Refuse to continue the run in ``out`` (resumed, extended) on other data than it trained
    on (:func:`provenance.check`), or from a checkpoint that cannot continue ``exp``
    (:func:`checkpoint.check_fits`)."""
    if exp.s.resume and has_prior_run(out):
        recorded = ckpt.data if ckpt is not None and ckpt.data else _recorded_data(out)
        provenance.check(recorded, exp.fingerprint, out)
    if ckpt is not None:
        check_fits(out / CHECKPOINT, ckpt, contract.init(exp.alg, exp.flat.flat(), exp.s.n), exp.s.T)


def same_data(s: RunConfig, out: Path, dataset: data.Dataset | None = None,
              data_fingerprint: dict | None = None) -> None:
    """Refuse a run that has finished already in ``out`` when the data of ``s`` (``dataset``,
    default: loaded now) differ from those it trained on (:func:`provenance.check`)."""
    recorded = _recorded_data(out)
    if recorded is None:
        return
    ds = dataset or data.load_config(s)
    now = {**(data_fingerprint or provenance.of_data(ds)), **provenance.of_partition(split(s, ds))}
    provenance.check(recorded, now, out)


def _recorded_data(out: Path) -> dict | None:
    """The fingerprint of the data the run in ``out`` trained on, from its summary."""
    try:
        recorded = read_summary(out).get("data")
    except (OSError, ValueError):
        return None
    return recorded if isinstance(recorded, dict) else None


def begin(exp: Experiment, cfg: DictConfig, out: Path, ckpt: Checkpoint | None, summary: Summary,
          hydra_record: dict[str, str] | None) -> None:
    """Record in ``out`` that the run starts (or resumes): summary, ``.hydra/``, config and
    partition; a previous run's leftovers go when starting over."""
    keep.protect(out, status_of(out) == "finished")  # before the first write (see keep.py)
    summary.fields.update(device=str(exp.s.torch_device), hardware=hardware(exp.s.torch_device), dimension=exp.flat.d,
                          engine=exp.oracle.engine_choice, compile=exp.oracle.compile_choice,
                          data_source=exp.dataset.source, data=exp.fingerprint)
    if ckpt is None:
        for name in (CHECKPOINT, "metrics.png", "error.log", clients.FILE, clients.SUMMARY,
                     clients.FIGURE):  # a previous run's
            remove(out / name)
    summary.start(round=ckpt.round if ckpt else 0)
    chosen = engine_choice.line(exp.oracle.engine_choice)
    if chosen:
        say(chosen, "engine", stream=sys.stdout)
    if ckpt is not None:
        say(f"resuming {out} from round {ckpt.round} of {exp.s.T} (checkpoint of "
            f"{checkpoint_time(out / CHECKPOINT)})")
    _write_hydra_record(out, hydra_record)
    atomic_write_text(out / "config.yaml", OmegaConf.to_yaml(cfg, resolve=True))
    data.save_partition(out / "partition.npz", exp.clients)


def conclude(exp: Experiment, cfg: DictConfig, out: Path, summary: Summary, error: BaseException | None,
             rows: list[dict] | None = None) -> int:
    """Record how the run in ``out`` ended -- ``error`` None: finished with these metrics
    ``rows`` (and its ``metrics.png`` is drawn); otherwise what stopped it -- say so in one line
    and return the exit code. An attempt on a finished run that did not finish puts the
    finished run's files back (:mod:`keep`)."""
    code = _conclude(exp, cfg, out, summary, error, rows)
    if keep.settle(out, code == EXIT["finished"]):
        say(f"the finished run in {out} is kept as it was (metrics, plot, summary, config)", "note")
    return code


def _conclude(exp, cfg, out, summary, error, rows) -> int:
    try:
        if error is not None:
            raise error
        _plot(cfg, out)
    except (UserError, OSError) as e:
        end(summary, "error", error=describe(e))
        say(describe(e), "error")
        say_closing(out, "error")
        return EXIT["error"]
    except Diverged as e:
        kept = (out / "metrics.csv").exists()  # not when round 0's evaluation overflowed
        try:
            if kept:
                _plot(cfg, out)
        except Exception as p:  # the record of the divergence matters more than its figure
            say(f"no metrics.png for the diverged run ({type(p).__name__}: {squeeze(str(p))})", "note")
        end(summary, "diverged", error=str(e), round=e.round)
        say(f"{e}" + (f" (rows so far kept in {out / 'metrics.csv'})" if kept else ""), "diverged")
        say_closing(out, "diverged")
        return EXIT["diverged"]
    except (Interrupted, KeyboardInterrupt) as e:
        after = {"round": e.round} if isinstance(e, Interrupted) else {}
        signum = e.signum if isinstance(e, Interrupted) else (signals.received or [None])[-1]
        by = signals.name(signum) if signum else None
        end(summary, "interrupted", **after, **({"error": f"stopped by {by}"} if by else {}))
        say(f"interrupted{f' after round {e.round}' if after else ''}; "
            + ("re-run the same command to resume" if (out / CHECKPOINT).exists()
               else f"partial results in {out}") + (f" (stopped by {by})" if by else ""))
        say_closing(out, "interrupted")
        return EXIT["interrupted"]
    except Exception as e:  # a bug
        return internal_error(out, e, summary)
    end(summary, "finished", final=rows[-1], round=exp.s.T)
    if not exp.s.keep_checkpoint:  # n x d numbers per state tensor: ~1 GB for ResNet-18, n = 10
        remove(out / CHECKPOINT)
    say_closing(out, "finished")
    return EXIT["finished"]


def checkpoint_time(path: Path) -> str:
    """When the checkpoint at ``path`` was written (local time, from the file's mtime)."""
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(path.stat().st_mtime))
    except OSError:
        return "unknown time"


def say_closing(out: Path, status: str) -> None:
    """The run's closing summary line (stdout and the run's log; :func:`jobtable.closing_line`)."""
    from ..cli.jobtable import closing_line
    say(closing_line(out, status), "summary", stream=sys.stdout)


def _plot(cfg: DictConfig, out: Path) -> None:
    """``metrics.png`` (and ``clients.png`` with per-client metrics) of a finished or diverged
    run (matplotlib loads only here)."""
    from ..analysis.plotting import plot_clients, plot_run, run_title
    plot_run(out / "metrics.csv", out / "metrics.png", title=run_title(cfg))
    if (out / clients.SUMMARY).exists():
        plot_clients(out / clients.SUMMARY, out / clients.FIGURE)
