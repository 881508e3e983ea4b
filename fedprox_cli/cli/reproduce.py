"""fedrun-reproduce: the reproduction of the three papers, claim by claim, from declarations.

  fedrun-reproduce list                          # every claim: its word, data / T / seeds / device, its text
  fedrun-reproduce plan [CLAIM...] [--device cuda]   # the missing runs, commands and cost
  fedrun-reproduce run CLAIM... [OVERRIDE...]    # launch them (fedrun -m) into the claim's folders
  fedrun-reproduce run CLAIM --paper device=cuda data.root=DIR   # the paper's own setting
  fedrun-reproduce check [CLAIM...] [--results DIR]   # recompute and compare: exit 0 equal, 1 not
  fedrun-reproduce report                        # write REPRODUCTION.md and the README/docs blocks
  fedrun-reproduce record [CLAIM...]             # record the digests of the claims' evidence and,
                                                 # from git, when each test's bounds were declared

The claims are declared in fedprox_cli/claims/*.yaml (one per figure or table of FedCanon,
FedCEF and FedNMap). --results DIR holds REPRODUCTION.md and the run folders under
DIR/reproduction/ (default: results); README.md and docs/reproducing.md are read under --root
(default: the current folder). Every command reads the runs through one validation
(fedprox_cli/claims/validate.py): a run folder that cannot be read, a run of another setting than
the claim fixes, rows that do not fit its T and status, a duplicate of another run, a missing
metric column, a summary.json or a Hydra or job record that contradicts it -- each is one line
naming the folder and the key, and the run is left out (missing, never counted). `check` prints
those lines, one per difference (claim, number, committed, recomputed) and one per run whose
files differ from the digests recorded when they were made (reproduction/EVIDENCE.sha256: edited,
added, copied, moved, deleted; `run` records the folders it runs into, `record` the evidence of
the claims named), one per test whose bounds differ from those whose declaration order `record`
read from git (reproduction/DECLARED.tsv), and exits 1 on any; it names the runs without a Hydra record (unverified). `run` refuses an override that contradicts a setting the claim
declares (exit 2). Bad input (an unknown claim, a results folder without a claim's runs) is one
line and exit 2; an internal error exit 3. ``list`` and ``plan`` remember each claim's text and recompute
only a claim whose declaration, run folders or code changed (:mod:`fedprox_cli.claims.cache`).
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ..claims import (
    declare,  # the others (pandas, torch) where a claim is computed: list/plan remember texts
)
from ..common import streams
from ..common.errors import EXIT, UserError, describe, require
from ..common.files import atomic_write_text
from . import usage
from .faults import crash

if TYPE_CHECKING:  # the claims' rendering loads when a command renders
    from ..claims import render

PROG = "fedrun-reproduce"
REPORT = "REPRODUCTION.md"
README, DOCS = Path("README.md"), Path("docs/reproducing.md")


def parse(argv):
    p = usage.parser(PROG, __doc__)
    sub = p.add_subparsers(
        dest="command", required=True, metavar="COMMAND", help="one of (COMMAND --help: its own)"
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--results",
        type=Path,
        default=Path("results"),
        metavar="DIR",
        help="the folder holding REPRODUCTION.md and reproduction/ (default: results)",
    )
    common.add_argument(
        "--root",
        type=Path,
        default=Path("."),
        metavar="DIR",
        help="the checkout whose README.md and docs/reproducing.md are compared or written",
    )

    def command(name: str, about: str, **kwargs) -> argparse.ArgumentParser:
        """A subcommand whose ``--help`` says what it does (``about``), as the list does."""
        return sub.add_parser(name, parents=[common], help=about, description=about, **kwargs)

    claim = "a claim's id (fedrun-reproduce list names them; none: every claim)"
    command("list", "every claim with its word, one line each")
    pl = command("plan", "the missing runs per claim, the commands that make them and their cost")
    pl.add_argument("claims", nargs="*", metavar="CLAIM", help=claim)
    pl.add_argument(
        "--device", choices=("cpu", "cuda"), default="cpu", help="the device the runs would use"
    )
    rn = command(
        "run",
        "launch the missing runs of claims (fedrun -m) into the claims' folders",
        usage="%(prog)s [-h] [--results DIR] [--root DIR] [--paper] [--dry-run] CLAIM... "
        "[OVERRIDE...]",
        epilog="OVERRIDE...: KEY=VALUE passed on to fedrun -m (a launcher, device=cuda, "
        "data.root=DIR); one that contradicts a setting the claim declares is refused",
    )
    rn.add_argument("claims", nargs="+", metavar="CLAIM", help="a claim's id")
    rn.add_argument("--paper", action="store_true", help="run the paper's own setting instead")
    rn.add_argument("--dry-run", action="store_true", help="print the commands only")
    ch = command("check", "recompute every word and number and compare: exit 0 equal, 1 not")
    ch.add_argument("claims", nargs="*", metavar="CLAIM", help=claim)
    command("report", "write REPRODUCTION.md and the README/docs blocks")
    rc = command(
        "record",
        "record the digests of the claims' evidence as it is, and from git when each "
        "test's bounds were declared relative to its runs (pre-registered or post hoc)",
    )
    rc.add_argument("claims", nargs="*", metavar="CLAIM", help=claim)
    argv = list(sys.argv[1:] if argv is None else argv)
    overrides = (
        [a for a in argv if "=" in a and not a.startswith("-")] if argv[:1] == ["run"] else []
    )
    args = p.parse_args([a for a in argv if a not in overrides])
    args.overrides = overrides
    return args


def build(
    claims: list[declare.Claim], root: Path, strict: bool, warn=None
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
                declared={i: history.of(records, c, i, t) for i, t in enumerate(c.tests, 1)},
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


def warn(message: str) -> None:
    streams.err(f"{PROG}: {message}")


def _remembered(claims: list[declare.Claim], root: Path, command: str, make) -> None:
    """Print each claim's text, ``make(rendered claim)``, recomputed only where its declaration,
    its run folders or the package's code changed since it was last printed (:mod:`claims.cache`)."""
    from ..claims.cache import Cache

    memo = Cache(root, command)
    relay = _Relay()  # one warn for every claim: the evidence's reads of shared folders are reused

    def computed(c, said):
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

    to = staticmethod(warn)

    def __call__(self, message: str) -> None:
        self.to(message)


LIST_HEADER = ("claim", "figure or table", "word", "data / T / seeds / device")


def _list(args) -> int:
    from ..claims import render

    streams.out(f"{LIST_HEADER[0]:16} {LIST_HEADER[1]:22} {LIST_HEADER[2]:28} {LIST_HEADER[3]}")
    _remembered(
        declare.load(),
        args.results / "reproduction",
        "list",
        lambda r: "\n".join(
            [
                f"{r.claim.id:16} {r.claim.title:22} {r.verdict.word:28} {render.basis(r)}",
                *(f"{'':16} {line}" for line in [r.claim.short, *render.reasons(r)]),
            ]
        ),
    )
    return 0


def _plan(args) -> int:
    from ..claims import plan

    claims = declare.select(declare.load(), args.claims)
    root = args.results / "reproduction"
    _remembered(
        claims,
        root,
        f"plan --device {args.device}",
        lambda r: plan.text(
            r.claim, plan.sweeps(r.claim, r.evidence, str(root), args.device), r.verdict
        ),
    )
    return 0


def _run(args) -> int:
    from ..claims import plan

    claims = declare.select(declare.load(), args.claims)
    root = args.results / "reproduction"
    todo = []
    rendered = build(claims, root, strict=False)
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
        code = subprocess.run(cmd, check=False).returncode
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


def _read(path: Path) -> str:
    require(path.is_file(), f"no {path}")
    return path.read_text()


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


def _record(args) -> int:
    from ..claims import digests, history

    root = args.results / "reproduction"
    claims = declare.select(declare.load(), args.claims)
    items = [i for i in digests.scope(claims) if (root / i).exists()]
    new = digests.record(root, items)
    streams.out(
        f"{PROG}: recorded {len(new)} files of {len(items)} folders and files in {root / digests.FILE}"
    )
    orders = history.record(root, claims)
    counts = {w: sum(d.order == w for d in orders) for w in history.ORDERS}
    streams.out(
        f"{PROG}: recorded when each of {len(orders)} tests' bounds were declared relative to its "
        f"runs in {root / history.FILE}: " + ", ".join(f"{n} {w}" for w, n in counts.items() if n)
    )
    return 0


def _check(args) -> int:
    from ..claims import compare, digests, figures, history, render, tables
    from ..claims.evidence import NoUsableRun

    claims = declare.select(declare.load(), args.claims)
    root = args.results / "reproduction"
    rendered, diffs = [], []
    for c in claims:  # a claim left without a usable run is one difference; the others go on
        try:
            rendered += build([c], root, strict=True)
        except NoUsableRun as e:
            diffs.append(f"{c.id}: {e}")
    whole = not args.claims
    committed = _read(args.results / REPORT)
    diffs += compare.report(
        committed,
        render.report(rendered, render.owners(declare.load()), digests.said(_sources(root))),
        [r.claim.id for r in rendered],
        whole,
    )
    failed = {f"{d.split(':')[0]}: in the committed report, not declared" for d in diffs}
    diffs = [d for d in diffs if d not in failed]
    diffs += digests.edited(committed, _sources(root))
    diffs += digests.outside(root, declare.load())
    for name, make in ((README, render.readme), (DOCS, render.docs)):
        diffs += compare.block(
            str(name),
            render.between(_read(args.root / name)),
            make(rendered),
            {c.id: (f"{c.title}:" if name == README else f"{c.title} (`{c.id}`)") for c in claims},
        )
    diffs += findings(rendered)
    diffs += [
        f"{r.claim.id}: runs of seeds {', '.join(map(str, ev.extra))} in its folders are not declared "
        f"(add them to its seeds in fedprox_cli/claims/)"
        for r in rendered
        for ev in r.evidence
        if ev.extra
    ]
    for r in rendered:  # the figures and tables linked from the report, redrawn from the runs
        diffs += figures.stale(r.claim, r.evidence, args.results / "reproduction", warn)
        diffs += tables.stale(r.claim, r.evidence, args.results / "reproduction", warn)
    diffs += digests.changes(args.results / "reproduction", claims)
    diffs += history.stale(history.read(args.results / "reproduction"), claims)
    for d in diffs:
        streams.out(f"{PROG}: check: {d}")
    if unchecked := unverified(claims, args.results / "reproduction"):
        streams.out(f"{PROG}: check: note: {unchecked}")
    if not diffs:
        streams.out(f"{PROG}: check: {len(claims)} claims, every word and number as committed")
    return 1 if diffs else 0


def _sources(root: Path) -> dict[str, str]:
    """The digests of what the report is written from beyond the runs (the digest file, the
    declaration record, the claims files and stand_ins.yaml)."""
    from ..claims import digests, history

    files = list(dict.fromkeys(history.source(c) for c in declare.load()))
    return digests.sources(root, [*files, files[0].with_name("stand_ins.yaml")])


def _report(args) -> int:
    from ..claims import digests, figures, render, tables

    claims = declare.load()
    rendered = build(claims, args.results / "reproduction", strict=True)
    for (
        r
    ) in rendered:  # the figures and tables the report links, before the report that digests them
        figures.draw_claim(r.claim, r.evidence, args.results / "reproduction", warn)
        tables.write_claim(r.claim, r.evidence, args.results / "reproduction", warn)
        r.digest = digest(args.results, r.claim.figure)  # of the file as drawn now
    said = digests.said(_sources(args.results / "reproduction"))
    texts = {args.results / REPORT: render.report(rendered, render.owners(claims), said)}
    for name, make in (
        (README, render.readme),
        (DOCS, render.docs),
    ):  # all checked before any is written
        new = render.replace_between(_read(args.root / name), make(rendered))
        if new is None:
            raise UserError(
                f"{args.root / name} has no generated block ({render.BEGIN} ... {render.END})"
            )
        texts[args.root / name] = new
    for f in findings(rendered):
        warn(f"{f} (left out; `check` fails until it is mended)")
    for path, text in texts.items():
        atomic_write_text(path, text)
    streams.out(f"{PROG}: wrote {args.results / REPORT}, {args.root / README}, {args.root / DOCS}")
    return 0


COMMANDS = {
    "list": _list,
    "plan": _plan,
    "run": _run,
    "check": _check,
    "report": _report,
    "record": _record,
}


def main(argv=None) -> int:
    try:
        args = parse(argv)
    except SystemExit as e:
        return EXIT["error"] if e.code else 0
    if "fedprox_cli.claims.loading" in sys.modules:  # a command reads its folders afresh
        sys.modules["fedprox_cli.claims.loading"].forget()
    try:
        return COMMANDS[args.command](args)
    except (UserError, OSError) as e:
        warn(f"error: {describe(e)}")
        return EXIT["error"]
    except Exception as e:  # noqa: BLE001 -- an internal error: one line, the traceback kept
        return crash(e)


if __name__ == "__main__":
    sys.exit(main())
