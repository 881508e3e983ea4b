"""A tiny run's cost beyond ``import torch``, as a process: ``python scripts/bench_startup.py
[--repeat N] [OVERRIDES...]`` starts ``python -c "import torch"`` and ``python -m fedprox_cli
OVERRIDES`` (default: digits, a linear model, n = 4, K = 2, T = 3, into a temporary folder) N
times each, alternating, and prints the fastest and the median wall time of each and their
difference (the goal: 1.0 s at most), then where the fastest profiled run spent it
(``scripts/profile_run.py``'s phases). On a shared machine the fastest of N is the figure that
load disturbs least; the load average is printed with it."""

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


def timed(cmd: list[str], env: dict) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("overrides", nargs="*", default=TINY)
    args = p.parse_args()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    load_at_start = os.getloadavg()[0]
    torch_s, run_s = [], []
    with tempfile.TemporaryDirectory(prefix="fedrun-startup-") as tmp:
        for i in range(args.repeat):
            torch_s.append(timed([sys.executable, "-c", "import torch"], env))
            run_s.append(
                timed(
                    [
                        sys.executable,
                        "-m",
                        "fedprox_cli",
                        *args.overrides,
                        f"hydra.run.dir={Path(tmp) / f'run{i}'}",
                    ],
                    env,
                )
            )
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
    overhead = min(run_s) - min(torch_s)
    print(
        f"load average {load_at_start:.1f} at the start, {os.getloadavg()[0]:.1f} at the end, on "
        f"{os.cpu_count()} cores; {args.repeat} runs each"
    )
    print(
        f"import torch:        fastest {min(torch_s):.2f} s, median {statistics.median(torch_s):.2f} s"
    )
    print(
        f"fedrun {' '.join(args.overrides)}: fastest {min(run_s):.2f} s, median {statistics.median(run_s):.2f} s"
    )
    print(
        f"beyond import torch: {overhead:.2f} s (goal <= {GOAL_S} s: {'met' if overhead <= GOAL_S else 'not met'})"
    )
    best = min(profiles, key=lambda r: r["total"])
    phases = {k: v for k, v in best["seconds"].items() if k != "import torch"}
    print(
        "fastest profiled run, beyond import torch: "
        + ", ".join(f"{k} {v:.2f} s" for k, v in sorted(phases.items(), key=lambda kv: -kv[1]))
    )


if __name__ == "__main__":
    main()
