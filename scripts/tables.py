#!/usr/bin/env python
"""Mean +- std tables of run folders, printed as markdown.

  python scripts/tables.py results/sweeps/fedcanon_table6* --table6   # FedCanon Table VI layout
  python scripts/tables.py results/sweeps/fedcanon_table5 --table5    # FedCanon Table V layout
  python scripts/tables.py results/sweeps/fednmap_fig3 --slope n      # FedNMap Fig. 3b slope
  python scripts/tables.py results/sweeps/fedcanon_fig1 --column algorithm.beta

--table6 (default): final test accuracy (or --metric) per row and --column value (default: the
algorithm), best of each row in bold. The rows are whatever else tells the runs apart: runs are
pooled only across seeds, so every config difference that is not a column is a row key. Each
cell says how many runs it holds, "(n=3)"; +- only with two or more; a diverged or unfinished
run is left out of the mean, counted in its cell ("(n=2; diverged 1 of 3)") and named on stderr.
--table5: total training time at the last round per K row and algorithm column, with ratios to
FedCanon at the same K and to the same algorithm at the previous K. --slope KEY: least-squares
slope of log(final stationarity) on log(KEY), its R^2 and, with several seeds, the spread of the
per-seed slopes. A run folder that cannot be read is skipped with one line on stderr.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from fedprox_cli import report


def parse(argv):
    p = argparse.ArgumentParser(prog="tables.py", description=__doc__.split("\n\n")[0])
    p.add_argument("results", nargs="+", type=Path, help="run folders or folders holding them")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--table6", action="store_true", help="accuracy table (the default)")
    mode.add_argument("--table5", action="store_true", help="computation-time table")
    mode.add_argument("--slope", metavar="KEY", help="slope of log final stationarity vs log KEY")
    p.add_argument("--metric", help="metric of --table6 (default test_acc) or --slope "
                   "(default stationarity)")
    p.add_argument("--column", default="algorithm.name", help="config key of the table's columns")
    report.add_arguments(p)
    return p.parse_args(argv)


def slope_table(fits: list[dict], key: str, metric: str) -> str:
    body = [[f["label"], f"{f['slope']:.3f}", f"{f['r2']:.3f}", report.seed_interval(f) or "-",
             "; ".join(f"{report.fmt(p[0])}: {p[4]}" for p in f["points"])] for f in fits]
    return report.markdown(["group", f"slope of log final {metric} vs log {key}", "R²",
                            "per-seed slopes", f"final {metric} per {key}"], body)


def run(args, warn) -> int:
    runs = report.load(args.results, args.where, warn)
    metric = ("time_s" if args.table5 else args.metric
              or ("stationarity" if args.slope else "test_acc"))
    runs = report.having(runs, [metric], warn)
    report.note_runs(runs, metric, args.final, warn)
    if args.table5:
        print(report.time_table(runs, column=args.column, final=args.final))
    elif args.slope:
        print(slope_table(report.slope(runs, args.slope, metric, args.final, warn), args.slope, metric))
    else:
        print(report.accuracy_table(runs, metric, args.column, args.final))
    return 0


def main(argv=None) -> int:
    args = parse(argv)
    return report.script("tables.py", lambda warn: run(args, warn))


if __name__ == "__main__":
    sys.exit(main())
