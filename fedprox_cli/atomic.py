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
    f = _Watched(os.fdopen(fd, "wb"))
    try:
        with f.raw:
            write(f)
            f.flush()
            if fsync:
                os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp's 0o600 -> what open() would give
        os.replace(tmp, path)
    except BaseException as e:
        Path(tmp).unlink(missing_ok=True)
        cause = e if isinstance(e, OSError) else f.error  # a writer may wrap the OSError
        if cause is not None:  # one message naming the file the user knows, and the cause
            raise OSError(cause.errno, cause.strerror or str(cause), str(path)) from e
        raise


class _Watched:
    """A file object that remembers the OSError of a failed write, which writers such as
    ``torch.save`` turn into an exception of their own (a full disk, a file-size limit)."""

    def __init__(self, raw):
        self.raw, self.error = raw, None

    def write(self, data):
        try:
            return self.raw.write(data)
        except OSError as e:
            self.error = e
            raise

    def __getattr__(self, name):
        return getattr(self.raw, name)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    atomic_write(path, lambda f: f.write(text.encode()))
