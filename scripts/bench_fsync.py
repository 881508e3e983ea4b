#!/usr/bin/env python
"""The cost of durable writes (docs/robustness.md, "Durable writes"): one run timed with every
atomic write fsync'ed (the file, then its folder after the rename: fedrun as it is) and with
fsync made a no-op, in turn, in one process, into folders under ``--dir`` (the file system
whose fsync is measured).

    python scripts/bench_fsync.py                                   # digits, linear, T=200, eval_every=1
    python scripts/bench_fsync.py --dir /scratch/me --repeats 5 -- T=1000 eval_every=10

Prints the best wall seconds of each, the fsync calls of one run, and the cost per run and per
fsync. ``eval_every=1`` writes metrics.csv every round: the most writes a run makes."""

import argparse
import os
import shutil
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from fedprox_cli.analysis.run_figures import draw  # noqa: E402
from fedprox_cli.config.compose import compose  # noqa: E402
from fedprox_cli.runs import runner  # noqa: E402

RUN = ["dataset=digits", "model=linear", "n=4", "K=2", "T=200", "eval_every=1", "engine=loop"]


@contextmanager
def counted_fsync(real: bool, calls: list[int]):
    """``os.fsync`` counted in ``calls``; a no-op unless ``real``."""
    fsync = os.fsync

    def call(fd):
        calls[0] += 1
        if real:
            fsync(fd)

    os.fsync = call
    try:
        yield
    finally:
        os.fsync = fsync


def one(overrides: list[str], folder: Path, real: bool) -> tuple[float, int]:
    shutil.rmtree(folder, ignore_errors=True)
    calls = [0]
    with counted_fsync(real, calls):
        start = time.perf_counter()
        code = runner.run(compose(overrides), folder, progress=False, plot=draw)
        seconds = time.perf_counter() - start
    assert code == 0, f"the run failed (exit {code})"
    return seconds, calls[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--dir", default=None, help="where the runs are written (default: a temp folder)"
    )
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("overrides", nargs="*", help="fedrun overrides on top of the default run")
    a = ap.parse_args()
    overrides = RUN + a.overrides
    root = Path(a.dir or tempfile.mkdtemp(prefix="bench_fsync."))
    best = {True: float("inf"), False: float("inf")}
    calls = 0
    one(overrides, root / "warm", True)  # data cache, imports
    for _ in range(a.repeats):
        for real in (True, False):
            s, calls = one(overrides, root / f"run_{real}", real)
            best[real] = min(best[real], s)
    cost = best[True] - best[False]
    print(f"run: {' '.join(overrides)}  (folder {root})")
    print(
        f"with fsync {best[True]:.3f} s, without {best[False]:.3f} s (best of {a.repeats}); "
        f"{calls} fsyncs a run; cost {cost:+.3f} s a run ({100 * cost / best[False]:+.1f}%), "
        f"{1e3 * cost / max(calls, 1):.3f} ms an fsync"
    )
    if a.dir is None:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
