"""``fedrun-reproduce report`` and ``check``: the report, its figures and tables and the
README/docs blocks written from the claims' evidence, and the same recomputed and compared."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..common import streams
from ..common.errors import UserError, require
from ..common.files import atomic_write_text
from .reproduce_read import (
    DOCS,
    PROG,
    README,
    REPORT,
    Chosen,
    build,
    chosen,
    digest,
    findings,
    unverified,
    warn,
)

if TYPE_CHECKING:
    from ..claims import render


def _read(path: Path) -> str:
    require(path.is_file(), f"no {path}")
    return path.read_text()


def _blocks(picked: Chosen) -> list[tuple[Path, Path, Callable[[list[render.Rendered]], str]]]:
    """Each README/docs block under ``--root`` (none without one): its name, file and maker."""
    from ..claims import render

    root = picked.root
    made = ((README, render.readme), (DOCS, render.docs))
    return [] if root is None else [(name, root / name, make) for name, make in made]


def check(args: argparse.Namespace) -> int:
    from ..claims import compare, digests, figure_files, history, render, tables
    from ..claims.evidence import NoUsableRun

    picked = chosen(args)
    claims, root = picked.claims, picked.reproduction
    rendered, diffs = [], []
    for c in claims:  # a claim left without a usable run is one difference; the others go on
        try:
            rendered += build([c], root, strict=True)
        except NoUsableRun as e:
            diffs.append(f"{c.id}: {e}")
    whole = not args.claims
    committed = _read(picked.results / REPORT)
    written = _written(picked)
    diffs += compare.report(
        committed,
        render.report(rendered, render.owners(picked.every), picked.sources, digests.said(written)),
        [r.claim.id for r in rendered],
        whole,
    )
    failed = {f"{d.split(':')[0]}: in the committed report, not declared" for d in diffs}
    diffs = [d for d in diffs if d not in failed]
    edits = digests.edited(committed, written)
    diffs += edits
    diffs += digests.outside(root, picked.every)
    for name, path, make in _blocks(picked):
        diffs += compare.block(
            str(name),
            render.between(_read(path)),
            make(rendered),
            {c.id: (f"{c.title}:" if name == README else f"{c.title} (`{c.id}`)") for c in claims},
        )
    diffs += findings(rendered)
    diffs += [
        f"{r.claim.id}: runs of seeds {', '.join(map(str, ev.extra))} in its folders are not "
        f"declared (add them to its seeds, {r.claim.origin})"
        for r in rendered
        for ev in r.evidence
        if ev.extra
    ]
    for r in rendered:  # the figures and tables linked from the report, redrawn from the runs
        diffs += figure_files.stale(r.claim, r.evidence, root, warn)
        diffs += tables.stale(r.claim, r.evidence, root, warn)
    if not digests.self_edited(edits):  # an edited digest file blames no run
        diffs += digests.changes(root, claims)
    diffs += history.stale(history.read(root), claims)
    for d in diffs:
        streams.out(f"{PROG}: check: {d}")
    if unchecked := unverified(claims, root):
        streams.out(f"{PROG}: check: note: {unchecked}")
    code = f"recomputed by the fedprox_cli at {Path(__file__).resolve().parents[1]}"
    if not diffs:
        streams.out(
            f"{PROG}: check: {len(claims)} claims, every word and number as committed ({code})"
        )
    return 1 if diffs else 0


def _written(picked: Chosen) -> dict[str, str]:
    """The digests of what the report is written from beyond the runs (the digest file, the
    declaration record, the claims files and the stand-ins' descriptions)."""
    from ..claims import digests, sources

    return digests.sources(picked.reproduction, sources.written_from(picked.sources))


def report(args: argparse.Namespace) -> int:
    from ..claims import digests, figure_files, render, tables

    picked = chosen(args)
    claims, root = picked.every, picked.reproduction
    rendered = build(claims, root, strict=True)
    for r in rendered:  # the figures and tables the report links, before the report digests them
        figure_files.draw_claim(r.claim, r.evidence, root, warn)
        tables.write_claim(r.claim, r.evidence, root, warn)
        r.digest = digest(picked.results, r.claim.figure)  # of the file as drawn now
    said = digests.said(_written(picked))
    texts = {
        picked.results / REPORT: render.report(
            rendered, render.owners(claims), picked.sources, said
        )
    }
    for _, path, make in _blocks(picked):  # all checked before any is written
        new = render.replace_between(_read(path), make(rendered))
        if new is None:
            raise UserError(f"{path} has no generated block ({render.BEGIN} ... {render.END})")
        texts[path] = new
    for f in findings(rendered):
        warn(f"{f} (left out; `check` fails until it is mended)")
    for path, text in texts.items():
        atomic_write_text(path, text)
    streams.out(f"{PROG}: wrote {', '.join(map(str, texts))}")
    return 0
