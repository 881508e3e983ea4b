"""What every ``fedrun-reproduce`` command shares: the claims chosen (their sources, the results
folder and the checkout of the README/docs blocks), their evidence read through the one
validation, and the one place its lines are said."""

from __future__ import annotations

import argparse
import functools
import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..claims import declare, sources
from ..claims.sources import Source
from ..common import streams

if TYPE_CHECKING:  # the claims' rendering loads when a command renders
    from ..claims import render

PROG = "fedrun-reproduce"
REPORT = "REPRODUCTION.md"
README, DOCS = Path("README.md"), Path("docs/reproducing.md")


@dataclass
class Chosen:
    """The claims a command works on: every claim of its ``sources`` (``every``), those named
    (``claims``), the results folder and the checkout whose README/docs blocks it compares or
    writes (``root``: None for none)."""

    sources: list[Source]
    every: list[declare.Claim]
    claims: list[declare.Claim]
    results: Path
    root: Path | None

    @property
    def reproduction(self) -> Path:
        return self.results / "reproduction"


def chosen(args: argparse.Namespace) -> Chosen:
    """The sources ``--claims`` names (the papers by default), loaded and checked, and the
    claims named among them; ``--root`` defaults to the current folder when every source
    writes the blocks there (the papers), else to none."""
    found = sources.resolve(args.sources)
    every = sources.load(found)
    root = args.root
    if root is None and all(s.blocks for s in found):
        root = Path(".")
    return Chosen(
        found, every, declare.select(every, getattr(args, "claims", [])), args.results, root
    )


def warn(message: str) -> None:
    streams.err(f"{PROG}: {message}")


def build(
    claims: list[declare.Claim],
    root: Path,
    strict: bool,
    warn: Callable[[str], None] | None = None,
) -> list[render.Rendered]:
    """Each claim's evidence (one per run set that ran) and its word (``warn``: where what the
    reading notes goes, default stderr)."""
    from ..claims import evidence, history, render, tables, verdict

    warn = warn or globals()["warn"]
    records = history.read(root)
    out = []
    for c in claims:
        found = [evidence.gather(c, rs, root, warn, strict) for rs in c.ran]
        table = (
            tables.texts(c, found, root, warn)["md"]
            if c.table_spec and any(ev.present for ev in found)
            else ""
        )
        out.append(
            render.Rendered(
                c,
                found,
                verdict.across(c, found),
                table=table,
                digest=digest(root.parent, c.figure),
                declared={
                    **{i: history.of(records, c, i, t) for i, t in enumerate(c.tests, 1)},
                    **({0: said} if (said := history.protocol_of(records, c)) else {}),
                },
            )
        )
    return out


def digest(results: Path, name: str) -> str:
    """The first 12 hex digits of the sha256 of the file the report links (``missing``), so a
    swapped, edited or deleted figure or table is a difference for `check`."""
    if not name:
        return ""
    try:
        return hashlib.sha256((results / name).read_bytes()).hexdigest()[:12]
    except FileNotFoundError:
        return "missing"


def findings(rendered: list[render.Rendered]) -> list[str]:
    """The validation's findings of every claim's runs, each once (claims share folders)."""
    return list(dict.fromkeys(f for r in rendered for ev in r.evidence for f in ev.findings))


def remembered(
    claims: list[declare.Claim],
    root: Path,
    command: str,
    make: Callable[[render.Rendered], str],
) -> None:
    """Print each claim's text, ``make(rendered claim)``, recomputed only where its declaration,
    its run folders or the package's code changed since it was last printed
    (:mod:`claims.cache`)."""
    from ..claims.cache import Cache

    memo = Cache(root, command)
    relay = _Relay()  # one warn for every claim: the evidence's reads of shared folders are reused

    def computed(c: declare.Claim, said: Callable[[str], None]) -> str:
        relay.to = said
        r = build([c], root, strict=False, warn=relay)[0]
        for f in findings([r]):  # the validation's findings, remembered with the text
            said(f)
        return make(r)

    for c in claims:
        streams.out(memo.text(c, functools.partial(computed, c), warn))
    memo.save()


class _Relay:
    """A warn function whose target changes (the claim being computed's own)."""

    def __init__(self) -> None:
        self.to: Callable[[str], None] = warn

    def __call__(self, message: str) -> None:
        self.to(message)


def unverified(claims: list[declare.Claim], root: Path) -> str:
    """The run folders holding runs without Hydra's record of their config, with their counts
    ("": none)."""
    from ..claims import loading, validate

    runs = {
        r.path: r
        for c in claims
        for rs in c.ran
        if rs.folders
        for r in loading.load_runs(c, rs, root, lambda _: None, strict=False)[0]
    }
    bare = validate.unverified(list(runs.values()))
    if not bare:
        return ""
    folders: dict[str, int] = {}
    for r in bare:
        top = Path(os.path.relpath(r.path, root)).parts[0]
        folders[top] = folders.get(top, 0) + 1
    return (
        f"{len(bare)} runs are unverified, without Hydra's record of their config "
        f"(.hydra/config.yaml): only the keys their overrides name are checked against a record, "
        f"the rest by its recorded digest: " + ", ".join(f"{f} ({n})" for f, n in folders.items())
    )
