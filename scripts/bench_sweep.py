"""A sweep's jobs listed and checked, and launched: ``python scripts/bench_sweep.py [--jobs N ...]
[--launch N N] [--launcher basic|joblib]``.

``--jobs`` times ``fedrun -m dataset=digits model=linear 'seed=range(0,N)' dry_run=true`` (each
job composed as its launcher composes it and validated like a run; nothing trained, nothing
written) as a process for each N given, and prints its wall time, time a job, peak memory (max
RSS), the progress lines it printed and the load average. The goal: 10,000 jobs under a
minute, memory not growing with the jobs (compare N = 1,000 and 10,000).

``--launch A B`` runs the same sweep for real with ``T=1`` (one round of a linear model on
digits: the smallest job there is) at A and B jobs into a temporary folder, each a process,
and prints for each its wall time, peak memory and ``job N: started`` lines, then the slopes
between the two sizes: seconds a job (the launch's cost a job plus the one round) and memory a
job. ``--launcher joblib`` launches with ``hydra/launcher=joblib hydra.launcher.n_jobs=2``."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

SWEEP = ["dataset=digits", "model=linear", "dry_run=true"]
LAUNCH = ["dataset=digits", "model=linear", "T=1"]
LAUNCHERS = {"basic": [], "joblib": ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]}
CODE = (
    "import atexit, resource, sys; atexit.register(lambda: sys.stderr.write("
    "f'\\nmax RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}\\n')); "
    "sys.argv[0] = 'fedrun'; from fedprox_cli.cli.commands import fedrun; fedrun()"
)


def fedrun(args: list[str]) -> tuple[float, float, int, list[str], str]:
    """``fedrun -m args`` as a process: wall time, its own max RSS (MB), exit code, its stderr
    lines, its stdout."""
    t = time.perf_counter()
    p = subprocess.run(
        [sys.executable, "-c", CODE, "-m", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        check=False,
    )
    wall = time.perf_counter() - t
    *said, rss = p.stderr.strip().splitlines() or ["max RSS 0"]
    return wall, int(rss.split()[-1]) / 1024, p.returncode, said, p.stdout


def dry(n: int) -> None:
    wall, peak, code, said, out = fedrun([*SWEEP, f"seed=range(0,{n})"])
    progress = sum(line.startswith("fedrun: checked") for line in said)
    first = out.splitlines()[0] if out else (said[-1] if said else "")
    print(
        f"{n} jobs: {wall:.1f} s ({wall / n * 1000:.1f} ms a job), max RSS {peak:.0f} MB, "
        f"exit {code}, {progress} progress lines; {first}"
    )


def launched(n: int, launcher: str) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as sweep:
        wall, peak, code, said, out = fedrun(
            [*LAUNCH, *LAUNCHERS[launcher], f"seed=range(0,{n})", f"hydra.sweep.dir={sweep}"]
        )
    started = sum(": started," in line for line in said)
    last = next((line for line in out.splitlines() if line.startswith("sweep:")), "")
    print(
        f"{n} jobs ({launcher}): {wall:.1f} s ({wall / n * 1000:.0f} ms a job), max RSS "
        f"{peak:.0f} MB, exit {code}, {started} 'started' lines; {last}"
    )
    return wall, peak


def load() -> str:
    return f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, nargs="*", default=None)
    p.add_argument("--launch", type=int, nargs=2, metavar=("A", "B"))
    p.add_argument("--launcher", choices=sorted(LAUNCHERS), default="basic")
    args = p.parse_args()
    print(load())
    for n in args.jobs if args.jobs is not None else ([] if args.launch else [1000, 10000]):
        dry(n)
    if args.launch:
        a, b = args.launch
        (wa, ma), (wb, mb) = launched(a, args.launcher), launched(b, args.launcher)
        slope, grows = (wb - wa) / (b - a), (mb - ma) / (b - a)
        print(
            f"slope: {slope * 1000:.0f} ms a job, {grows * 1024:.1f} kB of max RSS a job; "
            f"10^4 jobs by the slopes: ~{slope * 1e4 / 60:.0f} min, ~{ma + grows * (1e4 - a):.0f} MB"
        )
    print(load())


if __name__ == "__main__":
    main()
