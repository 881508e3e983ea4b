r"""fedrun-table: tables of run folders, final metrics as mean ± std over seeds (Markdown, LaTeX, CSV).

  fedrun-table results/sweeps/fedcanon_fig2 --column algorithm --rows partition
  fedrun-table S --metric test_acc --metric train_loss --column none --precision 3 --out t.tex
  fedrun-table results/sweeps/fedcanon_table6* --preset table6      # FedCanon Table VI layout
  fedrun-table results/sweeps/fedcanon_table5 --preset table5       # FedCanon Table V layout
  fedrun-table results/sweeps/fednmap_fig3 --slope n                # FedNMap Fig. 3b slope

Runs are pooled only across seeds: a cell is one group of runs whose configs differ only in
seeds. Rows are named by --rows KEY... (default: the keys that, with --column, tell the groups
apart); --column KEY (default algorithm.name; none: no column key) makes one column per value
(and --metric, repeatable); methods read as the papers print them (FedCanon, ZA1: each
algorithm's display_name). A cell reads 0.8100 ± 0.0100, and accuracy in percent, "82.5 ± 1.2"
with "(%)" after its name: the decimals that give its largest std over seeds two significant
digits, one decimal for a single seed (the CSV keeps the fraction 0-1). How many seeds a cell
holds is said below the table (or in each cell when they differ); a diverged or unfinished run is
left out of the mean, counted in its cell ("(2 seeds; diverged 1 of 3)") and named on stderr. The best mean is
bold (the lowest for losses, stationarity and time) only where it beats the runner-up by more
than the larger of their stds, as the note under the table says: across the column values of
each row with a column key, else down each column (--bold). --format md|latex|csv (default: by the --out suffix
.md/.tex/.csv, else md); LaTeX is a booktabs table (it needs \usepackage{booktabs}): one header
row (under a row of metrics spanning their columns when there are several with a column key),
bold as \textbf, the note as its caption saying what is shown; CSV one row per cell with mean,
std, n. --slope KEY: least-squares slope of log(final stationarity) on log(KEY),
its R² and, with several seeds, the spread of the per-seed slopes (Markdown). A run folder that
cannot be read is skipped with one line on stderr; bad input is one line and exit code 2.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from ..analysis import groups, results, stats, table
from ..common import metric_table as mt
from ..common import streams
from ..common.files import atomic_write_text
from . import options, usage

PROG = "fedrun-table"


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = usage.parser(PROG, __doc__)
    p.add_argument("results", nargs="+", type=Path, help="run folders or folders holding them")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument(
        "--preset",
        choices=sorted(table.PRESETS),
        help="a paper's layout: table6 (final test accuracy per row and algorithm; "
        "FedCanon Table VI), table5 (training time per K and algorithm with the "
        "ratios to FedCanon and to the previous K; Table V); other options override it",
    )
    mode.add_argument("--slope", metavar="KEY", help="slope of log final stationarity vs log KEY")
    p.add_argument(
        "--metric",
        action="append",
        metavar="M",
        help=options.metrics_help(mt.TEST_ACC) + "; repeatable",
    )
    p.add_argument(
        "--column",
        help="config key whose values are the columns (default "
        "algorithm.name; 'none': one column per metric)",
    )
    p.add_argument(
        "--rows",
        nargs="+",
        metavar="KEY",
        help="config keys naming the rows (default: the keys that tell the groups apart)",
    )
    _output_arguments(p)
    options.add_arguments(p)
    args = p.parse_args(argv)
    if args.precision is not None and args.precision < 0:
        p.error("--precision must be >= 0")
    return args


def _output_arguments(p: argparse.ArgumentParser) -> None:
    """How the table is written: precision, bold, format, where, labels."""
    p.add_argument(
        "--precision",
        type=int,
        metavar="P",
        help="decimals of mean and std, as shown (default 4; 3 significant digits for "
        "stationarity; accuracy in percent: the decimals its spread over seeds supports)",
    )
    p.add_argument(
        "--bold",
        choices=table.BOLD,
        help="where the best mean is bold (default auto: "
        "across the column values of each row with a column key, else down each column)",
    )
    p.add_argument(
        "--format",
        choices=sorted(set(table.FORMATS.values())),
        help="md, latex or csv (default: by --out's suffix, else md)",
    )
    p.add_argument("--out", type=Path, help="write the table here (default: print it)")
    options.add_label_arguments(p, "shown values, keys and metrics (not in CSV)")


def slope_table(fits: list[stats.Fit], key: str, metric: str) -> str:
    body = [
        [
            f["label"],
            f"{f['slope']:.3f}",
            f"{f['r2']:.3f}",
            stats.seed_interval(f) or "-",
            "; ".join(f"{groups.fmt(p[0])}: {p[4]}" for p in f["points"]),
        ]
        for f in fits
    ]
    return table.markdown(
        [
            "group",
            f"slope of log final {metric} vs log {key}",
            "R²",
            "per-seed slopes",
            f"final {metric} per {key}",
        ],
        body,
    )


def spec(args: argparse.Namespace) -> table.Spec:
    s = table.preset(
        args.preset or "table6",
        metrics=args.metric,
        rows=args.rows,
        precision=args.precision,
        bold=args.bold,
        final=args.final,
        names=options.names(args),
    )
    if args.column:
        s.column = None if args.column == "none" else args.column
    return s


def run(args: argparse.Namespace, warn: Callable[[str], None]) -> int:
    runs = results.load(args.results, args.where, warn)
    if args.slope:
        metric = (args.metric or [mt.STATIONARITY.name])[0]
        runs = results.having(runs, [metric], warn)
        results.note_runs(runs, metric, args.final, warn)
        text = (
            slope_table(stats.slope(runs, args.slope, metric, args.final, warn), args.slope, metric)
            + "\n"
        )
    else:
        s = spec(args)
        runs = results.having(runs, s.metrics, warn)
        for m in s.metrics:
            results.note_runs(runs, m, args.final, warn)
        label = f"tab:{args.out.stem}" if args.out is not None else ""
        text = table.render(runs, s, table.output_format(args.out, args.format), label)
    if args.out is None:
        streams.out(text.removesuffix("\n"))
    else:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(args.out, text)
        streams.out(f"wrote {args.out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    return options.script(PROG, lambda warn: run(args, warn))
