"""Digests of the evidence, recorded when the evidence is made, and every change since named.

``reproduction/EVIDENCE.sha256`` under the results root holds one line per file a claim reads
(every file under its run folders, each benchmark file or the folder holding it): the first 16
hex digits of the sha256 of its content with CRLF line ends read as LF, two spaces, its path
relative to the results root. ``fedrun-reproduce run`` records the folders it ran into when their
sweeps end, and ``fedrun-reproduce record`` the evidence of the claims it names (for evidence made
otherwise: an explicit act); ``report`` never records. ``check`` (:func:`changes`) names each
file whose content differs from its record, by run and cause: edited, added, a copy of another
recorded file, moved from another path, holding another changed file's recorded content (two
files swapped), deleted. A timestamp or line-end change is none. A forgery that re-records its own
digests is out of its reach (docs/reproducing.md, "What check protects").
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from ..common import run_files
from ..common.errors import require
from ..common.files import atomic_write_text
from .declare import Claim

FILE = "EVIDENCE.sha256"
RUN_FILES = (run_files.METRICS, run_files.SUMMARY)  # a folder holding one is a run


def digest(path: Path) -> str:
    """The first 16 hex digits of the sha256 of the file's content, CRLF read as LF."""
    return hashlib.sha256(path.read_bytes().replace(b"\r\n", b"\n")).hexdigest()[:16]


def scope(claims: list[Claim]) -> list[str]:
    """What the claims read, relative to the results root: their run folders, and each
    benchmark file (the folder holding it, where it is not the root itself)."""
    out = []
    for c in claims:
        for rs in c.ran:
            out += [f for f in (*rs.folders, rs.into) if f]
            files = [rs.bench] if rs.bench else [t.file for t in c.tests if t.file]
            out += [str(Path(f).parent) if Path(f).parent != Path(".") else f for f in files]
    return list(dict.fromkeys(out))


def evidence(path: str) -> bool:
    """A file a claim may read: not one of :data:`run_files.NOT_EVIDENCE`, which a clone lacks."""
    return Path(path).name not in run_files.NOT_EVIDENCE


def current(root: Path, items: list[str]) -> dict[str, str]:
    """path -> digest of every file of the evidence (:func:`evidence`) under ``items`` (folders
    or files) of ``root``; a symbolic link is no evidence (:func:`links`), nor anything under
    it."""
    out = {}
    for item in items:
        p = root / item
        if p.is_symlink():
            continue
        if p.is_file():
            out[item] = digest(p)
        for dirpath, dirs, names in os.walk(p):
            dirs.sort()
            for n in names:
                f = Path(dirpath) / n
                if not f.is_symlink() and evidence(n):
                    out[f.relative_to(root).as_posix()] = digest(f)
    return out


def links(root: Path, items: list[str]) -> dict[str, str]:
    """path -> target of every symbolic link at or under ``items``: evidence must be the
    repository's own files (a clone of a link to a folder elsewhere holds a dangling link)."""
    out = {}
    for item in items:
        p = root / item
        if p.is_symlink():
            out[item] = os.readlink(p)
            continue
        for dirpath, dirs, names in os.walk(p):
            for n in sorted(dirs + names):
                f = Path(dirpath) / n
                if f.is_symlink():
                    out[f.relative_to(root).as_posix()] = os.readlink(f)
    return out


def outside(root: Path, claims: list[Claim]) -> list[str]:
    """One line per recorded digest of a path outside every claim's evidence (``claims``: every
    declared claim)."""
    items = scope(claims)
    return [
        f"{FILE}: a line for {p}, outside the evidence of every claim"
        for p in read(root)
        if not _under(p, items)
    ]


SOURCES = "Digests (sha256, 12 digits) of what this report was written from: "


def sources(root: Path, files: list[tuple[Path, str]]) -> dict[str, str]:
    """name -> the first 12 hex digits of the sha256 of each file the report is written from
    beyond the runs: the digest file and the declaration record under the results root
    ``root``, and ``files`` (the claims YAMLs, stand_ins.yaml: path and name,
    :func:`.sources.written_from`); "missing" where absent."""
    out = {}
    record = [
        (root / FILE, f"reproduction/{FILE}"),
        (root / "DECLARED.tsv", "reproduction/DECLARED.tsv"),
    ]
    for f, name in [*record, *files]:
        out[name] = (
            hashlib.sha256(f.read_bytes().replace(b"\r\n", b"\n")).hexdigest()[:12]
            if f.is_file()
            else "missing"
        )
    return out


def said(digests: dict[str, str]) -> str:
    """The report's line of :func:`sources`."""
    return SOURCES + ", ".join(f"`{n}` {d}" for n, d in digests.items()) + "."


def edited(report: str, now: dict[str, str]) -> list[str]:
    """One line per file whose digest differs from the one the committed ``report`` names
    (the digest file's own edits named as such, a claims file's change by its name)."""
    line = next((x for x in report.splitlines() if x.startswith(SOURCES)), "")
    was = {}
    for part in line[len(SOURCES) :].rstrip(".").split(", ") if line else []:
        name, _, d = part.partition(" ")
        was[name.strip("`")] = d
    out = []
    for n, d in now.items():
        if was.get(n) != d:
            what = "the digest file itself was edited" if n.endswith(FILE) else "changed"
            out.append(
                f"{n}: {what} since the report was written ({was.get(n, 'none')} -> {d})"
                + (
                    ": the runs are not compared with its lines (`fedrun-reproduce record` "
                    "writes it from the runs)"
                )
                * n.endswith(FILE)
            )
    return out


def self_edited(edits: list[str]) -> bool:
    """Whether :func:`edited`'s lines name the digest file itself: then its lines are no record
    to blame the runs by (:func:`changes` is not read)."""
    return any(e.startswith(f"reproduction/{FILE}: ") for e in edits)


def read(root: Path) -> dict[str, str]:
    path = root / FILE
    if not path.is_file():
        return {}
    out = {}
    for line in path.read_text().splitlines():
        d, sep, name = line.partition("  ")
        require(sep and len(d) == 16, f"{path}: not a digest line: {line[:80]!r}")
        out[name] = d
    return out


def _under(path: str, items: list[str]) -> bool:
    return any(path == i or path.startswith(i.rstrip("/") + "/") for i in items)


def record(root: Path, items: list[str]) -> dict[str, str]:
    """Record the digests of every file under ``items`` now (their old entries replaced; the
    other entries kept); the new entries."""
    kept = {p: d for p, d in read(root).items() if not _under(p, items)}
    new = current(root, items)
    atomic_write_text(
        root / FILE, "".join(f"{d}  {p}\n" for p, d in sorted({**kept, **new}.items()))
    )
    return new


def run_of(path: str, known: set[str]) -> str:
    """The run folder ``path`` lies in (the deepest folder above it that holds a run file, in
    ``known`` paths), else its folder."""
    parts = path.split("/")
    for k in range(len(parts) - 1, 0, -1):
        folder = "/".join(parts[:k])
        if any(f"{folder}/{f}" in known for f in RUN_FILES):
            return folder
    return "/".join(parts[:-1]) or path


def _causes(was: dict[str, str], now: dict[str, str]) -> list[tuple[str, str, list[str]]]:
    """(path, cause, the recorded paths it may come from) for every difference."""
    by_digest: dict[str, list[str]] = {}
    for p, d in sorted(was.items()):
        by_digest.setdefault(d, []).append(p)
    gone = {p for p in was if p not in now}
    out, moved_from = [], set()
    for p in sorted(now):
        d = now[p]
        if was.get(p) == d:
            continue
        src = [q for q in by_digest.get(d, []) if q != p]
        if p in was:  # changed in place: another changed file's recorded content, or an edit
            swapped = [q for q in src if now.get(q) != was[q]]
            out.append(
                (p, "holds the recorded content of {} (swapped)", swapped)
                if swapped
                else (p, "edited (now the same as the file of {})", src)
                if src
                else (p, "edited", [])
            )
        elif moved := sorted(set(src) & gone):
            moved_from.update(moved)
            out.append((p, "moved from {}", moved))
        elif src:
            out.append((p, "added, a copy of {}", src))
        else:
            out.append((p, "added", []))
    out += [(p, "deleted", []) for p in sorted(gone - moved_from)]
    return out


def changes(root: Path, claims: list[Claim]) -> list[str]:
    """One line per run (or file outside a run) and cause whose evidence differs from its
    record, naming the files (and the run they came from); nothing recorded is one line too."""
    items = scope(claims)
    was = {p: d for p, d in read(root).items() if _under(p, items) and evidence(p)}
    now = current(root, items)
    if not was:
        return [f"no digests of the evidence in {root / FILE} (fedrun-reproduce record)"]
    linked = links(root, items)
    known = set(was) | set(now)
    found: dict[tuple[str, str], list[tuple[str, set[str]]]] = {}  # (run, cause) -> its files
    for p, cause, src in _causes(was, now):
        if cause == "deleted" and _under(p, list(linked)):
            continue  # said once, as the link that replaced it
        found.setdefault((run_of(p, known), cause), []).append((p, {run_of(q, known) for q in src}))
    out = []
    for (run, cause), files in found.items():
        runs = [r for f in files for r in sorted(f[1])]
        source = max(set(runs), key=runs.count) if runs else ""  # the run most files came from
        names = ", ".join(p[len(run) + 1 :] or p for p, _ in files)
        tail = " (not recorded: fedrun-reproduce record, if it is evidence)" * (cause == "added")
        out.append(f"evidence {run}: {names} {cause.format(source)}{tail}")
    return out + [
        f"evidence {p}: a symbolic link to {target}, refused: evidence must be the repository's "
        f"own files (a clone holds a dangling link)"
        for p, target in linked.items()
    ]
