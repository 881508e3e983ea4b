"""When each test's bounds were declared relative to its runs: pre-registered (the commit that
declared them is an ancestor of every commit of the claim's runs) or post hoc (some of the runs
were committed before, or with, the declaration), read from git by ``fedrun-reproduce record``
and kept in ``reproduction/DECLARED.tsv`` under the results root, so a clone without the history
renders the same words.

A test's *bounds* are the fields that decide it (:data:`DECISIVE`: what it compares, where, how,
and against which bounds); its declaration commit is the oldest commit from which the claims
file holds, without a break to the present, a test of the claim with those same fields (a change
of wording is no new declaration, a moved bound is). The runs' commit is the first that added a
file under any of the claim's run folders or benchmark files. A record carries a fingerprint of
the bounds it was read for: a bound moved since is named by :func:`stale` (``check``), and the
report says the order is not recorded until ``record`` reads it again.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..common import guarded
from ..common.errors import require
from ..common.files import atomic_write_text
from .declare import Claim, RunSet, Test

Version = tuple[str, str, list[Any]]  # a claims file's commit, its date, its parsed entries

FILE = "DECLARED.tsv"
DECISIVE = (
    "kind",
    "metric",
    "key",
    "values",
    "base",
    "mode",
    "panels",
    "at",
    "from_round",
    "to_round",
    "where",
    "holds",
    "budget",
    "source",
    "file",
    "repeats",
)
# decisive fields added after tests were first declared -> their default: in a fingerprint only
# where they differ from it, so an earlier declaration's fingerprint stays its own
LATER = {"curve": "seed"}
ORDERS = ("pre-registered", "post hoc", "unknown")
HEADER = "claim\ttest\tbounds\tdeclared\tdeclared_at\truns\truns_at\torder"


@dataclass(frozen=True)
class Declared:
    """One test's record: its bounds' fingerprint, the commit (12 hex digits) and date of their
    declaration and of the claim's first runs ("" where git has none), and the order."""

    claim: str
    test: int  # 1-based, as the report numbers tests
    bounds: str
    declared: str
    declared_at: str
    runs: str
    runs_at: str
    order: str

    def said(self) -> str:
        """The order in the report's words (test 0: a run set's tuning protocol and its tuning
        runs)."""
        if self.order == "unknown":
            return "order unknown (the declaration or the runs are not in git)"
        what, runs = ("protocol", "tuning runs") if self.test == 0 else ("bounds", "runs")
        first = f"{runs} first committed {self.runs_at} ({self.runs})"
        when = f"{what} declared {self.declared_at} ({self.declared})"
        if self.order == "pre-registered":
            return f"pre-registered: {when}, before its {first}"
        return f"post hoc: {when}, with or after its {first}"


def bounds(t: Test | dict[str, Any]) -> str:
    """The fingerprint of a test's decisive fields (12 hex digits)."""
    d = t if isinstance(t, dict) else t.__dict__
    fields = {k: _plain(d.get(k, getattr(Test, k, None))) for k in DECISIVE}
    fields |= {k: d[k] for k, default in LATER.items() if d.get(k, default) != default}
    return hashlib.sha256(json.dumps(fields, sort_keys=True, default=str).encode()).hexdigest()[:12]


def protocol(rs: RunSet | dict[str, Any]) -> str:
    """The fingerprint of a run set's tuning protocol (its ``tuning``, ``points`` and ``seeds``:
    what it tunes, how, and which seeds the verdict reads; 12 hex digits). The tuning's
    ``post_hoc`` (:func:`declared_post_hoc`) is a record of its history, not of the protocol."""
    d = rs if isinstance(rs, dict) else rs.__dict__
    fields = {k: _plain(d.get(k)) for k in ("tuning", "points", "seeds")}
    if isinstance(fields["tuning"], dict):
        fields["tuning"] = {k: v for k, v in fields["tuning"].items() if k != POST_HOC} or None
    return hashlib.sha256(json.dumps(fields, sort_keys=True, default=str).encode()).hexdigest()[:12]


POST_HOC = "post_hoc"  # a tuning's key: why its protocol is post hoc whatever the commit order


def declared_post_hoc(rs: RunSet) -> str:
    """Why the run set's protocol is declared post hoc ("" where it is not): what was read of the
    runs, or run, before the protocol's declaring commit, which the commit order cannot show
    (choices made on the verdict's seeds, a tuning run started before its commit)."""
    return str(rs.tuning.get(POST_HOC) or "")


def tuned(claim: Claim) -> RunSet | None:
    """The claim's run set with a tuning protocol (its record is test 0), None without one."""
    return next((rs for rs in claim.ran if rs.tuning), None)


def _plain(v: object) -> object:
    """A declared value in one form, whether read from YAML or from a :class:`Test`."""
    if isinstance(v, (list, tuple)) and v:
        return [_plain(x) for x in v]
    if isinstance(v, dict) and v:
        return {str(k): _plain(x) for k, x in sorted(v.items())}
    if isinstance(v, int) and not isinstance(v, bool):
        return float(v)
    return None if v in ((), [], {}, "") else v


def _git(repo: Path, *args: str) -> str | None:
    """git's output in ``repo`` (None: no git, not a repository, or git failed)."""
    try:
        done = subprocess.run(
            ["git", "-C", str(repo), *args], capture_output=True, text=True, check=False
        )
    except OSError:
        return None
    return done.stdout if done.returncode == 0 else None


def _versions(repo: Path, path: str) -> list[Version]:
    """The claims file at ``path``, newest first: (commit, date, its parsed entries), following
    renames."""
    log = _git(repo, "log", "--follow", "--format=%H %cs", "--name-only", "--", path) or ""
    out: list[Version] = []
    head: list[str] | None = None
    for line in log.splitlines():
        if not line.strip():
            continue
        if head is None:
            head = line.split()
            continue
        text = _git(repo, "show", f"{head[0]}:{line.strip()}")
        try:
            entries = guarded.parse_yaml(text or "", f"{head[0]}:{line.strip()}") or []
        except guarded.Unreadable:
            entries = []
        out.append((head[0], head[1], entries if isinstance(entries, list) else []))
        head = None
    return out


def _holds(
    entries: list[Any], claim_id: str, fingerprint: str, part: str, mark: Callable[[Any], str]
) -> bool:
    for e in entries:
        if isinstance(e, dict) and e.get("id") == claim_id:
            return any(mark(t) == fingerprint for t in e.get(part) or [] if isinstance(t, dict))
    return False


def declared(
    repo: Path,
    versions: list[Version],
    claim_id: str,
    fingerprint: str,
    part: str = "tests",
    mark: Callable[[Any], str] = bounds,
) -> tuple[str, str]:
    """(commit, date) from which the file holds the claim's test with these bounds (``part``
    "ran", ``mark`` :func:`protocol`: its run set with this protocol) without a break ("", ""
    where its newest committed version does not)."""
    found = ("", "")
    for commit, date, entries in versions:
        if not _holds(entries, claim_id, fingerprint, part, mark):
            break
        found = (commit, date)
    return found


def first_runs(repo: Path, paths: list[str]) -> tuple[str, str]:
    """(commit, date) of the first commit adding a file under ``paths`` ("", "": none)."""
    if not paths:
        return "", ""
    log = _git(repo, "log", "--diff-filter=A", "--format=%H %cs", "--", *paths) or ""
    lines = log.split("\n")
    last = [x for x in lines if x.strip()]
    return tuple(last[-1].split()) if last else ("", "")  # type: ignore[return-value]


def order(repo: Path, declared_commit: str, runs_commit: str) -> str:
    """pre-registered where the declaration is a strict ancestor of the runs' first commit; post
    hoc where the runs' commit is the declaration's or one of its ancestors; else unknown."""
    if not declared_commit or not runs_commit:
        return "unknown"
    if declared_commit == runs_commit:
        return "post hoc"

    def ancestor(a: str, b: str) -> bool:
        done = subprocess.run(
            ["git", "-C", str(repo), "merge-base", "--is-ancestor", a, b],
            capture_output=True,
            check=False,
        )
        return done.returncode == 0

    if ancestor(declared_commit, runs_commit):
        return "pre-registered"
    return "post hoc" if ancestor(runs_commit, declared_commit) else "unknown"


def source(claim: Claim) -> Path:
    """The claims file that declares ``claim`` (where its source read it, :mod:`.sources`)."""
    return Path(claim.file)


def evidence_paths(claim: Claim, results: Path) -> list[str]:
    """The claim's run folders and benchmark files, as paths under the results root."""
    items = []
    for rs in claim.ran:
        items += [*rs.folders, *([rs.bench] if rs.bench else [])]
        if not rs.folders and not rs.bench:
            items += [t.file for t in claim.tests if t.file]
    return [str(results / i) for i in dict.fromkeys(items)]


def read_from_git(claims: list[Claim], results: Path) -> list[Declared]:
    """Every test's record, read from the history of its claims file and of its runs."""
    out = []
    cache: dict[Path, tuple[Path, list[Version]]] = {}
    for c in claims:
        path = source(c).resolve()
        if path not in cache:
            top = (_git(path.parent, "rev-parse", "--show-toplevel") or "").strip()
            repo = Path(top) if top else path.parent
            cache[path] = (repo, _versions(repo, str(path.relative_to(repo))) if top else [])
        repo, versions = cache[path]
        runs = first_runs(repo, [str(Path(p).resolve()) for p in evidence_paths(c, results)])
        for i, t in enumerate(c.tests, 1):
            fp = bounds(t)
            made = declared(repo, versions, c.id, fp)
            when = order(repo, made[0], runs[0])
            out.append(Declared(c.id, i, fp, made[0][:12], made[1], runs[0][:12], runs[1], when))
        if (rs := tuned(c)) is not None:  # the protocol against its tuning runs' first commit
            fp = protocol(rs)
            made = declared(repo, versions, c.id, fp, "ran", protocol)
            tried = first_runs(repo, [str((results / rs.into).resolve())])
            when = "post hoc" if declared_post_hoc(rs) else order(repo, made[0], tried[0])
            out.append(Declared(c.id, 0, fp, made[0][:12], made[1], tried[0][:12], tried[1], when))
    return out


Records = dict[tuple[str, int], "Declared"]  # (claim, test number) -> its record


def read(root: Path) -> Records:
    """The records under the results root ``root`` ({} without the file)."""
    path = root / FILE
    if not path.is_file():
        return {}
    out = {}
    for line in path.read_text().splitlines()[1:]:
        parts = line.split("\t")
        require(
            len(parts) == 8 and parts[7] in ORDERS and parts[1].isdigit(),
            f"{path}: not a declaration line: {line[:80]!r}",
        )
        name, n, fp, made, made_at, runs, runs_at, when = parts
        out[(name, int(n))] = Declared(name, int(n), fp, made, made_at, runs, runs_at, when)
    return out


def record(root: Path, claims: list[Claim]) -> list[Declared]:
    """Read the order of every test of ``claims`` from git and write it (the other claims'
    records kept); the new records."""
    new = read_from_git(claims, root)
    kept = {k: v for k, v in read(root).items() if k[0] not in {c.id for c in claims}}
    rows = sorted([*kept.values(), *new], key=lambda d: (d.claim, d.test))
    atomic_write_text(
        root / FILE,
        "\n".join([HEADER, *("\t".join(map(str, d.__dict__.values())) for d in rows)]) + "\n",
    )
    return new


def of(records: Records, claim: Claim, index: int, t: Test) -> str:
    """What the report says of test ``index`` (1-based) of ``claim``: its order, or that it is
    not recorded for these bounds."""
    d = records.get((claim.id, index))
    if d is None or d.bounds != bounds(t):
        return "order not recorded for these bounds (`fedrun-reproduce record` reads it from git)"
    return d.said()


def protocol_of(records: Records, claim: Claim) -> str:
    """What the report says of the claim's tuning protocol (test 0): its order, or that it is
    not recorded for this protocol ("" without one)."""
    rs = tuned(claim)
    if rs is None:
        return ""
    d = records.get((claim.id, 0))
    if d is None or d.bounds != protocol(rs):
        return "order not recorded for this protocol (`fedrun-reproduce record` reads it from git)"
    if why := declared_post_hoc(rs):
        return (
            f"post hoc, declared so: {why} (the commit order alone, protocol {d.declared_at} "
            f"({d.declared}) before its tuning runs' first commit {d.runs_at} ({d.runs}), "
            "cannot show it)"
        )
    return d.said()


def stale(records: Records, claims: list[Claim]) -> list[str]:
    """One line per test whose bounds (per tuning protocol that) differ from those its record
    was read for (``check``)."""
    out = [
        f"{c.id}: test {i}'s bounds differ from those whose declaration {FILE} records "
        f"(`fedrun-reproduce record {c.id}` reads their order from git)"
        for c in claims
        for i, t in enumerate(c.tests, 1)
        if (d := records.get((c.id, i))) is None or d.bounds != bounds(t)
    ]
    return out + [
        f"{c.id}: its tuning protocol differs from the one whose declaration {FILE} records "
        f"(`fedrun-reproduce record {c.id}` reads its order from git)"
        for c in claims
        if (rs := tuned(c)) is not None
        and ((d := records.get((c.id, 0))) is None or d.bounds != protocol(rs))
    ]
