"""The cost of a run's data fingerprint (fedprox_cli/runs/provenance.py) against loading the data.

    python scripts/bench_fingerprint.py --dataset fmnist --repeat 3

Loads the data set as a run does (``data.load``), then fingerprints the loaded arrays
(``provenance.of_data``, SHA-256 of their bytes) and a partition of n clients
(``provenance.of_partition``); prints the best of ``--repeat`` times of each and the
fingerprint's share of the load, measured in the same process.
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def best(f, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        out = f()
        times.append(time.perf_counter() - start)
    return min(times), out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="fmnist")
    ap.add_argument("--root", default=None, help="data.root (default: the default root)")
    ap.add_argument("--n", type=int, default=100, help="clients of the partition fingerprinted")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args(argv)

    from fedprox_cli import data
    from fedprox_cli.runs import provenance

    load_s, ds = best(lambda: data.load(a.dataset, a.root), a.repeat)
    data_s, _ = best(lambda: provenance.of_data(ds), a.repeat)
    clients = np.array_split(np.random.default_rng(0).permutation(len(ds.train_y)), a.n)
    part_s, _ = best(lambda: provenance.of_partition(clients), a.repeat)
    mb = (
        sum(t.numel() * t.element_size() for t in (ds.train_x, ds.train_y, ds.test_x, ds.test_y))
        / 2**20
    )
    print(f"{a.dataset}: {mb:.1f} MB of loaded arrays")
    print(f"load            {load_s:8.3f} s")
    print(
        f"fingerprint     {data_s:8.3f} s  ({mb / data_s:.0f} MB/s; {data_s / load_s:.2f} x the load)"
    )
    print(f"partition (n={a.n}) {part_s:8.4f} s")


if __name__ == "__main__":
    main()
