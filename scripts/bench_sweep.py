"""A sweep's jobs listed and checked: ``python scripts/bench_sweep.py [--jobs N ...]`` times
``fedrun -m dataset=digits model=linear 'seed=range(0,N)' dry_run=true`` (each job composed as
its launcher composes it and validated like a run; nothing trained, nothing written) as a
process for each N given, and prints its wall time, time a job, peak memory (max RSS), the
progress lines it printed and the load average. The goal: 10,000 jobs under a minute, memory
not growing with the jobs (compare N = 1,000 and 10,000)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

SWEEP = ["dataset=digits", "model=linear", "dry_run=true"]


def timed(n: int) -> tuple[float, float, int, int, str]:
    code = (
        "import atexit, resource, sys; atexit.register(lambda: sys.stderr.write("
        "f'\\nmax RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}\\n')); "
        "sys.argv[0] = 'fedrun'; from fedprox_cli.cli.commands import fedrun; fedrun()"
    )
    t = time.perf_counter()
    p = subprocess.run(
        [sys.executable, "-c", code, "-m", *SWEEP, f"seed=range(0,{n})"],
        capture_output=True,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        check=False,
    )
    wall = time.perf_counter() - t
    *said, rss = p.stderr.strip().splitlines() or ["max RSS 0"]
    progress = sum(line.startswith("fedrun: checked") for line in said)
    first = p.stdout.splitlines()[0] if p.stdout else (said[-1] if said else "")
    return wall, int(rss.split()[-1]) / 1024, p.returncode, progress, first


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, nargs="+", default=[1000, 10000])
    args = p.parse_args()
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for n in args.jobs:
        wall, peak, code, progress, first = timed(n)
        print(
            f"{n} jobs: {wall:.1f} s ({wall / n * 1000:.1f} ms a job), max RSS {peak:.0f} MB, "
            f"exit {code}, {progress} progress lines; {first}"
        )
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
