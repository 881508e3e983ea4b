"""The one atomic writer: every file fedprox_cli writes goes through :func:`atomic_write`.

The content is written to a temp file created with :mod:`tempfile` in the destination folder
(a unique name even across cluster nodes sharing a file system), optionally fsync'ed, then
renamed over the destination: a reader sees the old file or the new one, never a half-written
one. On any failure (disk full, a file-size limit, a read-only folder, an exception in the
writer) the temp file is removed and the error propagates; the destination is untouched.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

_UMASK = os.umask(0)
os.umask(_UMASK)


def atomic_write(path: str | os.PathLike, write: Callable[[BinaryIO], object], *,
                 fsync: bool = False, suffix: str = "") -> None:
    """Call ``write(f)`` on a binary temp file beside ``path``, then rename it to ``path``.

    ``suffix`` ends the temp file's name, for writers that infer a format from it (a figure's
    ``.pdf``); ``fsync`` flushes the data to disk before the rename (checkpoints)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=f".tmp{suffix}", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            if fsync:
                os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp's 0o600 -> what open() would give
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    atomic_write(path, lambda f: f.write(text.encode()))
