#!/usr/bin/env python
"""Per-round prox calls and per-client floats exchanged, from the counters every run records
(FedCanon Table III's columns), printed as markdown.

  python scripts/counters.py results/reproduction/fedcanon_fig3_T10 results/reproduction/fedcanon_fig2

One row per algorithm, n, K and participation (runs differing in anything else, seeds included,
give the same counts; the first run read stands for them): prox calls per round
(``prox_calls`` / rounds) and floats per participating client per round up and down
(``bytes_up``, ``bytes_down`` / (4 bytes x d x clients x rounds), d from the run's
``summary.json``; a compressed uplink counts 8 bytes per sent element, so its floats are
4-byte equivalents). Counts are read at the last recorded round.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from fedprox_cli.analysis import groups, results, table
from fedprox_cli.analysis.run import Run
from fedprox_cli.cli import options

KEYS = ("algorithm.name", "n", "K", "participation", "compressor.name", "compressor.ratio")


def parse(argv):
    p = argparse.ArgumentParser(prog="counters.py", description=__doc__.split("\n\n")[0])
    p.add_argument("results", nargs="+", type=Path, help="run folders or folders holding them")
    options.add_arguments(p)
    return p.parse_args(argv)


def row(run: Run) -> list:
    last = run.metrics.iloc[-1]
    d = json.loads((run.path / "summary.json").read_text())["dimension"]
    clients = round(run.config["n"] * run.config.get("participation", 1.0))
    per = 4 * d * clients * last["round"]
    up, down = last["bytes_up"] / per, last["bytes_down"] / per
    return [
        *(groups.fmt(run.config.get(k, "-")) for k in KEYS),
        f"{d:,}",
        str(int(last["round"])),
        f"{last['prox_calls'] / last['round']:g}",
        f"{up:.4g} d",
        f"{down:.4g} d",
        f"{up + down:.4g} d",
    ]


def run(args, warn) -> int:
    runs = results.having(
        results.load(args.results, args.where, warn), ["prox_calls", "bytes_up", "bytes_down"], warn
    )
    seen = {}
    for r in runs:
        if len(r.metrics) and r.metrics["round"].iloc[-1] > 0:
            seen.setdefault(tuple(r.config.get(k) for k in KEYS), r)
    body = [row(r) for _, r in sorted(seen.items(), key=lambda kv: groups.order(kv[0]))]
    print(
        table.markdown(
            [groups.short(k) for k in KEYS]
            + ["d", "rounds", "prox / round", "floats up / client / round", "down", "total"],
            body,
        )
    )
    return 0


def main(argv=None) -> int:
    args = parse(argv)
    return options.script("counters.py", lambda warn: run(args, warn))


if __name__ == "__main__":
    sys.exit(main())
