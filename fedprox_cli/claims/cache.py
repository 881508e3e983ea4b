"""What ``fedrun-reproduce list`` and ``plan`` printed for a claim, remembered between commands, so
that an unchanged claim is not read and recomputed again (reading every run folder of the
committed results takes tens of seconds; a remembered claim takes milliseconds).

An entry is keyed by everything its text can depend on, compared as digests:

- the command and its options (``list``, ``plan --device cpu``);
- the claim's declaration (its typed record, :mod:`.declare`, whole);
- the code that computes it: every ``.py`` and ``.yaml`` file of the package (path and content
  digest), so any change of the evidence, verdict or plan code recomputes;
- the files it may read: every file under the claim's run folders (relative path and content
  digest), and the files directly under the results root (benchmark files).

Keys are digests of contents, never of a machine's paths or clocks, so the entries hold on any copy
of the same results and code. They live in the user's cache (:func:`path`:
``$XDG_CACHE_HOME/fedprox_cli/remembered.json``), never in the results: a command that reads
leaves the repository as it was. The file is written atomically when a command computed something
new, and keeps the :data:`KEEP` entries computed last; an unreadable file is recomputed, never an
error. A text names the results folder as the command was given it (plan's
``hydra.sweep.dir=...``, a finding's folder): it is remembered with that name replaced by a mark
and said with the asking command's own.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..common import guarded
from ..common.errors import UserError
from ..common.files import atomic_write_text, cache_folder
from ..common.package import PACKAGE
from .declare import Claim

ROOT = "<results root>"  # where a remembered text named the results folder it was computed on
KEEP = 2000  # entries kept (the latest computed): a few KB each


def path() -> Path:
    """The file of remembered texts, in fedprox_cli's cache (never in the results)."""
    return cache_folder() / "remembered.json"


def _content(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:16]


def _stats(folder: Path, files_only: bool = False) -> list[tuple[str, int, str]]:
    """(relative path, size, content digest) of every file under ``folder`` (directly under it
    only, with ``files_only``), sorted; none if it does not exist."""
    out: list[tuple[str, int, str]] = []
    if files_only:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            return out
        for e in entries:
            if e.is_file(follow_symlinks=False):
                try:
                    out.append((e.name, e.stat(follow_symlinks=False).st_size, _content(e.path)))
                except OSError:
                    continue
        return sorted(out)
    for dirpath, dirs, files in os.walk(folder):
        dirs.sort()
        for name in files:
            path = os.path.join(dirpath, name)
            try:
                out.append(
                    (
                        os.path.relpath(path, folder),
                        os.stat(path, follow_symlinks=False).st_size,
                        _content(path),
                    )
                )
            except OSError:
                continue
    return sorted(out)


def _digest(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()


class Cache:
    """The remembered texts of one results root (``root``: its ``reproduction/`` folder)."""

    def __init__(self, root: Path, command: str):
        self.root, self.command = Path(root), command
        self.file = path()
        self.code = _digest([s for s in _stats(Path(PACKAGE)) if s[0].endswith((".py", ".yaml"))])
        self.top = _digest(_stats(self.root, files_only=True))
        try:
            self.entries = guarded.read_json(self.file) if self.file.exists() else {}
        except (OSError, UserError):  # unreadable or damaged: recomputed and written anew
            self.entries = {}
        if not isinstance(self.entries, dict):
            self.entries = {}
        self.used: dict[str, Any] = {}

    def key(self, claim: Claim) -> str:
        """The digest of everything ``claim``'s text may depend on (module docstring)."""
        folders = sorted({f for rs in claim.ran for f in (*rs.folders, rs.into) if f})
        return _digest(
            self.command,
            repr(claim),
            self.code,
            self.top,
            [(f, _stats(self.root / f)) for f in folders],
        )

    def text(
        self,
        claim: Claim,
        make: Callable[[Callable[[str], None]], str],
        warn: Callable[[str], None],
    ) -> str:
        """``claim``'s text: remembered, or ``make(warn)``'s (its warnings remembered too)."""
        key, here = self.key(claim), str(self.root)
        entry = self.entries.get(key)
        if not (isinstance(entry, dict) and isinstance(entry.get("text"), str)):
            said: list[str] = []

            def noted(m: str) -> None:
                said.append(m)
                warn(m)

            text = make(noted)
            entry = {
                "text": text.replace(here, ROOT),
                "warnings": [m.replace(here, ROOT) for m in said],
            }
        else:
            for m in entry.get("warnings", []):
                warn(str(m).replace(ROOT, here))
        self.used[key] = entry
        kept: str = entry["text"]
        return kept.replace(ROOT, here)

    def save(self) -> None:
        """Add the entries this command computed to the file (the :data:`KEEP` computed last
        are kept); nothing computed anew: nothing is written."""
        new = {k: v for k, v in self.used.items() if k not in self.entries}
        if not new:
            return
        now = time.time()
        for v in new.values():
            v["computed"] = now
        merged = sorted(
            {**self.entries, **new}.items(),
            key=lambda kv: kv[1].get("computed", 0) if isinstance(kv[1], dict) else 0,
        )
        try:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(self.file, json.dumps(dict(merged[-KEEP:]), indent=0) + "\n")
        except OSError:
            pass  # a cache that cannot be written costs time, never the answer
