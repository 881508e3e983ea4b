#!/usr/bin/env python
"""Mean +- std tables of run folders, printed as markdown.

  python scripts/tables.py results/sweeps/fedcanon_table6* --table6   # FedCanon Table VI layout
  python scripts/tables.py results/sweeps/fedcanon_table5 --table5    # FedCanon Table V layout
  python scripts/tables.py results/sweeps/fednmap_fig3 --slope n      # FedNMap Fig. 3b slope

--table6 (default): final test accuracy (or --metric) per dataset / model / partition row and
algorithm column, best of each row in bold. --table5: total training time at the last round per
K row and algorithm column, with ratios to FedCanon at the same K and to the same algorithm at
the previous K. --slope KEY: least-squares slope of log(final stationarity) on log(KEY).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from fedprox_cli import report
from fedprox_cli.errors import UserError


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="tables.py", description=__doc__.split("\n\n")[0])
    p.add_argument("results", nargs="+", type=Path, help="run folders or folders holding them")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--table6", action="store_true", help="accuracy table (the default)")
    mode.add_argument("--table5", action="store_true", help="computation-time table")
    mode.add_argument("--slope", metavar="KEY", help="slope of log final stationarity vs log KEY")
    p.add_argument("--metric", help="metric of --table6 (default test_acc) or --slope "
                   "(default stationarity)")
    p.add_argument("--column", default="algorithm.name", help="config key of the table's columns")
    p.add_argument("--where", action="append", default=[], metavar="KEY=VALUE",
                   help="keep runs whose config has KEY=VALUE; repeatable")
    args = p.parse_args(argv)
    try:
        runs = report.load(args.results, args.where)
        for r in report.unfinished(runs):
            print(f"tables.py: note: {r.path} is {r.status}", file=sys.stderr)
        if args.table5:
            print(report.time_table(runs, column=args.column))
        elif args.slope:
            metric = args.metric or "stationarity"
            print(report.markdown(["group", f"slope of log final {metric} vs log {args.slope}"],
                                  [[f["label"], f"{f['slope']:.3f}"]
                                   for f in report.slope(runs, args.slope, metric)]))
        else:
            print(report.accuracy_table(runs, args.metric or "test_acc", args.column))
    except UserError as e:
        print(f"tables.py: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
