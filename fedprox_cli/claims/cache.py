"""What ``fedrun-reproduce list`` and ``plan`` printed for a claim, remembered between commands, so
that an unchanged claim is not read and recomputed again (reading every run folder of the
committed results takes tens of seconds; a remembered claim takes milliseconds).

An entry is keyed by everything its text can depend on, compared as digests:

- the command and its options (``list``, ``plan --device cpu``);
- the claim's declaration (its typed record, :mod:`.declare`, whole);
- the code that computes it: every ``.py`` and ``.yaml`` file of the package (path, size and
  modification time), so any change of the evidence, verdict or plan code recomputes;
- the files it may read: every file under the claim's run folders (relative path, size and
  modification time), and the files directly under the results root (benchmark files).

What the computation warned is kept with its text and said again. The entries live in one JSON
file per results folder under ``$XDG_CACHE_HOME/fedprox_cli/reproduce/`` (default
``~/.cache``), written atomically; an unreadable or stale file is recomputed, never an error.
Nothing is written to the results folder.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Callable

from .. import PACKAGE
from ..common import guarded
from ..common.errors import UserError
from ..common.files import atomic_write_text
from .declare import Claim


def _stats(folder: Path, files_only: bool = False) -> list[tuple[str, int, int]]:
    """(relative path, size, mtime_ns) of every file under ``folder`` (directly under it only,
    with ``files_only``), sorted; none if it does not exist."""
    out = []
    if files_only:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            return out
        for e in entries:
            if e.is_file(follow_symlinks=False):
                st = e.stat(follow_symlinks=False)
                out.append((e.name, st.st_size, st.st_mtime_ns))
        return sorted(out)
    for dirpath, dirs, files in os.walk(folder):
        dirs.sort()
        for name in files:
            path = os.path.join(dirpath, name)
            try:
                st = os.stat(path, follow_symlinks=False)
            except OSError:
                continue
            out.append((os.path.relpath(path, folder), st.st_size, st.st_mtime_ns))
    return sorted(out)


def _digest(*parts) -> str:
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()


class Cache:
    """The remembered texts of one results root (``root``: its ``reproduction/`` folder)."""

    def __init__(self, root: Path, command: str):
        self.root, self.command = Path(root), command
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "fedprox_cli" / "reproduce"
        self.file = base / f"{hashlib.sha256(str(self.root.resolve()).encode()).hexdigest()[:16]}.json"
        self.code = _digest([s for s in _stats(Path(PACKAGE)) if s[0].endswith((".py", ".yaml"))])
        self.top = _digest(_stats(self.root, files_only=True))
        try:
            self.entries = guarded.read_json(self.file) if self.file.exists() else {}
        except (OSError, UserError):  # unreadable or damaged: recomputed and written anew
            self.entries = {}
        if not isinstance(self.entries, dict):
            self.entries = {}
        self.used: dict = {}

    def key(self, claim: Claim) -> str:
        """The digest of everything ``claim``'s text may depend on (module docstring)."""
        folders = sorted({f for rs in claim.ran for f in (*rs.folders, rs.into) if f})
        return _digest(self.command, repr(claim), self.code, self.top,
                       [(f, _stats(self.root / f)) for f in folders])

    def text(self, claim: Claim, make: Callable[[Callable[[str], None]], str], warn: Callable[[str], None]) -> str:
        """``claim``'s text: remembered, or ``make(warn)``'s (its warnings remembered too)."""
        key = self.key(claim)
        entry = self.entries.get(key)
        if not (isinstance(entry, dict) and isinstance(entry.get("text"), str)):
            said: list[str] = []
            entry = {"text": make(lambda m: (said.append(m), warn(m))), "warnings": said}
        else:
            for m in entry.get("warnings", []):
                warn(m)
        self.used[key] = entry
        return entry["text"]

    def save(self) -> None:
        """Keep this command's entries with the other commands' (stale ones dropped: an entry
        of another command is kept, one of this command not used now is gone)."""
        kept = {k: v for k, v in self.entries.items() if isinstance(v, dict) and v.get("command") != self.command}
        for v in self.used.values():
            v["command"] = self.command
        try:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(self.file, json.dumps({**kept, **self.used}))
        except OSError:
            pass  # a cache that cannot be written costs time, never the answer
