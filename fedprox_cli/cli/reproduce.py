"""fedrun-reproduce: claims of papers, planned, run, checked and reported from their declarations.

  fedrun-reproduce list                          # every claim: its word, data / T / seeds / device, its text
  fedrun-reproduce plan [CLAIM...] [--device cuda]   # the missing runs, commands and cost
  fedrun-reproduce run CLAIM... [OVERRIDE...]    # launch them (fedrun -m) into the claim's folders
  fedrun-reproduce run CLAIM --paper device=cuda data.root=DIR   # the paper's own setting
  fedrun-reproduce check [CLAIM...] [--results DIR]   # recompute and compare: exit 0 equal, 1 not
  fedrun-reproduce report                        # write REPRODUCTION.md and the README/docs blocks
  fedrun-reproduce record [CLAIM...]             # record the digests of the claims' evidence and,
                                                 # from git, when each test's bounds were declared
  fedrun-reproduce list --claims claims.yaml     # the claims of your own paper (any command)

The claims come from sources: by default the three papers' (fedprox_cli/claims/*.yaml, one per
figure or table of FedCanon, FedCEF and FedNMap); --claims FILE|DIR|NAME (repeatable) reads a
claims file, a folder of them, or a source a package installs under the entry point group
fedprox_cli.claims instead. Each file is checked as it is read: a misspelled key, a wrong type,
an unknown algorithm, dataset or metric, a test's key or value not in its runs' grid is one line
naming the file, its line, the claim and the key (exit 2); ids are unique across the sources.
--results DIR holds REPRODUCTION.md and the run folders under DIR/reproduction/ (default:
results, under the current folder); README.md and docs/reproducing.md blocks are read under
--root (default: the current folder for the papers' claims; none for other sources). Every command reads the runs through one validation
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
import sys
from pathlib import Path

from ..common.errors import EXIT, UserError, describe
from . import reproduce_report, reproduce_runs, usage
from .faults import crash
from .reproduce_read import PROG, warn


def parse(argv: list[str] | None) -> argparse.Namespace:
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
        default=None,
        metavar="DIR",
        help="the checkout whose README.md and docs/reproducing.md blocks are compared or "
        "written (default: the current folder for the papers' claims, none for other sources)",
    )
    common.add_argument(
        "--claims",
        dest="sources",
        action="append",
        metavar="FILE|DIR|NAME",
        help="a claims file, a folder of them, or an installed source's name (repeatable; "
        "default: papers, the three papers' claims)",
    )

    def command(
        name: str, about: str, usage: str | None = None, epilog: str | None = None
    ) -> argparse.ArgumentParser:
        """A subcommand whose ``--help`` says what it does (``about``), as the list does."""
        return sub.add_parser(
            name, parents=[common], help=about, description=about, usage=usage, epilog=epilog
        )

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
        usage="%(prog)s [-h] [--results DIR] [--root DIR] [--claims FILE|DIR|NAME] [--paper] "
        "[--dry-run] CLAIM... [OVERRIDE...]",
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


COMMANDS = {
    "list": reproduce_runs.list_claims,
    "plan": reproduce_runs.plan,
    "run": reproduce_runs.run,
    "check": reproduce_report.check,
    "report": reproduce_report.report,
    "record": reproduce_runs.record,
}


def main(argv: list[str] | None = None) -> int:
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
