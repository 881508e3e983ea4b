"""The error of a run folder's file that is there but cannot be read as what it must be,
naming the file by its full path (raised by :mod:`run_files`' readers)."""

from __future__ import annotations

import os

from . import guarded
from .errors import first_line


class RunFileError(guarded.Unreadable):
    """A file of a run folder that is there but cannot be read as what it must be; the
    message names the file by its full path and says what is wrong in a few words
    (``/runs/a/metrics.csv is cut (...)``): made from ``path`` and ``what``, so that no
    message can leave out where the file is."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        what: str,
        why: str = "",
        os_error: OSError | None = None,
    ):
        Exception.__init__(self, f"{path} {what}")
        self.path = path
        self.why, self.os_error = why or what, os_error

    @classmethod
    def unreadable(cls, path: str | os.PathLike[str], e: Exception) -> RunFileError:
        """``PATH is unreadable: WHY`` for the failure ``e`` of reading ``path`` (a
        :class:`guarded.Unreadable`'s reason, or the first line of any other error)."""
        if isinstance(e, guarded.Unreadable):
            return cls(path, f"is unreadable: {e.why}", e.why, e.os_error)
        why = first_line(e)
        return cls(path, f"is unreadable: {why}", why, e if isinstance(e, OSError) else None)
