#!/usr/bin/env python
"""Plot run folders: one curve per group of runs that differ only in seeds (mean +- std band).

  python scripts/plot.py results/sweeps/fedcanon_fig2 --y test_acc --panels partition
  python scripts/plot.py results/sweeps/fedcef_fig1_2 --x bytes --y train_loss --out fig1.pdf
  python scripts/plot.py results/sweeps/fednmap_fig3 --slope n      # final stationarity vs log n
  python scripts/plot.py --partition results/runs/<run>             # a run's client partition

Each RESULTS argument is a run folder or a folder searched for them (a sweep). Runs are pooled
only across seeds: every other config difference is a separate curve. A diverged or unfinished
run is left out of its curve's mean, drawn alone and marked at its last finite point, and named
on stderr; a run folder that cannot be read is skipped with one line on stderr. --out writes the
format its extension names (.png, .pdf, .svg) and creates missing folders. Bad input is one line
on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from fedprox_cli import report
from fedprox_cli.curves import plot_groups, plot_slope
from fedprox_cli.errors import UserError

METRICS = ("test_acc", "train_loss", "objective", "test_loss", "stationarity", "hoyer", "nnz_frac")


def parse(argv):
    p = argparse.ArgumentParser(prog="plot.py", description=__doc__.split("\n\n")[0])
    p.add_argument("results", nargs="*", type=Path, help="run folders or folders holding them")
    p.add_argument("--x", choices=sorted(report.X_AXES), default="round")
    p.add_argument("--y", help=f"a metrics.csv column ({', '.join(METRICS)}, ...); default test_acc, "
                   "with --slope stationarity")
    report.add_arguments(p)
    p.add_argument("--panels", action="append", default=[], metavar="KEY",
                   help="one subplot per value of KEY (a dotted key or a config group); repeatable")
    p.add_argument("--logy", action=argparse.BooleanOptionalAction, default=None,
                   help="log-scale y (default: for stationarity only, as the papers)")
    p.add_argument("--slope", metavar="KEY", help="plot final --y (default stationarity) against "
                   "KEY on log-log axes and print the fitted slope (FedNMap Figs. 3b/4b: n or K)")
    p.add_argument("--partition", metavar="RUN", type=Path,
                   help="plot the client partition of one run folder instead")
    p.add_argument("--out", type=Path, help="output file, .png, .pdf or .svg (default: "
                   "plot_<y>_vs_<x>.png in the first RESULTS); missing folders are created")
    p.add_argument("--title", default="")
    args = p.parse_args(argv)
    if not args.results and args.partition is None:
        p.error("give RESULTS folders or --partition RUN")
    return args


def plot_partition(run: Path, out: Path) -> None:
    try:
        from fedprox_cli.plotting import plot_partition as draw
    except ImportError:
        raise UserError("--partition needs fedprox_cli.plotting.plot_partition, which this "
                        "installation does not have") from None
    draw(run, out)


def run(args, warn) -> int:
    if args.partition is not None:
        out = args.out or args.partition / "partition.png"
        plot_partition(args.partition, out)
        print(f"wrote {out}")
        return 0
    runs = report.load(args.results, args.where, warn)
    base = args.results[0] if args.results[0].is_dir() else Path(".")
    if args.slope:
        metric = args.y or "stationarity"
        runs = report.having(runs, [metric], warn)
        report.note_runs(runs, metric, args.final, warn)
        out = args.out or base / f"slope_{metric}_vs_{args.slope}.png"
        for f in plot_slope(runs, args.slope, out, metric, args.final, warn, args.title):
            seeds = report.seed_interval(f)
            print(f"{f['label']}: slope of log final {metric} vs log {args.slope} = {f['slope']:.3f}"
                  f" (R² {f['r2']:.3f}" + (f"; per seed {seeds})" if seeds else ")"))
    else:
        y = args.y or "test_acc"
        runs = report.having(runs, [args.x, y], warn)
        report.note_runs(runs, None, None, warn)
        out = args.out or base / f"plot_{y}_vs_{args.x}.png"
        for label in plot_groups(runs, out, args.x, y, args.logy, args.title, args.panels, warn):
            print(label)
    print(f"wrote {out}")
    return 0


def main(argv=None) -> int:
    args = parse(argv)
    return report.script("plot.py", lambda warn: run(args, warn))


if __name__ == "__main__":
    sys.exit(main())
