#!/usr/bin/env python
"""Seed by seed: which method is best in a metric, per panel, or whether a metric improves along a
setting (an ordering counts only where it holds in every seed), as markdown.
Best is lowest where lower is better (``common.metric_table``: losses, stationarity), highest for
the others (test accuracy, Hoyer sparsity).

  python scripts/per_seed.py results/reproduction/fednmap_fig2_n50_100_K20_T200 --panels K n \\
      --method algorithm.name --best fednmap --y stationarity --from-round 50 --tail 180
  python scripts/per_seed.py results/reproduction/fednmap_fig3 ... --order n --final tail

``--best``: one row per panel (the ``--panels`` keys): how many seeds have ``--best`` best at the
last evaluation; in each seed, at how many evaluations from ``--from-round`` on it is best; and
each method's tail mean (evaluations from round ``--tail`` on) per seed. A seed enters a panel only
when every method has a finished run of it there.

``--order KEY``: does the final value (``--final``) improve (fall, or rise for a higher-is-better
metric) as KEY grows? One row per seed with every
value of KEY (its values, whether it improves at every step, its inversions), then one row per
neighbouring pair of values: in how many of the seeds holding both the larger value ends better,
and the gap of the seed means against the seeds' standard deviations and against the standard
error of the per-seed differences (a paired comparison: each seed's runs share its data split).

``--reach VALUE``: one row per method and seed, finished or not: how the run ended (a diverged
run's last evaluation with a finite objective), its last and best ``--y``, and the round and
``--x`` at which ``--y`` first reached VALUE (FedCEF Figs. 3-4: accuracy against bytes).

  python scripts/per_seed.py results/reproduction/fedcef_fig3_4_fmnist_T65* --method algorithm \\
      --reach 0.8 --y test_acc --x bytes
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from fedprox_cli.analysis import groups, results, table
from fedprox_cli.analysis.run import Run, status_text
from fedprox_cli.cli import options
from fedprox_cli.common import metric_table as mt
from fedprox_cli.common.errors import require


def parse(argv):
    p = argparse.ArgumentParser(prog="per_seed.py", description=__doc__.split("\n\n")[0])
    p.add_argument("results", nargs="+", type=Path, help="run folders or folders holding them")
    p.add_argument(
        "--panels", nargs="*", default=["K", "n"], help="config keys of a panel (none: one panel)"
    )
    p.add_argument(
        "--method",
        nargs="+",
        default=["algorithm.name"],
        help="the config keys that name a method (algorithm: the config-group choice)",
    )
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--best", help="the method whose lead is counted")
    mode.add_argument(
        "--order", metavar="KEY", help="the config key along which the metric should fall"
    )
    mode.add_argument(
        "--reach",
        type=float,
        metavar="VALUE",
        help="per method and seed: how the run ended, and the first --x at which --y reaches VALUE",
    )
    p.add_argument(
        "--y",
        default=mt.STATIONARITY.name,
        help="the metrics column (best: lowest for losses and stationarity, else highest; "
        "with --reach, the value to reach from below)",
    )
    p.add_argument(
        "--x", default="bytes", help="with --reach: round, time or bytes (communicated, in MB)"
    )
    p.add_argument("--from-round", type=int, default=50, help="count leads from this round on")
    p.add_argument(
        "--tail", type=int, default=180, help="tail means over evaluations from this round on"
    )
    options.add_arguments(p)
    return p.parse_args(argv)


def panel_row(panel: tuple, runs: list[Run], methods: list[str], args) -> list[str] | None:
    """The markdown cells of one panel, or None when no seed has every method (``methods``,
    the best first)."""
    by_seed: dict[tuple, dict[str, Run]] = {}
    for r in runs:
        by_seed.setdefault(r.seed, {})[method_of(r, args.keys)] = r
    seeds = sorted(s for s, got in by_seed.items() if set(got) == set(methods))
    if not seeds:
        return None
    last, leads, tails = 0, [], {m: [] for m in methods}
    sign = mt.metric(args.y).direction.sign
    for s in seeds:
        got = by_seed[s]
        rounds = got[args.best].metrics["round"].to_numpy()
        curves = {m: got[m].column(args.y) for m in methods}
        best = (
            np.argmin(sign * np.stack([curves[m] for m in methods]), axis=0) == 0
        )  # the best is first
        last += bool(best[-1])
        counted = rounds >= args.from_round
        leads.append(f"{int(best[counted].sum())}/{int(counted.sum())}")
        for m in methods:
            tails[m].append(
                float(np.mean(curves[m][got[m].metrics["round"].to_numpy() >= args.tail]))
            )
    digits = telling_digits([[tails[m][i] for m in methods] for i in range(len(seeds))])
    return [
        ", ".join(map(groups.fmt, panel)),
        str(len(seeds)),
        f"{last} of {len(seeds)}",
        ", ".join(leads),
        " / ".join(", ".join(f"{v:.{digits - 1}e}" for v in tails[m]) for m in methods),
    ]


def telling_digits(groups: list[list[float]], most: int = 6) -> int:
    """The fewest significant digits (2 at least) that print the different values of each group
    differently (a seed's methods: Hoyer sparsities of 0.5048 and 0.5033 need 3)."""
    for digits in range(2, most):
        if all(len({f"{v:.{digits - 1}e}" for v in g}) == len(set(g)) for g in groups):
            return digits
    return most


def method_of(r: Run, keys: list[str]) -> str:
    """The run's method: its value of the one key, else ``k=v, ...`` of several."""
    if len(keys) == 1:
        return str(r.config.get(keys[0]))
    return ", ".join(f"{groups.short(k)}={groups.fmt(r.config.get(k))}" for k in keys)


def seed_of(r: Run) -> str:
    """The run's seed as a cell (``seed`` and ``partition.seed`` shown once where they agree)."""
    return ", ".join(dict.fromkeys(groups.fmt(v) for _, v in r.seed))


def order_tables(runs: list[Run], args) -> str:
    """The per-seed and per-pair tables of ``--order``."""
    key = groups.config_key(runs, args.order)
    finals: dict[str, dict] = {}
    for r in runs:
        finals.setdefault(seed_of(r), {})[r.config[key]] = r.final(args.y, args.final)
    values = sorted({v for got in finals.values() for v in got}, key=lambda v: groups.order((v,)))
    name = groups.short(key)
    way = mt.metric(args.y).direction
    require(
        any(len(got) > 1 for got in finals.values()),
        f"no seed has runs at two values of {name}: nothing to order",
    )
    whole = {s: got for s, got in finals.items() if set(got) == set(values)}
    seeds = []
    for s, got in sorted(whole.items()):
        ys = [got[v] for v in values]
        inversions = [
            f"{name} = {groups.fmt(b)} not {way.beyond} {groups.fmt(a)}"
            for a, b, ya, yb in zip(values, values[1:], ys, ys[1:])
            if not way.sign * yb < way.sign * ya
        ]
        seeds.append(
            [
                s,
                ", ".join(f"{y:.2e}" for y in ys),
                "yes" if not inversions else "no",
                "; ".join(inversions) or "-",
            ]
        )
    falls = sum(row[2] == "yes" for row in seeds)
    pairs = []
    for a, b in zip(values, values[1:]):
        both = [(got[a], got[b]) for got in finals.values() if a in got and b in got]
        if not both:
            continue
        ya, yb = way.sign * np.array(both).T  # better is smaller
        sd = (lambda v: float(np.std(v, ddof=1))) if len(both) > 1 else (lambda v: 0.0)
        se = sd(ya - yb) / np.sqrt(len(both))
        gap = ya.mean() - yb.mean()  # positive: the larger value of KEY is better
        pairs.append(
            [
                f"{groups.fmt(a)} → {groups.fmt(b)}",
                f"{int(np.sum(yb < ya))} of {len(both)}",
                f"{gap:.1e} ± {se:.1e}" + (f" ({gap / se:.1f} s.e.)" if se else ""),
                f"{sd(ya):.1e}, {sd(yb):.1e}",
            ]
        )
    return "\n\n".join(
        [
            f"{args.y} ({args.final}) {way.improves} at every step of {name} in {falls} of {len(seeds)} seeds with every "
            f"{name} ({', '.join(map(groups.fmt, values))}).",
            table.markdown(
                [
                    "seed",
                    f"final {args.y} ({args.final}) at {name} = {', '.join(map(groups.fmt, values))}",
                    f"{way.improves} at every step",
                    "inversions",
                ],
                seeds,
            ),
            table.markdown(
                [
                    f"{name} step",
                    f"seeds where the larger ends {way.ends}",
                    "gap of the means ± standard error of the per-seed gaps",
                    "std of the seeds (smaller, larger)",
                ],
                pairs,
            ),
        ]
    )


def reach_row(r: Run, args) -> list[str]:
    """One run's cells of ``--reach``: method, seed, how it ended, last and best --y, first reach."""
    y, x, rounds = r.column(args.y), r.column(args.x), r.metrics["round"].to_numpy()
    ok = np.isfinite(y) & (np.isfinite(r.column(o)) if r.has(o := mt.OBJECTIVE.name) else True)
    ended = status_text(r.status)
    if not ok.any():
        return [method_of(r, args.keys), seed_of(r), ended, "-", "-", "not reached"]
    last = np.flatnonzero(ok)[-1]
    if r.status != "finished":
        ended += f" (last finite evaluation: round {rounds[last]})"
    hit = np.flatnonzero(ok & (y >= args.reach))
    if not hit.size:
        reached = "not reached"
    else:
        i = hit[0]
        reached = f"round {rounds[i]}, " + (
            f"{x[i] / 1e6:,.0f} MB" if args.x == "bytes" else f"{x[i]:g}"
        )
    return [
        method_of(r, args.keys),
        seed_of(r),
        ended,
        f"{y[last]:.4f}",
        f"{np.max(y[ok]):.4f}",
        reached,
    ]


def reach_table(runs: list[Run], args) -> str:
    """The table of ``--reach``: one row per method and seed."""
    runs = sorted(
        runs, key=lambda r: (method_of(r, args.keys), groups.order([v for _, v in r.seed]))
    )
    ended: dict[str, list[bool]] = {}
    for r in runs:
        ended.setdefault(method_of(r, args.keys), []).append(r.status == "finished")
    finished = "; ".join(f"{m}: {sum(f)} of {len(f)}" for m, f in ended.items())
    return "\n\n".join(
        [
            f"finished runs per method: {finished}.",
            table.markdown(
                [
                    "method",
                    "seed",
                    "ended",
                    f"last {args.y}",
                    f"best {args.y}",
                    f"first {args.y} ≥ {args.reach:g} at",
                ],
                [reach_row(r, args) for r in runs],
            ),
        ]
    )


def run(args, warn) -> int:
    runs = results.load(args.results, args.where, warn)
    args.keys = [groups.config_key(runs, k) for k in args.method]
    for k in args.keys:
        require(any(k in r.config for r in runs), f"no run has a config key {groups.short(k)!r}")
    if args.reach is not None:
        print(reach_table(runs, args))
        return 0
    runs = [r for r in runs if r.status == "finished"]
    if args.order:
        print(order_tables(runs, args))
        return 0
    keys = [groups.config_key(runs, k) for k in args.panels]
    panels = groups.split(runs, keys) if keys else {"": runs}
    methods = sorted({method_of(r, args.keys) for r in runs}, key=lambda m: (m != args.best, m))
    rows = []
    for runs_of in panels.values():
        panel = tuple(runs_of[0].config.get(k) for k in keys)
        got = panel_row(panel, runs_of, methods, args)
        if got is not None:
            rows.append((panel, got))
    best = mt.metric(args.y).direction.best
    print(
        table.markdown(
            [
                f"({', '.join(args.panels)})",
                "seeds",
                f"{args.best} {best} at the last evaluation",
                f"{args.best} {best} from round {args.from_round} on (evaluations, per seed)",
                f"tail mean from round {args.tail}: {' / '.join(methods)} (per seed)",
            ],
            [r for _, r in sorted(rows, key=lambda pr: groups.order(pr[0]))],
        )
    )
    return 0


def main(argv=None) -> int:
    args = parse(argv)
    return options.script("per_seed.py", lambda warn: run(args, warn))


if __name__ == "__main__":
    sys.exit(main())
