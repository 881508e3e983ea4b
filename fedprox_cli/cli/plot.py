"""fedrun-plot: plot run folders, one curve per group of runs that differ only in seeds (mean +- std band).

  fedrun-plot results/sweeps/fedcanon_fig2 --y test_acc --panels partition
  fedrun-plot results/sweeps/fedcef_fig1_2 --x bytes --y train_loss --out fig1.pdf --style paper
  fedrun-plot S --label fedcanon=FedCanon --label fedavg=FedAvg --title "Fashion-MNIST"
  fedrun-plot results/sweeps/fednmap_fig3 --slope n      # final stationarity vs log n
  fedrun-plot --partition results/runs/<run>             # a run's client partition

Each RESULTS argument is a run folder or a folder searched for them (a sweep). Runs are pooled
only across seeds: every other config difference is a separate curve. A diverged or unfinished
run is left out of its curve's mean, drawn alone and marked at its last finite point, and named
on stderr; a run folder that cannot be read is skipped with one line on stderr. A legend entry
names only what tells its curve apart: the method as the papers print it (its class's
display_name) where methods differ, the parameters that differ between curves in which they mean
the same (FedProx (μ = 0.01); a parameter is known by its name and the class declaring it), then
the other keys that differ; --label renames only what it names (one that names nothing is an
error). The legend sits below the axes in as many columns as fit the width (--style paper: 3.4
in per panel); under it the caption, one sentence: each method with its own parameters, the
settings all curves share, the seed count ("3 seeds") and what a band is (± 1 std; clipped to a
log axis's range), also written into the file's metadata and beside it (fig.pdf ->
fig.caption.txt); --no-caption leaves it out of the image. Round ticks sit at evaluations. Bytes
read in MB or GB; accuracy in percent, as fedrun-table shows it. PDFs embed TrueType fonts
(Type 42). --out writes the format
its extension names (.png, .pdf, .svg: vector) and creates missing folders. Bad input is one line
on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from ..analysis import results, stats
from ..analysis.curves import plot_groups
from ..analysis.plotting import plt, styled
from ..analysis.run import X_AXES
from ..analysis.slope_figure import plot_slope
from ..common import metric_table as mt
from ..common import run_files, streams
from ..common.errors import UserError, require
from . import options, usage

PROG = "fedrun-plot"


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = usage.parser(PROG, __doc__)
    p.add_argument("results", nargs="*", type=Path, help="run folders or folders holding them")
    p.add_argument(
        "--x",
        choices=sorted(X_AXES),
        default=mt.ROUND.name,
        help="the x axis: "
        + ", ".join(f"{x} ({label})" for x, label in sorted(X_AXES.items()))
        + f"; default {mt.ROUND.name}",
    )
    p.add_argument("--y", help=options.metrics_help(mt.TEST_ACC))
    options.add_arguments(p)
    p.add_argument(
        "--panels",
        action="append",
        default=[],
        metavar="KEY",
        help="one subplot per value of KEY (a dotted key or a config group); repeatable",
    )
    p.add_argument(
        "--logy",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="log-scale y (default: for "
        + ", ".join(n for n in mt.names() if mt.metric(n).log)
        + " only, as the papers)",
    )
    p.add_argument(
        "--slope",
        metavar="KEY",
        help="plot final --y (default stationarity) against "
        "KEY on log-log axes and print the fitted slope (FedNMap Figs. 3b/4b: n or K)",
    )
    p.add_argument(
        "--partition",
        metavar="RUN",
        type=Path,
        help="plot the client partition of one run folder instead",
    )
    p.add_argument(
        "--out",
        type=Path,
        help="output file, .png, .pdf or .svg (default: "
        "plot_<y>_vs_<x>.png in the first RESULTS); missing folders are created",
    )
    _figure_arguments(p)
    args = p.parse_args(argv)
    if not args.results and args.partition is None:
        p.error("give RESULTS folders or --partition RUN")
    return args


def _figure_arguments(p: argparse.ArgumentParser) -> None:
    """How the figure looks: its title, labels, style, panel size and font size."""
    p.add_argument(
        "--title",
        default="",
        type=streams.as_text,
        help="a title drawn above the figure (default none)",
    )
    p.add_argument(
        "--caption",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="draw the caption under the legend (default); --no-caption leaves it to the "
        "paper's own caption: it is still written beside the figure (fig.caption.txt) and "
        "into the file's metadata",
    )
    options.add_label_arguments(p, "legend entries and panel titles")
    p.add_argument(
        "--style",
        help="a matplotlib style sheet: paper (shipped: serif, 3.4x2.5 in per "
        "panel, 300 dpi), a .mplstyle file or a matplotlib style name",
    )
    p.add_argument(
        "--size",
        metavar="W,H",
        help="size of one panel in inches (default 5.6,4.2, or the style's figure.figsize)",
    )
    p.add_argument("--font-size", type=float, metavar="PT", help="base font size in points")


def panel_size(args: argparse.Namespace) -> tuple[float, float] | None:
    if args.size:
        try:
            w, h = (float(v) for v in args.size.split(","))
        except ValueError:
            raise UserError(f"--size takes W,H in inches, got {args.size!r}") from None
        require(w > 0 and h > 0, f"--size must be positive, got {args.size!r}")
        return w, h
    return tuple(plt.rcParams["figure.figsize"]) if args.style else None


def plot_partition(run: Path, out: Path) -> None:
    try:
        from ..analysis.run_plots import plot_partition as draw
    except ImportError:
        raise UserError(
            "--partition needs fedprox_cli.analysis.run_plots.plot_partition, which this "
            "installation does not have"
        ) from None
    draw(run, out)


def run(args: argparse.Namespace, warn: Callable[[str], None]) -> int:
    with styled(args.style, args.font_size):
        return draw(args, warn)


def draw(args: argparse.Namespace, warn: Callable[[str], None]) -> int:
    if args.partition is not None:
        out = args.out or args.partition / run_files.PARTITION_FIGURE
        plot_partition(args.partition, out)
        streams.out(f"wrote {out}")
        return 0
    runs = results.load(args.results, args.where, warn)
    base = args.results[0] if args.results[0].is_dir() else Path(".")
    if args.slope:
        metric = args.y or mt.STATIONARITY.name
        runs = results.having(runs, [metric], warn)
        results.note_runs(runs, metric, args.final, warn)
        out = args.out or base / f"slope_{metric}_vs_{args.slope}.png"
        fits, text = plot_slope(
            runs,
            args.slope,
            out,
            metric,
            args.final,
            warn,
            args.title,
            options.names(args),
            panel_size(args),
        )
        for f in fits:
            seeds = stats.seed_interval(f)
            streams.out(
                f"{f['label']}: slope of log final {mt.metric(metric).words} vs log {args.slope} = "
                f"{f['slope']:.3f}"
                f" (R² {f['r2']:.3f}" + (f"; per seed {seeds})" if seeds else ")")
            )
    else:
        y = args.y or mt.TEST_ACC.name
        runs = results.having(runs, [args.x, y], warn)
        results.note_runs(runs, None, None, warn)
        out = args.out or base / f"plot_{y}_vs_{args.x}.png"
        labels, text = plot_groups(
            runs,
            out,
            args.x,
            y,
            args.logy,
            args.title,
            args.panels,
            warn,
            options.names(args),
            panel_size(args),
            drawn_caption=args.caption,
        )
        streams.out("legend: " + "; ".join(labels))  # what each curve is, said as such
    streams.out(f"caption: {text}")
    streams.out(f"wrote {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    return options.script(PROG, lambda warn: run(args, warn))
