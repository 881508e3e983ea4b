"""The training loop, shared by one run and seed-batched runs: T rounds from the run's start
point, evaluated as :mod:`config.schedule` says (round 0, every ``eval_every`` rounds, T), the
metrics rows written as they come, a checkpoint every ``checkpoint_every`` rounds; a run that
diverges raises :class:`Diverged`, one stopped by a signal :class:`Interrupted`."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import ExitStack, closing, contextmanager
from pathlib import Path

import torch

from ..algorithms import State, contract
from ..common import metric_table as mt
from ..common import run_files
from ..common.errors import is_overflow, squeeze
from ..config import schedule
from ..engine import clients
from ..engine.metrics import evaluate
from . import checkpoint, client_log, trackers
from .experiment import Experiment
from .outputs import Summary
from .progress import Progress


class Diverged(Exception):
    """The objective became NaN or infinite after round ``round``, or a step overflowed the
    run's number type in it (docs/robustness.md, "Divergence")."""

    def __init__(self, message: str, round: int):
        super().__init__(message)
        self.round = round


class Interrupted(Exception):
    """Stopped by signal ``signum`` after ``round`` rounds (see :mod:`signals`)."""

    def __init__(self, round: int, signum: int | None = None):
        super().__init__(f"interrupted after round {round}")
        self.round, self.signum = round, signum


@contextmanager
def overflow_is_divergence(exp: Experiment, where: str, round: int) -> Iterator[None]:
    """Arithmetic that overflows inside the block -- a finite step too large for the run's
    number type (torch: "value cannot be converted to type float without overflow"), a Python
    :class:`OverflowError` -- is :class:`Diverged` in ``round`` (``where``: ``round 3``, ``the
    evaluation of round 0``)."""
    try:
        yield
    except (RuntimeError, OverflowError) as e:
        if not is_overflow(e):
            raise
        dtype = str(exp.cfg.torch_dtype).removeprefix("torch.")
        raise Diverged(
            f"a step overflowed {dtype} in {where} ({squeeze(str(e), 120)})", round
        ) from None


def _row(exp: Experiment, state: State, t: int, train_time: float) -> dict[str, float]:
    """The metrics row of round ``t``: the model's metrics (:func:`metrics.evaluate`) and the
    counters (gradient evaluations, prox calls, bytes)."""
    x = contract.output(exp.alg, state, exp.flat.d)
    with overflow_is_divergence(exp, f"the evaluation of round {t}", t):
        m = evaluate(
            x,
            exp.oracle,
            exp.h,
            exp.stationarity_step,
            exp.dataset.test_x,
            exp.dataset.test_y,
            exp.metrics,
        )
    return {
        mt.ROUND.name: t,
        mt.TIME.name: train_time,
        **checkpoint.counters(exp.env),
        **m,
    }


def sync(device: torch.device) -> None:
    """Wait for ``device``'s queued work (CUDA runs asynchronously)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _start(exp: Experiment, ckpt: checkpoint.Checkpoint | None) -> checkpoint.Checkpoint:
    """Round 0 (initial state and its metrics row), or the checkpoint to continue from."""
    if ckpt is not None:
        checkpoint.restore_counters(exp.env, ckpt.counters)
        return ckpt
    state = contract.init(exp.alg, exp.flat.flat(), exp.cfg.n)
    first = schedule.evaluates(0, exp.cfg.T, exp.cfg.eval_every)
    return checkpoint.Checkpoint(
        0,
        state,
        checkpoint.counters(exp.env),
        0.0,
        [_row(exp, state, 0, 0.0)] if first else [],
        exp.digest,
        exp.fingerprint,
        exp.numerics,
    )


class Training:
    """One run's rounds from its start point to T, a round at a time: the metrics rows (written
    to ``metrics.csv`` at every evaluation; with ``metrics.per_client``, also each client's, to
    ``clients.csv``: :mod:`clients`), ``checkpoint.pt`` every ``checkpoint_every``
    rounds, when stopped by a signal and, with ``keep_checkpoint``, after the last round, the
    progress bar or lines (:mod:`progress`) and the ``summary``'s heartbeat (refreshed at each of
    these and at least every minute; at an evaluation with the latest progress line, which a
    sweep's launching process prints: :mod:`fedprox_cli.cli.watch`). :mod:`lives` runs one
    alone, or a seed batch's in lockstep."""

    def __init__(
        self,
        exp: Experiment,
        out: Path,
        progress: bool = True,
        ckpt: checkpoint.Checkpoint | None = None,
        summary: Summary | None = None,
        label: str = "",
    ):
        self.exp, self.out = exp, out
        self.beat = summary.beat if summary is not None else (lambda force=False, **f: None)
        c = _start(exp, ckpt)
        self.t, self.state, self.rows, self.train_time = c.round, c.state, c.rows, c.train_time
        if self.rows:
            run_files.write_metrics(out, self.rows)
        self.clients = None
        if exp.cfg.metrics.per_client:
            self.clients = client_log.Log(out, c.round if ckpt is not None else None)
            if ckpt is None and self.rows:
                self._evaluate_clients(0)
        self._open = ExitStack()
        self.bar = self._open.enter_context(
            closing(
                Progress(
                    exp.cfg.T,
                    c.round,
                    bar=progress,
                    every_s=exp.cfg.progress_every_s,
                    desc=exp.alg.name,
                    label=label,
                )
            )
        )
        self.tracker = self._open.enter_context(trackers.open(out, c.round, self.rows))

    @property
    def done(self) -> bool:
        return self.t >= self.exp.cfg.T

    def round(self) -> None:
        """Round t's computation (nothing else: the caller times it)."""
        self.exp.env.start_round(self.t)
        with overflow_is_divergence(self.exp, f"round {self.t + 1}", self.t + 1):
            self.state = contract.round(self.exp.alg, self.state, self.exp.env, self.t)

    def after(self, seconds: float, stop: int | None = None) -> None:
        """Book round t (``seconds`` of training) and go to t + 1: evaluate, write, checkpoint.
        Raises :class:`Diverged`, or :class:`Interrupted` once signal ``stop`` was noted."""
        cfg, exp = self.exp.cfg, self.exp
        evaluated = self.evaluates()
        self.t = done = self.t + 1
        self.train_time += seconds
        if evaluated:
            self.rows.append(_row(exp, self.state, done, self.train_time))
            run_files.write_metrics(self.out, self.rows)
            if self.clients is not None:
                self._evaluate_clients(done)
            self.tracker.log(self.rows[-1])
            last_row = self.rows[-1]
            if not all(math.isfinite(last_row[c]) for c in mt.LOSSES):
                # before a progress line: the run's one line is the divergence's
                raise Diverged(
                    f"{mt.OBJECTIVE.name} is {last_row[mt.OBJECTIVE.name]} after round {done}",
                    done,
                )
            self.bar.evaluated(done, self.rows[-1])
            self.beat(force=True, round=done, progress=self.bar.latest)
        else:
            self.beat(round=done)
        self.bar.round_done()
        ce, last = cfg.checkpoint_every, done == cfg.T
        if ce and (stop or (done % ce == 0 and not last) or (last and cfg.keep_checkpoint)):
            checkpoint.save(
                self.out / run_files.CHECKPOINT,
                checkpoint.Checkpoint(
                    done,
                    self.state,
                    checkpoint.counters(exp.env),
                    self.train_time,
                    self.rows,
                    exp.digest,
                    exp.fingerprint,
                    exp.numerics,
                ),
            )
            self.beat(force=True, round=done)
        if stop:
            raise Interrupted(done, stop)

    def _evaluate_clients(self, t: int) -> None:
        exp = self.exp
        assert self.clients is not None  # called with metrics.per_client only
        x = contract.output(exp.alg, self.state, exp.flat.d)
        self.clients.add(
            t,
            clients.evaluate(
                exp.oracle, x, exp.dataset.test_x, exp.dataset.test_y, exp.dataset.num_classes
            ),
        )

    def evaluates(self) -> bool:
        """Whether round t is followed by an evaluation."""
        return schedule.evaluates(self.t + 1, self.exp.cfg.T, self.exp.cfg.eval_every)

    def close(self) -> None:
        self._open.close()
