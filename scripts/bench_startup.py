"""A tiny run's cost beyond ``import torch``, as a process: ``python scripts/bench_startup.py
[--repeat N] [--against TREE] [OVERRIDES...]`` starts ``python -c "import torch"``, ``python -c
"import torch, os; os._exit(0)"`` (torch without the interpreter's teardown, which a fedrun
process skips: cli/commands.py) and ``python -m fedprox_cli OVERRIDES`` (default: digits, a
linear model, n = 4, K = 2, T = 3, into a temporary folder) N times each, interleaved (with
``--against``, the same run of the code in TREE, a checkout or an export of one, started from
that folder, after each run of this code), after one untimed run of each that leaves its
bytecode cached as an installed package has it (``PYTHONDONTWRITEBYTECODE`` is dropped for the
runs: compiling fedprox_cli's modules each time costs a run about 0.2 s). It prints the
fastest and the median wall time of each, the run's cost beyond ``import torch`` (fastest
against fastest, median against median; the goal: 1.0 s at most), then where the fastest
profiled run of this code spent it (``scripts/profile_run.py``'s phases, in one process: the
drawing's wait included, the process's exit not). On a shared machine the fastest of N is
the figure that load disturbs least; the load average is printed with it."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TINY = ["dataset=digits", "model=linear", "n=4", "K=2", "T=3"]
GOAL_S = 1.0
HERE = Path(__file__).resolve().parents[1]
TORCH = {
    "import torch": "import torch",
    "import torch, no teardown": "import torch, os; os._exit(0)",
}


def timed(cmd: list[str], env: dict, cwd: Path = HERE) -> float:
    t = time.perf_counter()
    subprocess.run(
        cmd, env=env, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    return time.perf_counter() - t


def fastest_median(seconds: list[float]) -> str:
    return f"fastest {min(seconds):.2f} s, median {statistics.median(seconds):.2f} s"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument(
        "--against",
        type=Path,
        metavar="TREE",
        help="also time the code in TREE (run from that folder), interleaved with this code's",
    )
    p.add_argument("overrides", nargs="*", default=TINY)
    args = p.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["OMP_NUM_THREADS"] = "1"
    trees = {"this code": HERE, **({f"{args.against}": args.against} if args.against else {})}
    load_at_start = os.getloadavg()[0]
    seconds: dict[str, list[float]] = {k: [] for k in [*TORCH, *trees]}
    with tempfile.TemporaryDirectory(prefix="fedrun-startup-") as tmp:
        run = [sys.executable, "-m", "fedprox_cli", *args.overrides]
        for t, tree in enumerate(trees.values()):  # its bytecode written: not timed
            timed([*run, f"hydra.run.dir={Path(tmp) / f'first{t}'}"], env, tree.resolve())
        for i in range(args.repeat):
            for name, code in TORCH.items():
                seconds[name].append(timed([sys.executable, "-c", code], env))
            for t, (name, tree) in enumerate(trees.items()):
                folder = f"hydra.run.dir={Path(tmp) / f'run{i}-{t}'}"
                seconds[name].append(timed([*run, folder], env, tree.resolve()))
        profiles = []
        for i in range(min(3, args.repeat)):
            out = subprocess.run(
                [
                    sys.executable,
                    str(Path(__file__).with_name("profile_run.py")),
                    *args.overrides,
                    f"hydra.run.dir={Path(tmp) / f'profile{i}'}",
                ],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            profiles.append(json.loads(out.strip().splitlines()[-1]))
    print(
        f"load average {load_at_start:.1f} at the start, {os.getloadavg()[0]:.1f} at the end, on "
        f"{os.cpu_count()} cores; {args.repeat} runs each, interleaved"
    )
    for name in TORCH:
        print(f"{name}: {fastest_median(seconds[name])}")
    torch_s = seconds["import torch"]
    for name in trees:
        run_s = seconds[name]
        print(f"fedrun {' '.join(args.overrides)} ({name}): {fastest_median(run_s)}")
        overhead = min(run_s) - min(torch_s)
        print(
            f"  beyond import torch: fastest {overhead:.2f} s, median "
            f"{statistics.median(run_s) - statistics.median(torch_s):.2f} s (goal <= {GOAL_S} s: "
            f"{'met' if overhead <= GOAL_S else 'not met'}); beyond import torch without its "
            f"teardown: fastest {min(run_s) - min(seconds['import torch, no teardown']):.2f} s"
        )
    best = min(profiles, key=lambda r: r["total"])
    phases = {k: v for k, v in best["seconds"].items() if k != "import torch"}
    print(
        "fastest profiled run of this code, beyond import torch: "
        + ", ".join(f"{k} {v:.2f} s" for k, v in sorted(phases.items(), key=lambda kv: -kv[1]))
    )


if __name__ == "__main__":
    main()
