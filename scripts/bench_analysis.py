"""The analysis commands on many runs: ``python scripts/bench_analysis.py [--runs N] [--rows R]
[--keep DIR]`` trains one tiny run (digits, a linear model, T = 20), copies it into N run
folders of a sweep (each its own ``seed``, its own metrics; nothing else trained), then times
``fedrun-table``, ``fedrun-plot`` and ``fedrun-report`` on the sweep, each as a process, and
prints each one's wall time and peak memory (max RSS) with the load average. ``--rows R`` adds
one more run whose ``metrics.csv`` has R rows (a huge metrics file; ``--rows 1000000`` is
about 150 MB). The goal: every command under a minute on 5,000 runs, memory not growing with
them."""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TINY = ["dataset=digits", "model=linear", "n=4", "K=2", "T=20", "eval_every=1"]
COMMANDS = {
    "fedrun-table": ["fedprox_cli.cli.commands", "table", []],
    "fedrun-plot": ["fedprox_cli.cli.commands", "plot", ["--out", "{out}/curves.png"]],
    "fedrun-report": ["fedprox_cli.cli.commands", "report", []],
}


def copies(template: Path, sweep: Path, n: int) -> None:
    """``n`` run folders under ``sweep`` made from ``template``: seed ``s`` in config.yaml and
    Hydra's record, the metrics scaled a little so that runs differ."""
    config = (template / "config.yaml").read_text()
    overrides = (template / ".hydra" / "overrides.yaml").read_text()
    header, *rows = (template / "metrics.csv").read_text().splitlines()
    rng = random.Random(0)
    for s in range(n):
        run = sweep / f"seed={s}"
        shutil.copytree(template, run)
        (run / "config.yaml").write_text(config.replace("\nseed: 0\n", f"\nseed: {s}\n"))
        (run / ".hydra" / "overrides.yaml").write_text(overrides + f"- seed={s}\n")
        f = 1 + rng.uniform(-0.05, 0.05)
        scaled = [
            ",".join(c if i == 0 else f"{float(c) * f:.6g}" for i, c in enumerate(row.split(",")))
            for row in rows
        ]
        (run / "metrics.csv").write_text("\n".join([header, *scaled]) + "\n")


def huge(template: Path, folder: Path, rows: int) -> None:
    """One run whose metrics.csv repeats the template's last row ``rows`` times, rounds
    counting on."""
    shutil.copytree(template, folder)
    header, *lines = (template / "metrics.csv").read_text().splitlines()
    last = lines[-1].split(",")
    with open(folder / "metrics.csv", "w") as f:
        f.write(header + "\n")
        f.writelines(",".join([str(r), *last[1:]]) + "\n" for r in range(rows))


def timed(command: str, sweep: Path, out: Path) -> tuple[float, float, int, str]:
    module, function, extra = COMMANDS[command]
    code = (
        "import atexit, resource, sys; atexit.register(lambda: sys.stderr.write("
        "f'\\nmax RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}\\n')); "
        f"sys.argv[0] = {command!r}; from {module} import {function}; {function}()"
    )
    args = [a.format(out=out) for a in extra]
    t = time.perf_counter()
    p = subprocess.run(
        [sys.executable, "-c", code, str(sweep), *args],
        capture_output=True,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        check=False,
    )
    wall = time.perf_counter() - t
    *said, rss = p.stderr.strip().splitlines() or ["", "max RSS 0"]
    said = [line for line in said if line.strip()]
    return wall, int(rss.split()[-1]) / 1024, p.returncode, said[-1] if said else ""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=5000)
    p.add_argument("--rows", type=int, default=0)
    p.add_argument("--keep", type=Path, help="make the folders here and keep them")
    args = p.parse_args()
    tmp = Path(args.keep or tempfile.mkdtemp(prefix="fedrun-analysis-"))
    template, sweep = tmp / "template", tmp / "sweep"
    if not sweep.exists():
        subprocess.run(
            [sys.executable, "-m", "fedprox_cli", *TINY, f"hydra.run.dir={template}"],
            check=True,
            capture_output=True,
            env={**os.environ, "OMP_NUM_THREADS": "1"},
        )
        t = time.perf_counter()
        copies(template, sweep, args.runs)
        if args.rows:
            huge(template, sweep / "huge", args.rows)
        print(f"made {args.runs} run folders in {time.perf_counter() - t:.1f} s under {sweep}")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for command in COMMANDS:
        wall, peak, code, last = timed(command, sweep, tmp)
        print(f"{command}: {wall:.1f} s, max RSS {peak:.0f} MB, exit {code}; last line: {last}")
    if not args.keep:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
