"""Engine benchmark: rounds/s, local steps/s and achieved FLOP/s of the training steps and of
evaluation, against the practical roofline -- the matrix products (and convolutions) of the
same shapes, replayed alone in the same run (docs/performance.md).

Every timing is the best of ``repeats`` measurements taken in turn (engines and the roofline
interleaved, the roofline replayed as often as a round runs its products), so that a machine
shared with other work biases all of them alike; compare the ratios of one run, not absolute
numbers across runs. Single-threaded CPU runs are timed in process CPU time (what the run
would take on a core of its own), everything else in wall time (:func:`clock`). Data are random
tensors of the dataset's
shapes (the dataset is not the point), split i.i.d. over the clients.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from .. import algorithms
from ..common.errors import UserError
from ..config.compose import compose
from ..config.validate import params
from ..engine import models
from ..engine.client_data import ClientData
from ..engine.metrics import evaluate
from ..engine.models import FlatModel
from ..engine.oracle import Oracle
from ..operators import compressors, regularizers
from .roofline import Roofline, count_flops

Row = dict[str, str | float]  # a table row: a workload's name and its timings
# an aten call recorded: the operator, its args and kwargs
SHAPES = {
    "fmnist": ((1, 28, 28), 10, 60000, 10000),
    "mnist": ((1, 28, 28), 10, 60000, 10000),
    "cifar10": ((3, 32, 32), 10, 50000, 10000),
    "digits": ((1, 8, 8), 10, 1437, 360),
    "breast_cancer": ((30,), 2, 455, 114),
}


@dataclass
class Workload:
    name: str
    dataset: str  # a key of SHAPES: the shapes of the random data
    model: str
    n: int
    K: int
    B: int
    algorithms: list[str]
    cuda_only: bool = False
    model_params: dict[str, Any] = field(default_factory=dict)
    regularizer: str = (
        "l1"  # a conf/regularizer option (its defaults); h = 0 for smooth-only methods
    )
    overrides: list[str] = field(
        default_factory=list
    )  # further config overrides, e.g. regularizer.a=1000


WORKLOADS = {
    1: Workload("FedCanon fig2", "fmnist", "mlp", 10, 20, 64, ["fedcanon"]),
    2: Workload("FedCanon table5", "fmnist", "cnn", 10, 40, 64, ["fedcanon", "fedmid"]),
    3: Workload("FedNMap fig2", "mnist", "sigmoid_mlp", 100, 10, 64, ["fednmap"]),
    4: Workload(
        "MobileNetV3 CIFAR-10",
        "cifar10",
        "mobilenetv3_small",
        20,
        10,
        64,
        ["fedcanon"],
        cuda_only=True,
    ),
}


def clock() -> float:
    """CPU time of this process when it runs one CPU thread (robust to other processes on a
    shared machine), else wall time."""
    one_thread = torch.get_num_threads() == 1 and not _cuda_initialized()
    return time.process_time() if one_thread else time.perf_counter()


def best_time(fn: Callable[[], object], repeats: int = 1) -> float:
    """Smallest time (:func:`clock`) of ``repeats`` calls of ``fn`` (device synchronized)."""
    best = math.inf
    for _ in range(repeats):
        _sync()
        start = clock()
        fn()
        _sync()
        best = min(best, clock() - start)
    return best


def _sync() -> None:
    if torch.cuda.is_available() and _cuda_initialized():
        torch.cuda.synchronize()


def _cuda_initialized() -> bool:
    return bool(torch.cuda.is_initialized())  # type: ignore[no-untyped-call]  # torch: untyped


def _algorithm(
    name: str, regularizer: str, overrides: list[str]
) -> tuple[algorithms.Algorithm[Any], regularizers.Regularizer]:
    """An algorithm and a regularizer with their config defaults and ``overrides`` (h = 0 for
    smooth-only methods)."""
    cfg = compose([f"algorithm={name}", f"regularizer={regularizer}", *overrides])
    alg = algorithms.build(name, **params(cfg.algorithm))
    h = (
        regularizers.build("none")
        if alg.smooth_only
        else regularizers.build(regularizer, **params(cfg.regularizer))
    )
    return alg, h


def _available(w: Workload, device: torch.device) -> str | None:
    """Why workload ``w`` cannot run here, or None."""
    if w.cuda_only and device.type != "cuda":
        return "needs CUDA (no GPU here)"
    if w.model not in models.names():
        return f"model '{w.model}' is not in this build"
    missing = [a for a in w.algorithms if a not in algorithms.names()]
    return f"algorithm(s) {', '.join(missing)} not in this build" if missing else None


class Setup:
    """Random data of the workload's shapes, the model, and one oracle per engine."""

    def __init__(self, w: Workload, device: torch.device, seed: int = 0):
        shape, classes, n_train, n_test = SHAPES[w.dataset]
        gen = torch.Generator().manual_seed(seed)
        x = torch.randn(n_train, *shape, generator=gen)
        y = torch.randint(0, classes, (n_train,), generator=gen)
        self.test_x = torch.randn(n_test, *shape, generator=gen).to(device)
        self.test_y = torch.randint(0, classes, (n_test,), generator=gen).to(device)
        clients = np.array_split(np.random.default_rng(seed).permutation(n_train), w.n)
        torch.manual_seed(seed)
        self.flat = FlatModel(models.build(w.model, shape, classes, **w.model_params).to(device))
        self.data = ClientData.build(x, y, clients, device)
        self.w, self.device = w, device

    def oracle(self, engine: str, chunk: int | None = None, alg: str | None = None) -> Oracle:
        """An oracle of ``engine``: loop, vmap or auto, or ``vmap+compile`` (compile=true);
        ``auto`` times rounds of the algorithm ``alg`` (as a run of it does), else of plain
        local SGD."""
        name, plus, extra = engine.partition("+")
        if plus and extra != "compile":
            raise UserError(f"engine {engine!r}: the only suffix is +compile (e.g. vmap+compile)")
        probe = None
        if alg is not None:
            a, h = _algorithm(alg, self.w.regularizer, self.w.overrides)
            probe = algorithms.TimedRound(a, h, compressors.build("identity"), self.w.K, 10**6)
        return Oracle(
            self.flat,
            self.data,
            self.w.B,
            seed=0,
            engine=name,
            chunk=chunk,
            compile=bool(plus),
            probe=probe,
        )

    def client_step(self) -> None:
        """One client's forward + backward on B samples (the unit the FLOPs are counted in)."""
        o = self.oracle("loop")
        o.grad(self.flat.flat()[None], 0, 0, torch.zeros(1, dtype=torch.long, device=self.device))


class RoundTimer:
    """Times ``rounds`` rounds of an algorithm with one oracle (state carried across calls)."""

    def __init__(self, setup: Setup, alg_name: str, oracle: Oracle, rounds: int):
        self.alg, self.h = _algorithm(alg_name, setup.w.regularizer, setup.w.overrides)
        w = setup.w
        self.env = algorithms.Env(oracle, self.h, compressors.build("identity"), w.n, w.K, 10**6)
        self.state = self.alg.init(setup.flat.flat(), w.n)
        self.rounds, self.t = rounds, 0
        self()  # warm-up

    def __call__(self) -> None:
        for _ in range(self.rounds):
            self.env.start_round(self.t)
            self.state = self.alg.round(self.state, self.env, self.t)
            self.t += 1


def bench_workload(
    w: Workload,
    device: torch.device,
    engines: list[str],
    repeats: int,
    rounds: int,
    report: Callable[[Row], object],
    peak: float | None = None,
    step_layout: bool = False,
) -> list[Row]:
    """One row per (algorithm, engine): rounds/s, steps/s, achieved and roofline FLOP/s, the
    fraction of the roofline (the products replayed on contiguous operands), with
    ``step_layout`` of the products replayed on operands of the step's own strides too (timed
    in turn with the rest; off unless asked, so that the default run times what it did), and of the
    device's peak (:func:`peak_flops`), and the compile seconds of a compiled engine."""
    setup = Setup(w, device)
    step_flops = count_flops(setup.client_step)
    layouts = ("contiguous", "step") if step_layout else ("contiguous",)
    roofs = {
        layout: Roofline(setup.client_step, times=w.n * w.K, layout=layout) for layout in layouts
    }
    rows: list[Row] = []
    for alg_name in w.algorithms:
        timers = {
            e: RoundTimer(setup, alg_name, setup.oracle(e, alg=alg_name), rounds) for e in engines
        }
        chosen = timers["auto"].env.oracle.engine.name if "auto" in timers else None
        best = {e: math.inf for e in engines}
        best_roof = dict.fromkeys(roofs, math.inf)
        for _ in range(repeats):  # interleaved, so shared-machine noise hits every engine alike
            for e, timer in timers.items():
                best[e] = min(best[e], best_time(timer) / rounds)
            for layout, roof in roofs.items():
                best_roof[layout] = min(best_roof[layout], best_time(roof.replay))
        rate = {k: roofs[k].flops / best_roof[k] for k in roofs}
        roof_rate = rate["contiguous"]
        for e in engines:
            steps = w.n * w.K / best[e]
            compile_s = timers[e].env.oracle.compile_choice.get("compile_s")
            rows.append(
                {
                    "workload": w.name,
                    "algorithm": alg_name,
                    "engine": e + (f" ({chosen})" if e == "auto" else ""),
                    "rounds/s": 1 / best[e],
                    "steps/s": steps,
                    "GFLOP/s": steps * step_flops / 1e9,
                    "roofline GFLOP/s": roof_rate / 1e9,
                    "of roofline": steps * step_flops / roof_rate,
                    **(
                        {"of step's layout": steps * step_flops / rate["step"]}
                        if step_layout
                        else {}
                    ),
                    "of peak": steps * step_flops / peak if peak else "-",
                    "compile s": compile_s if compile_s is not None else "-",
                }
            )
            report(rows[-1])
    return rows


def bench_eval(
    w: Workload, device: torch.device, repeats: int, report: Callable[[Row], object]
) -> Row:
    """Achieved FLOP/s of one evaluation (exact train loss + gradient for stationarity, test
    pass) at the algorithm's output, and its share of run time at eval_every 1 and 10."""
    setup = Setup(w, device)
    alg_name = w.algorithms[0]
    timer = RoundTimer(setup, alg_name, setup.oracle("auto", alg=alg_name), 1)
    oracle, h = timer.env.oracle, timer.h
    x = timer.alg.output(timer.state)
    step = timer.alg.stationarity_step(w.K)
    run_eval = lambda: evaluate(x, oracle, h, step, setup.test_x, setup.test_y)  # noqa: E731
    flops = count_flops(run_eval)
    t_eval, t_round = math.inf, math.inf
    for _ in range(repeats):
        t_eval = min(t_eval, best_time(run_eval))
        t_round = min(t_round, best_time(timer))
    train_rate = w.n * w.K * count_flops(setup.client_step) / t_round
    row: Row = {
        "workload": w.name,
        "eval s": t_eval,
        "eval GFLOP/s": flops / t_eval / 1e9,
        "train GFLOP/s": train_rate / 1e9,
        "round s": t_round,
        "eval share @1": t_eval / (t_eval + t_round),
        "eval share @10": t_eval / (t_eval + 10 * t_round),
    }
    report(row)
    return row


def fig2_estimate(
    t_round: float, t_eval: float, eval_every: int, runs: int = 12, T: int = 200, parallel: int = 1
) -> float:
    """Minutes for FedCanon fig2's sweep (runs x T rounds, an evaluation every eval_every rounds
    and at round 0), ``parallel`` jobs at a time."""
    evals = T // eval_every + 1 + (T % eval_every != 0)
    return runs * (T * t_round + evals * t_eval) / parallel / 60


def custom_workload(
    model: str,
    algorithms_: list[str],
    dataset: str,
    n: int,
    K: int,
    B: int,
    model_params: dict[str, Any] | None = None,
    regularizer: str = "l1",
    overrides: list[str] | None = None,
) -> Workload:
    if dataset not in SHAPES:
        raise UserError(f"--shape must be one of {', '.join(SHAPES)}, got '{dataset}'")
    return Workload(
        f"{model}/{dataset} n={n} K={K} B={B}",
        dataset,
        model,
        n,
        K,
        B,
        algorithms_,
        model_params=model_params or {},
        regularizer=regularizer,
        overrides=overrides or [],
    )


def run(
    workloads: list[Workload],
    engines: list[str],
    device: torch.device,
    repeats: int,
    rounds: int,
    with_eval: bool,
    report: Callable[[Row], object] = print,
    note: Callable[[str], object] = print,
    peak: float | None = None,
    step_layout: bool = False,
) -> tuple[list[Row], list[Row]]:
    rows: list[Row] = []
    evals: list[Row] = []
    for w in workloads:
        why = _available(w, device)
        if why:
            note(f"skipped {w.name} ({w.model}, {', '.join(w.algorithms)}): {why}")
            continue
        rows += bench_workload(w, device, engines, repeats, rounds, report, peak, step_layout)
        if with_eval:
            evals.append(bench_eval(w, device, repeats, report))
    return rows, evals
