#!/usr/bin/env python
"""Benchmark the gradient engines (loop, vmap, auto) on the README's workloads.

    python scripts/bench_engine.py                          # workloads 1-4 (missing ones skipped)
    python scripts/bench_engine.py --workloads 1 --threads 1
    python scripts/bench_engine.py --model linear --algorithm fedcanon --shape mnist --n 100 --K 10

Prints one line per measurement, then markdown tables (README, Performance)."""

import argparse
import csv
import os
import platform
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402

from fedprox_cli import bench  # noqa: E402
from fedprox_cli.config import resolve_device  # noqa: E402
from fedprox_cli.device import MATMUL_PRECISIONS, set_matmul_precision  # noqa: E402
from fedprox_cli.errors import UserError  # noqa: E402


def table(rows: list[dict]) -> str:
    if not rows:
        return ""
    cols = list(rows[0])
    fmt = lambda v: f"{v:.3g}" if isinstance(v, float) else str(v)  # noqa: E731
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    return "\n".join(lines + ["| " + " | ".join(fmt(r[c]) for c in cols) + " |" for r in rows])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workloads", default="1,2,3,4", help="comma-separated workload numbers")
    p.add_argument("--model", help="a custom workload instead: this model ...")
    p.add_argument("--algorithm", default="fedcanon", help="... these comma-separated algorithms ...")
    p.add_argument("--shape", default="mnist", help=f"... data of these shapes ({', '.join(bench.SHAPES)})")
    p.add_argument("--regularizer", default="l1", help="... this regularizer (conf defaults) ...")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="... with these config overrides (e.g. regularizer.a=1000; repeatable) ...")
    p.add_argument("--n", type=int, default=10)
    p.add_argument("--K", type=int, default=10)
    p.add_argument("--B", type=int, default=64)
    p.add_argument("--engines", default="loop,vmap,auto")
    p.add_argument("--device", default="auto")
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    p.add_argument("--repeats", type=int, default=3, help="timings per measurement (best is kept)")
    p.add_argument("--rounds", type=int, default=2, help="rounds per timing")
    p.add_argument("--no-eval", action="store_true", help="skip the evaluation benchmark")
    p.add_argument("--matmul-precision", default="highest", choices=MATMUL_PRECISIONS,
                   help="float32 products (the run key matmul_precision)")
    p.add_argument("--csv", help="also write the training rows to this CSV file")
    a = p.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    set_matmul_precision(a.matmul_precision)
    try:
        device = resolve_device(a.device)
        if a.model:
            workloads = [bench.custom_workload(a.model, a.algorithm.split(","), a.shape, a.n, a.K, a.B,
                                                    regularizer=a.regularizer, overrides=a.set)]
        else:
            nums = [int(i) for i in a.workloads.split(",")]
            unknown = [i for i in nums if i not in bench.WORKLOADS]
            if unknown:
                raise UserError(f"unknown workload(s) {unknown} (choose from {list(bench.WORKLOADS)})")
            workloads = [bench.WORKLOADS[i] for i in nums]
    except (UserError, ValueError) as e:
        print(f"bench_engine: error: {e}", file=sys.stderr)
        return 2
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, torch "
          f"{torch.__version__}, {torch.get_num_threads()} threads, device {device}, "
          f"matmul_precision {a.matmul_precision}")
    rows, evals = bench.run(workloads, a.engines.split(","), device, a.repeats, a.rounds,
                            not a.no_eval, report=lambda r: print(r, flush=True))
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
        print(f"\nFedCanon fig2 sweep (12 runs, T=200), from round {e['round s']:.3f} s, eval "
              f"{e['eval s']:.3f} s:")
        for every in (1, 5, 10):
            print(f"  eval_every={every}: {bench.fig2_estimate(e['round s'], e['eval s'], every):.1f} "
                  f"min one job at a time, {bench.fig2_estimate(e['round s'], e['eval s'], every, parallel=2):.1f} "
                  f"min two at a time (if each keeps this speed on its own core)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
