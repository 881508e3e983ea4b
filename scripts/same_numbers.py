"""Every algorithm's numbers, to compare two versions of the code bit for bit.

``python scripts/same_numbers.py OUT`` runs a fixed matrix of small ``fedrun`` runs (each of the
13 algorithms, and the paths around them: both engines, a seed batch, partial participation, a
compressor, float64, each regularizer) into ``OUT/<case>/``. ``--against REF`` then compares each
case's ``metrics.csv`` (and each seed's, for a batch) with ``REF``'s, every column but the
wall-clock ones, bit for bit, and prints one line per case; the exit code is 1 if any differs.

A refactoring is behaviour-preserving on these paths when::

    git stash; python scripts/same_numbers.py /tmp/before; git stash pop
    python scripts/same_numbers.py /tmp/after --against /tmp/before
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pandas as pd

BASE = ["dataset=digits", "n=4", "K=2", "T=4", "eval_every=2", "B=16", "checkpoint_every=0"]
ALGORITHMS = [
    "fedavg",
    "fedcanon",
    "fedcanon2",
    "fedcef",
    "fednmap",
    "fedmid",
    "fedda",
    "za1",
    "za2",
    "scaffold",
    "scaffnew",
    "feddr",
    "fedadmm",
]
SMOOTH_ONLY = {"fedavg", "scaffold"}  # defined for h = 0 only


def alg(a: str) -> list[str]:
    return [f"algorithm={a}"] + (["regularizer=none"] if a in SMOOTH_ONLY else [])


CASES = {
    **{f"{a}_linear": [*alg(a), "model=linear"] for a in ALGORITHMS},
    **{f"{a}_mlp_loop": [*alg(a), "model=mlp", "engine=loop"] for a in ALGORITHMS},
    **{f"{a}_mlp_vmap": [*alg(a), "model=mlp", "engine=vmap"] for a in ALGORITHMS},
    "fedcanon_seeds2": ["algorithm=fedcanon", "model=mlp", "seeds=2"],
    "fedavg_participation": [*alg("fedavg"), "model=linear", "participation=0.5"],
    "fedcef_topk": ["algorithm=fedcef", "model=mlp", "compressor=topk"],
    "fedcef_qsgd": ["algorithm=fedcef", "model=linear", "compressor=qsgd"],
    "fedcanon_float64": ["algorithm=fedcanon", "model=mlp", "dtype=float64"],
    **{
        f"fedcanon_{h}": ["algorithm=fedcanon", "model=linear", f"regularizer={h}"]
        for h in ["none", "elastic_net", "mcp", "scad"]
    },
}
CLOCKS = {"time_s", "wall_s", "train_time_s", "eval_time_s"}


def fedrun() -> str:
    return str(Path(sys.executable).with_name("fedrun"))


def run(out: Path, names: list[str]) -> dict[str, str]:
    """Run each case into ``out/<case>``; a case that fails is reported, not fatal."""
    failed = {}
    for name in names:
        folder = out / name
        if (folder / "summary.json").exists():
            continue
        p = subprocess.run(
            [fedrun(), *BASE, *CASES[name], f"hydra.run.dir={folder}"],
            capture_output=True,
            text=True,
        )
        if p.returncode not in (0, 1):  # 1: diverged, its rows still compared
            failed[name] = (p.stdout + p.stderr).strip().splitlines()[-1:]
    return failed


def metrics(folder: Path) -> dict[str, pd.DataFrame]:
    files = sorted(folder.glob("metrics.csv")) + sorted(folder.glob("seed_*/metrics.csv"))
    return {str(f.relative_to(folder)): pd.read_csv(f) for f in files}


def compare(out: Path, ref: Path, names: list[str]) -> list[str]:
    """One line per case: same, or what differs."""
    lines = []
    for name in names:
        a, b = metrics(out / name), metrics(ref / name)
        if not a or a.keys() != b.keys():
            lines.append(f"{name}: DIFFERENT files {sorted(a)} vs {sorted(b)}")
            continue
        diffs = []
        for f in a:
            x, y = a[f], b[f]
            cols = [c for c in y.columns if c not in CLOCKS]
            if list(x.columns) != list(y.columns) or x.shape != y.shape:
                diffs.append(f"{f}: columns/shape {x.shape} vs {y.shape}")
            elif not x[cols].equals(y[cols]):
                bad = [c for c in cols if not x[c].equals(y[c])]
                diffs.append(f"{f}: columns {bad}")
        lines.append(f"{name}: " + ("same" if not diffs else "DIFFERENT " + "; ".join(diffs)))
    return lines


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path)
    p.add_argument("--against", type=Path, help="a folder this script wrote with another version")
    p.add_argument("--cases", nargs="*", default=list(CASES), choices=list(CASES))
    args = p.parse_args()
    failed = run(args.out, args.cases)
    for name, last in failed.items():
        print(f"{name}: run failed: {' '.join(last)}")
    if args.against is None:
        return 1 if failed else 0
    lines = compare(args.out, args.against, [c for c in args.cases if c not in failed])
    print("\n".join(lines))
    same = sum(line.endswith(": same") for line in lines)
    print(f"{same} of {len(args.cases)} cases bit-identical (every column but the clocks)")
    return 0 if same == len(args.cases) else 1


if __name__ == "__main__":
    sys.exit(main())
