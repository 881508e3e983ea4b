"""One process at a time per run folder: an exclusive ``flock`` on ``RUN/.fedrun.lock``.

The operating system releases the lock when the holder's process ends, however it ends
(SIGKILL included), so a killed run never leaves a stale lock; the file itself stays and holds
the last holder's pid and host, which a refused second process names. ``flock`` locks belong
to an open file (not to a process, as ``fcntl`` record locks do), so a reader opening the file
in the holder's own process cannot release them; Linux maps them onto NFS byte-range locks, so
they also work across the nodes of a cluster sharing the folder.
"""

from __future__ import annotations

import fcntl
import os
import socket
from pathlib import Path

from ..common import run_files
from ..common.errors import UserError
from ..common.files import open_regular

refused: list[Path] = []  # the folders this process was refused because another held them
_held: dict[Path, int] = {}  # folder -> the descriptor of its lock file, for locks held here


class RunLock:
    """``with RunLock(run_dir):`` -- hold the folder's lock, or raise :class:`UserError`."""

    def __init__(self, run_dir: Path):
        self.path = Path(run_dir) / run_files.LOCK
        self._fd: int | None = None

    def __enter__(self) -> RunLock:
        fd = open_regular(self.path, os.O_RDWR | os.O_CREAT)  # no link, no FIFO
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 200).decode(errors="replace").strip() or "another process"
            os.close(fd)
            refused.append(self.path.parent)
            raise UserError(
                f"run folder {self.path.parent} is in use by {holder}; wait for it "
                f"to end or choose another run folder"
            ) from None
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"pid {os.getpid()} on host {socket.gethostname()}\n".encode())
        except OSError:  # a full disk: the lock holds without its holder's name
            pass
        self._fd = fd
        _held[self.path.parent] = fd
        return self

    def __exit__(self, *exc) -> None:
        if self._fd is not None:
            _held.pop(self.path.parent, None)
            os.close(self._fd)  # releases the lock
            self._fd = None


def moved(run_dir: Path) -> Path | None:
    """Where the folder ``run_dir``, whose lock this process holds, is now when it was renamed
    or moved while held (its lock file's open descriptor follows it: ``/proc/self/fd``); None
    when it was not, or cannot be told (not Linux, the folder deleted)."""
    fd = _held.get(Path(run_dir))
    if fd is None:
        return None
    try:
        here = os.stat(Path(run_dir) / run_files.LOCK)
        mine = os.fstat(fd)
        if (here.st_dev, here.st_ino) == (mine.st_dev, mine.st_ino):
            return None  # still where it was
    except FileNotFoundError:
        pass
    except OSError:
        return None
    try:
        now = Path(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        return None
    return None if now.name != run_files.LOCK or not now.parent.is_dir() else now.parent


def holder(run_dir: Path) -> str | None:
    """Who holds ``run_dir``'s lock now (``pid N on host H``), or None when no process does."""
    try:
        fd = open_regular(Path(run_dir) / run_files.LOCK)
    except OSError:  # missing, or not a lock file fedrun made (atomic.NotRegular)
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return None
    except BlockingIOError:
        return os.read(fd, 200).decode(errors="replace").strip() or "another process"
    finally:
        os.close(fd)


def is_held(run_dir: Path) -> bool:
    """Whether some process holds ``run_dir``'s lock now."""
    return holder(run_dir) is not None
