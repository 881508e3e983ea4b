#!/usr/bin/env python
"""Benchmark the gradient engines (loop, vmap, vmap+compile, auto) on the workloads of docs/performance.md.

    python scripts/bench_engine.py                          # workloads 1-4 (missing ones skipped)
    python scripts/bench_engine.py --workloads 1 --threads 1
    python scripts/bench_engine.py --model linear --algorithm fedcanon --shape mnist --n 100 --K 10
    python scripts/bench_engine.py --threads 1 --baseline   # fedrun vs a plain per-client loop
    python scripts/bench_engine.py --threads 1 --scaling    # client-steps/s at n = 10, 100, 1000
    python scripts/bench_engine.py --threads 1 --seeds 10   # 10 seed-batched runs vs 10 sequential
    python scripts/bench_engine.py --threads 1 --profile    # one local step, op by op

Prints one line per measurement, then markdown tables (docs/performance.md): per workload and
engine steps/s, GFLOP/s, the fraction of the same-shape products' rate ("of roofline": replayed
on contiguous operands; with ``--step-layout`` also "of step's layout": on operands of the
strides the step passes, e.g. a weight transposed as a view) and of the device's FP32/TF32
peak ("of peak": known GPUs, or --peak-tflops), and the compile seconds of ``vmap+compile``
(compile=true: torch.compile, CUDA graphs on CUDA), eager and compiled timed in turn in the
same run.

``--baseline``: FedCanon on the MLP (fmnist-shaped, n = 10, K = 20, B = 64, l1) run by fedrun's
engines and by :func:`plain_fedcanon`, the per-client PyTorch loop a researcher would write
(load the server model into one module, K SGD steps with autograd and the correction c_i, send
Delta_i; the server averages, takes the prox, updates the c_i), timed in turn in the same run.
``--scaling``: FedCanon rounds (K = 2, B = 64) at n = 10, 100, 1000 for the linear model and the
MLP with each engine; client-steps/s and their ratio to n = 10 (the goal: >= 0.8).
``--profile``: the per-op account of one local step (:func:`profile`): torch.profiler over one
round of each of :data:`PROFILED` per engine, each op's self microseconds per client-step (its
median call's), split into matrix products (and convolutions) and everything else."""

import argparse
import copy
import csv
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from fedprox_cli.common.errors import UserError  # noqa: E402
from fedprox_cli.engine import memory  # noqa: E402
from fedprox_cli.engine.device import (  # noqa: E402
    MATMUL_PRECISIONS,
    device_name,  # noqa: E402
    resolve_device,  # noqa: E402
    set_matmul_precision,
)
from fedprox_cli.runs import bench, roofline  # noqa: E402


def table(rows: list[dict]) -> str:
    if not rows:
        return ""
    cols = list(rows[0])
    fmt = lambda v: f"{v:.3g}" if isinstance(v, float) else str(v)  # noqa: E731
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    return "\n".join(lines + ["| " + " | ".join(fmt(r[c]) for c in cols) + " |" for r in rows])


def plain_fedcanon(
    setup: bench.Setup, K: int, B: int, alpha: float, beta: float, lam: float, seed: int = 0
):
    """FedCanon as a plain per-client loop (the honest baseline): one module, parameters as a
    list of tensors, client data as index tensors; returns a function running one round."""
    module = copy.deepcopy(setup.flat.module)
    params = list(module.parameters())
    data, n = setup.data, setup.data.n
    clients = [data.index[i, : int(data.sizes[i])] for i in range(n)]
    z = [p.detach().clone() for p in params]
    C = [[torch.zeros_like(p) for p in params] for _ in range(n)]
    gen = torch.Generator(device=data.x.device).manual_seed(seed)

    def one_round():
        deltas = []
        for i in range(n):
            with torch.no_grad():
                for p, zp in zip(params, z):
                    p.copy_(zp)
            for _ in range(K):
                ids = clients[i][
                    torch.randint(len(clients[i]), (B,), generator=gen, device=data.x.device)
                ]
                loss = F.cross_entropy(module(data.x[ids]), data.y[ids])
                grads = torch.autograd.grad(loss, params)
                with torch.no_grad():
                    for p, g, c in zip(params, grads, C[i]):
                        p.sub_(g + c, alpha=beta)
            with torch.no_grad():
                deltas.append([(zp - p) / (beta * K) for zp, p in zip(z, params)])
        with torch.no_grad():
            dbar = [torch.stack(ds).mean(0) for ds in zip(*deltas)]
            for j, (zp, d) in enumerate(zip(z, dbar)):
                v = zp - alpha * d
                z[j] = v - v.clamp(-alpha * lam, alpha * lam)  # prox of alpha lam ||.||_1
            for i in range(n):
                for c, d, di in zip(C[i], dbar, deltas[i]):
                    c.add_(d - di)

    return one_round


def baseline(device, repeats: int, rounds: int, engines: list[str]) -> list[dict]:
    """fedrun's engines vs :func:`plain_fedcanon` on FedCanon fig2's shapes, interleaved."""
    w = bench.WORKLOADS[1]
    setup = bench.Setup(w, device)
    alg, h = bench._algorithm("fedcanon", w.regularizer, w.overrides)
    timers = {
        e: bench.RoundTimer(setup, "fedcanon", setup.oracle(e, alg="fedcanon"), rounds)
        for e in engines
    }
    plain = plain_fedcanon(setup, w.K, w.B, alg.alpha, alg.beta, h.lam)
    plain()  # warm-up
    run_plain = lambda: [plain() for _ in range(rounds)]  # noqa: E731
    best = {k: math.inf for k in [*timers, "plain loop"]}
    for _ in range(repeats):
        for e, timer in timers.items():
            best[e] = min(best[e], bench.best_time(timer) / rounds)
        best["plain loop"] = min(best["plain loop"], bench.best_time(run_plain) / rounds)
    chosen = timers["auto"].env.oracle.engine.name if "auto" in timers else None
    return [
        {
            "workload": f"{w.name} (mlp, n={w.n}, K={w.K}, B={w.B})",
            "runner": "plain loop"
            if k == "plain loop"
            else f"fedrun {k}" + (f" ({chosen})" if k == "auto" else ""),
            "steps/s": w.n * w.K / t,
            "vs plain loop": best["plain loop"] / t,
        }
        for k, t in best.items()
    ]


def scaling(
    device, repeats: int, ns=(10, 100, 1000), models=("linear", "mlp"), K: int = 2
) -> list[dict]:
    """Client-steps/s of FedCanon rounds at each n (oracle.chunk as ``auto`` plans it)."""
    rows = []
    for model in models:
        base = {}
        for n in ns:
            w = bench.custom_workload(model, ["fedcanon"], "fmnist", n, K, 64)
            setup = bench.Setup(w, device)
            fp = memory.footprint(
                setup.flat.module, setup.flat.d, (1, 28, 28), torch.float32, device
            )
            chunk = memory.plan(fp, n, w.B, "auto", 4096, 4)[0]
            timers = {
                e: bench.RoundTimer(setup, "fedcanon", setup.oracle(e, chunk, "fedcanon"), 1)
                for e in ("loop", "vmap", "auto")
            }
            best = {e: math.inf for e in timers}
            for _ in range(repeats if n < 1000 else 1):
                for e, timer in timers.items():
                    best[e] = min(best[e], bench.best_time(timer))
            fastest = min(best["loop"], best["vmap"])
            for e, t in best.items():
                rate = n * K / t
                base.setdefault(e, rate)
                rows.append(
                    {
                        "model": model,
                        "n": n,
                        "engine": e
                        + (f" ({timers[e].env.oracle.engine.name})" if e == "auto" else ""),
                        "client-steps/s": rate,
                        "vs n=10": rate / base[e],
                        "vs faster engine": fastest / t,
                    }
                )
                print(rows[-1], flush=True)
            del setup, timers
    return rows


SEED_WORKLOADS = {  # the seed-batching workloads: whole runs, as a sweep over seeds makes them
    "linear, breast_cancer (a9a-shaped)": [
        "dataset=breast_cancer",
        "model=linear",
        "regularizer=mcp",
    ],
    "linear, digits": ["dataset=digits", "model=linear"],
    "FedNMap sigmoid MLP, mnist5k": ["dataset=mnist5k", "model=sigmoid_mlp", "algorithm=fednmap"],
}


def seed_batching(
    R: int, repeats: int, T: int, only: list[str] | None = None, cli: bool = False
) -> list[dict]:
    """R seed-batched runs vs the same R runs one after another, whole runs (FedCanon unless
    the workload names another algorithm; n = 10, K = 10, B = 64, evaluation every 5 rounds),
    timed in turn, two ways: in this process (:func:`runner.run` with ``seeds=R`` vs R calls
    with ``engine=auto``: no start-up on either side) and, with ``cli``, from the command line
    (``fedrun seeds=R`` vs the sweep ``fedrun -m seed=0,...,R-1``, each one process with its
    start-up)."""
    import shutil
    import subprocess
    import tempfile
    import time
    from pathlib import Path

    from fedprox_cli.analysis.run_figures import draw
    from fedprox_cli.common.run_files import read_summary
    from fedprox_cli.config.compose import compose
    from fedprox_cli.data import datasets
    from fedprox_cli.runs import runner

    rows = []
    for name, overrides in SEED_WORKLOADS.items():
        if only and not any(o in name for o in only):
            continue
        try:
            datasets.load(overrides[0].split("=")[1], None)
        except (UserError, OSError) as e:
            print(f"# {name}: skipped ({e})", flush=True)
            continue
        base = [
            *overrides,
            "n=10",
            "K=10",
            "B=64",
            f"T={T}",
            "eval_every=5",
            "checkpoint_every=0",
            "progress_every_s=1000000",
        ]
        tmp = Path(tempfile.mkdtemp(prefix="bench_seeds_"))
        fedrun = [sys.executable, "-m", "fedprox_cli"]
        seeds = ",".join(map(str, range(R)))

        def fedrun_ok(*args):
            p = subprocess.run([*fedrun, *args], capture_output=True, text=True)
            assert p.returncode == 0, p.stderr[-2000:]

        ways = {
            "sequential": lambda: [
                runner.run(
                    compose([*base, f"seed={s}"]), tmp / f"seq{s}", progress=False, plot=draw
                )
                for s in range(R)
            ],
            "seeds=R": lambda: runner.run(
                compose([*base, f"seeds={R}"]), tmp / "batched", progress=False, plot=draw
            ),
        }
        if cli:
            ways["fedrun -m seed=..."] = lambda: fedrun_ok(
                "-m", *base, f"seed={seeds}", f"hydra.sweep.dir={tmp / 'sweep'}"
            )
            ways["fedrun seeds=R"] = lambda: fedrun_ok(
                *base, f"seeds={R}", f"hydra.run.dir={tmp / 'cli'}"
            )
        best = dict.fromkeys(ways, math.inf)
        train = dict.fromkeys(("sequential", "seeds=R"), math.inf)  # the runs' own time_s
        try:
            for _ in range(repeats):
                for label, fn in ways.items():
                    for p in tmp.iterdir():
                        shutil.rmtree(p)
                    start = time.perf_counter()
                    fn()
                    best[label] = min(best[label], time.perf_counter() - start)
                    if label in train:  # R runs one after another: the sum; seed-batched: shared
                        times = [
                            read_summary(r)["final"]["time_s"]
                            for r in sorted(tmp.rglob("summary.json"))
                            for r in [r.parent]
                        ]
                        train[label] = min(
                            train[label], sum(times) if label == "sequential" else max(times)
                        )
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        rows.append(
            {
                "workload": f"{name}, T={T}",
                "R": R,
                **{f"{k} s": v for k, v in best.items()},
                "training s (sequential, seeds=R)": f"{train['sequential']:.1f}, {train['seeds=R']:.1f}",
                "speed-up of training": train["sequential"] / train["seeds=R"],
                "speed-up in process": best["sequential"] / best["seeds=R"],
                **(
                    {"speed-up fedrun": best["fedrun -m seed=..."] / best["fedrun seeds=R"]}
                    if cli
                    else {}
                ),
            }
        )
        print(rows[-1], flush=True)
    return rows


PROFILED = {  # name: (model, shape, algorithm, n, K); B = 64 (K only sets how many steps)
    "Fig. 2 MLP, FedAvg": ("mlp", "fmnist", "fedavg", 10, 20),
    "Fig. 2 MLP, FedCanon": ("mlp", "fmnist", "fedcanon", 10, 20),
    "FedNMap sigmoid MLP, n=100": ("sigmoid_mlp", "mnist", "fednmap", 100, 10),
    "linear, n=100": ("linear", "mnist", "fedcanon", 100, 10),
    "Fig. 3 CNN": ("cnn", "fmnist", "fedcanon", 10, 4),
}
PRODUCTS = {"mm", "addmm", "addmm_", "bmm", "baddbmm", "baddbmm_", "mkldnn_convolution"}
PRODUCT_PREFIXES = ("_slow_conv2d", "convolution_backward", "mkldnn_convolution_backward")


def is_product(op: str) -> bool:
    """Whether an aten op is a matrix product or a convolution (the roofline's arithmetic)."""
    name = op.removeprefix("aten::")
    return name in PRODUCTS or name.startswith(PRODUCT_PREFIXES)


def profile(device, engines: list[str], only: list[str] | None, top: int) -> list[dict]:
    """Per workload and engine: one round under torch.profiler (after a warm-up round), each
    op's self time per client-step -- its median call's times its calls, robust to the
    preemptions of a shared machine (the profiler's clock is wall time) -- and, beside the
    totals, the same round unprofiled (:func:`bench.best_time`); prints the ops and returns
    the totals' rows. The profiler's own cost per op (a few microseconds) falls on every op."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    rows = []
    for name, (model, shape, alg, n, K) in PROFILED.items():
        if only and not any(o in name for o in only):
            continue
        w = bench.custom_workload(model, [alg], shape, n, K, 64)
        setup = bench.Setup(w, device)
        for e in engines:
            timer = bench.RoundTimer(setup, alg, setup.oracle(e, alg=alg), 1)  # (its warm-up round)
            chosen = timer.env.oracle.engine.name
            plain = bench.best_time(timer, 3)
            with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
                timer()
            steps = n * K
            calls: dict[str, list[float]] = {}
            for ev in prof.events():
                calls.setdefault(ev.key, []).append(ev.self_cpu_time_total)
            ops = sorted(  # (op, calls per step, median call's us x calls per step)
                (
                    (op, len(us) / steps, statistics.median(us) * len(us) / steps)
                    for op, us in calls.items()
                    if statistics.median(us) > 0
                ),
                key=lambda r: -r[2],
            )
            products = sum(us for op, _, us in ops if is_product(op))
            other = sum(us for op, _, us in ops if not is_product(op))
            label = e + (f" ({chosen})" if e == "auto" else "")
            print(f"\n## {name} ({model}, {alg}, n={n}, K={K}, B=64), engine {label}")
            print("| op | calls/step | us/step | product |\n|---|---|---|---|")
            for op, calls, us in ops[:top]:
                print(f"| {op} | {calls:.3g} | {us:.1f} | {'yes' if is_product(op) else ''} |")
            rest = ops[top:]
            if rest:
                print(
                    f"| ({len(rest)} other ops) | {sum(c for _, c, _ in rest):.3g} | "
                    f"{sum(u for _, _, u in rest):.1f} | |"
                )
            rows.append(
                {
                    "workload": name,
                    "engine": label,
                    "ops/step": sum(c for _, c, _ in ops),
                    "products us/step": products,
                    "other us/step": other,
                    "products share": products / (products + other),
                    "unprofiled us/step": 1e6 * plain / steps,
                }
            )
            print(rows[-1], flush=True)
    return rows


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--workloads", default="1,2,3,4", help="comma-separated workload numbers")
    p.add_argument("--model", help="a custom workload instead: this model ...")
    p.add_argument(
        "--algorithm", default="fedcanon", help="... these comma-separated algorithms ..."
    )
    p.add_argument(
        "--shape", default="mnist", help=f"... data of these shapes ({', '.join(bench.SHAPES)})"
    )
    p.add_argument("--regularizer", default="l1", help="... this regularizer (conf defaults) ...")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="... with these config overrides (e.g. regularizer.a=1000; repeatable) ...",
    )
    p.add_argument("--n", type=int, default=10)
    p.add_argument("--K", type=int, default=10)
    p.add_argument("--B", type=int, default=64)
    p.add_argument(
        "--engines",
        default="loop,vmap,vmap+compile,auto",
        help="engines to time: loop, vmap, auto, vmap+compile (compile=true)",
    )
    p.add_argument(
        "--peak-tflops",
        type=float,
        help="the device's peak (default: known GPUs' FP32/TF32 data-sheet peak)",
    )
    p.add_argument("--device", default="auto")
    p.add_argument(
        "--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)"
    )
    p.add_argument("--repeats", type=int, default=3, help="timings per measurement (best is kept)")
    p.add_argument("--rounds", type=int, default=2, help="rounds per timing")
    p.add_argument("--no-eval", action="store_true", help="skip the evaluation benchmark")
    p.add_argument(
        "--step-layout",
        action="store_true",
        help="also replay the products on the step's own strides (\"of step's layout\")",
    )
    p.add_argument(
        "--matmul-precision",
        default="highest",
        choices=MATMUL_PRECISIONS,
        help="float32 products (the run key matmul_precision)",
    )
    p.add_argument("--csv", help="also write the training rows to this CSV file")
    p.add_argument(
        "--baseline", action="store_true", help="fedrun vs a plain per-client loop (only)"
    )
    p.add_argument(
        "--scaling", action="store_true", help="client-steps/s at n = 10, 100, 1000 (only)"
    )
    p.add_argument("--scaling-n", default="10,100,1000", help="the n of --scaling")
    p.add_argument(
        "--seeds", type=int, metavar="R", help="R seed-batched runs vs R sequential runs (only)"
    )
    p.add_argument("--seeds-T", type=int, default=50, help="rounds of each run of --seeds")
    p.add_argument(
        "--seeds-workloads", help="comma-separated parts of --seeds workload names (default: all)"
    )
    p.add_argument(
        "--seeds-cli",
        action="store_true",
        help="--seeds also from the command line (with start-up)",
    )
    p.add_argument(
        "--profile", action="store_true", help="the per-op account of one local step (only)"
    )
    p.add_argument("--profile-workloads", help="comma-separated parts of --profile workload names")
    p.add_argument("--profile-top", type=int, default=25, help="ops listed per profile")
    a = p.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    if a.threads == 1 and hasattr(
        os, "sched_setaffinity"
    ):  # one core: R threads cannot overlap work
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    set_matmul_precision(a.matmul_precision)
    try:
        device = resolve_device(a.device)
        if a.model:
            workloads = [
                bench.custom_workload(
                    a.model,
                    a.algorithm.split(","),
                    a.shape,
                    a.n,
                    a.K,
                    a.B,
                    regularizer=a.regularizer,
                    overrides=a.set,
                )
            ]
        else:
            nums = [int(i) for i in a.workloads.split(",")]
            unknown = [i for i in nums if i not in bench.WORKLOADS]
            if unknown:
                raise UserError(
                    f"unknown workload(s) {unknown} (choose from {list(bench.WORKLOADS)})"
                )
            workloads = [bench.WORKLOADS[i] for i in nums]
    except (UserError, ValueError) as e:
        print(f"bench_engine: error: {e}", file=sys.stderr)
        return 2
    print(
        f"# {device_name(torch.device('cpu'))}, {os.cpu_count()} CPUs, torch "
        f"{torch.__version__}, {torch.get_num_threads()} threads, device {device}"
        f"{f' ({device_name(device)})' if device.type == 'cuda' else ''}, "
        f"matmul_precision {a.matmul_precision}"
    )
    if a.seeds:
        print(
            "\n"
            + table(
                seed_batching(
                    a.seeds,
                    a.repeats,
                    a.seeds_T,
                    a.seeds_workloads.split(",") if a.seeds_workloads else None,
                    a.seeds_cli,
                )
            )
        )
        return 0
    if a.profile:
        engines = [e for e in a.engines.split(",") if e != "vmap+compile"]
        only = a.profile_workloads.split(",") if a.profile_workloads else None
        print("\n" + table(profile(device, engines, only, a.profile_top)))
        return 0
    if a.baseline or a.scaling:
        rows = (
            baseline(device, a.repeats, a.rounds, a.engines.split(","))
            if a.baseline
            else scaling(device, a.repeats, tuple(int(n) for n in a.scaling_n.split(",")))
        )
        print("\n" + table(rows))
        return 0
    peak = roofline.peak_flops(device, a.peak_tflops and a.peak_tflops * 1e12)
    print(
        f"# peak {peak / 1e12:.4g} TFLOP/s ({'given' if a.peak_tflops else 'data sheet'})"
        if peak
        else "# peak unknown for this device (--peak-tflops gives one): of peak not reported"
    )
    rows, evals = bench.run(
        workloads,
        a.engines.split(","),
        device,
        a.repeats,
        a.rounds,
        not a.no_eval,
        report=lambda r: print(r, flush=True),
        peak=peak,
        step_layout=a.step_layout,
    )
    print("\n" + table(rows))
    if a.csv and rows:
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    if evals:
        print("\n" + table(evals))
    fig2 = [e for e in evals if e["workload"] == bench.WORKLOADS[1].name]
    if fig2:
        e = fig2[0]
        print(
            f"\nFedCanon fig2 sweep (12 runs, T=200), from round {e['round s']:.3f} s, eval "
            f"{e['eval s']:.3f} s:"
        )
        for every in (1, 5, 10):
            print(
                f"  eval_every={every}: {bench.fig2_estimate(e['round s'], e['eval s'], every):.1f} "
                f"min one job at a time, {bench.fig2_estimate(e['round s'], e['eval s'], every, parallel=2):.1f} "
                f"min two at a time (if each keeps this speed on its own core)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
