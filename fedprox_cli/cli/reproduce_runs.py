"""``fedrun-reproduce list``, ``plan``, ``run`` and ``record``: each claim's word, the runs still
missing, launching them, and recording the digests of their evidence."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from ..common import streams, thread_room
from ..common.errors import EXIT, require
from .reproduce_read import PROG, build, chosen, findings, remembered, warn

LIST_HEADER = ("claim", "figure or table", "word", "data / T / seeds / device")


def list_claims(args: argparse.Namespace) -> int:
    from ..claims import render

    picked = chosen(args)
    streams.out(f"{LIST_HEADER[0]:16} {LIST_HEADER[1]:22} {LIST_HEADER[2]:28} {LIST_HEADER[3]}")
    remembered(
        picked.every,
        picked.reproduction,
        "list",
        lambda r: "\n".join(
            [
                f"{r.claim.id:16} {r.claim.title:22} {r.verdict.word:28} {render.basis(r)}",
                *(f"{'':16} {line}" for line in [r.claim.short, *render.reasons(r)]),
            ]
        ),
    )
    return 0


def plan(args: argparse.Namespace) -> int:
    from ..claims import plan

    picked = chosen(args)
    root = picked.reproduction
    remembered(
        picked.claims,
        root,
        f"plan --device {args.device}",
        lambda r: plan.text(
            r.claim, plan.sweeps(r.claim, r.evidence, str(root), args.device), r.verdict
        ),
    )
    return 0


def run(args: argparse.Namespace) -> int:
    from ..claims import plan

    picked = chosen(args)
    root = picked.reproduction
    todo = []
    rendered = build(picked.claims, root, strict=False)
    for f in findings(rendered):
        warn(f)
    for r in rendered:
        for o in args.overrides:
            clash = plan.contradicts(r.claim, o, args.paper)
            require(clash is None, f"claim {r.claim.id}: the override {o} contradicts {clash}")
        found = [
            s
            for s in plan.sweeps(r.claim, r.evidence, str(root), "cpu")
            if s.what.startswith("the paper's setting") == args.paper
        ]
        require(
            found or r.claim.ran or args.paper,
            f"claim {r.claim.id}: nothing of it runs on the data "
            f"here; --paper runs its paper setting (plan --device cuda shows it)",
        )
        todo += found
    for s in todo:
        mine = {o.split("=", 1)[0] for o in args.overrides}
        fedrun = [
            a
            for a in s.args
            if a.split("=", 1)[0] not in mine
            and not ("hydra/launcher" in mine and a in plan.LAUNCHER)
        ]
        cmd = [sys.executable, "-m", "fedprox_cli", "-m", *fedrun, *args.overrides]
        streams.out(f"{PROG}: {s.what}: fedrun -m {' '.join([*fedrun, *args.overrides])}")
        if args.dry_run:
            continue
        code = subprocess.run(cmd, check=False, env=thread_room.unfitted_env()).returncode
        _made(root, s.args)
        if code > EXIT["diverged"]:  # a diverged job is a result; anything else stops here
            return code
    if not todo:
        streams.out(f"{PROG}: nothing missing")
    return 0


def _made(root: Path, args: list[str]) -> None:
    """Record the digests of the folder a sweep ran into (its evidence, made now)."""
    from ..claims import digests

    for a in args:
        if a.startswith("hydra.sweep.dir="):
            folder = Path(a.split("=", 1)[1])
            if folder.is_dir() and folder.resolve().is_relative_to(root.resolve()):
                digests.record(root, [folder.resolve().relative_to(root.resolve()).as_posix()])


def record(args: argparse.Namespace) -> int:
    from ..claims import digests, history

    picked = chosen(args)
    root = picked.reproduction
    items = [i for i in digests.scope(picked.claims) if (root / i).exists()]
    new = digests.record(root, items)
    streams.out(
        f"{PROG}: recorded {len(new)} files of {len(items)} folders and files in "
        f"{root / digests.FILE}"
    )
    orders = history.record(root, picked.claims)
    counts = {w: sum(d.order == w for d in orders) for w in history.ORDERS}
    streams.out(
        f"{PROG}: recorded when each of {sum(d.test > 0 for d in orders)} tests' bounds were "
        f"declared relative to its runs"
        + "".join(f" ({n} tuning protocols too)" for n in [sum(d.test == 0 for d in orders)] if n)
        + f" in {root / history.FILE}: "
        + ", ".join(f"{n} {w}" for w, n in counts.items() if n)
    )
    return 0
