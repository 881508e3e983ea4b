"""One process at a time per run folder: an exclusive ``flock`` on ``RUN/.fedrun.lock``, and
the owner record beside it (:mod:`.owner`), checked before any start.

The operating system releases the lock when the holder's process ends, however it ends
(SIGKILL included), so a killed run never leaves a stale lock; the file itself stays and holds
the last holder's pid and host. ``flock`` locks belong to an open file (not to a process, as
``fcntl`` record locks do), so a reader opening the file in the holder's own process cannot
release them; Linux maps them onto NFS byte-range locks, so they also work across the nodes of
a cluster sharing the folder. A lock alone is never trusted: a deleted lock file, or a file
system whose ``flock`` does nothing, would let a second process in; the owner record, made with
``O_EXCL`` once the lock is taken, keeps it out (:meth:`RunLock._own`). A refused process names
the holder: the folder's owner, or a process that is not fedrun's (``/proc/locks``).
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket
from pathlib import Path

from ..common import run_files
from ..common.errors import UserError
from ..common.files import open_regular
from . import owner
from .owner import Owner

refused: list[Path] = []  # the folders this process was refused because another held them
_held: dict[Path, int] = {}  # folder -> the descriptor of its lock file, for locks held here


class RunLock:
    """``with RunLock(run_dir):`` -- hold the folder's lock and own it, or raise
    :class:`UserError` (nothing made in the folder stays)."""

    def __init__(self, run_dir: Path):
        self.path = Path(run_dir) / run_files.LOCK
        self._fd: int | None = None
        self._me: Owner | None = None

    def __enter__(self) -> RunLock:
        folder = self.path.parent
        made = not os.path.lexists(self.path)
        fd = open_regular(self.path, os.O_RDWR | os.O_CREAT)  # no link, no FIFO
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(folder, fd)
            os.close(fd)
            refused.append(folder)
            raise _in_use(folder, holder) from None
        except OSError as e:  # ENOLCK, EIO: no lock to be had here
            os.close(fd)
            if made:
                _unlink(self.path)
            raise UserError(
                f"cannot lock {self.path}: {os.strerror(e.errno or errno.ENOLCK)}: the file "
                f"system of the run folder provides no locks (flock), so fedrun cannot make "
                f"sure it is the folder's one writer; nothing was written: use a folder on a "
                f"file system with locks (a local disk, NFS with its lock service)"
            ) from None
        try:
            self._me = self._own(folder, fd)
        except UserError:
            os.close(fd)
            refused.append(folder)
            raise
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"pid {os.getpid()} on host {socket.gethostname()}\n".encode())
        except OSError:  # a full disk: the lock holds without its holder's name
            pass
        self._fd = fd
        _held[folder] = fd
        return self

    def _own(self, folder: Path, fd: int) -> Owner:
        """Record this process as ``folder``'s owner, once the lock is taken: refused while the
        recorded owner may still write there -- alive on this host, or on another host unless
        the lock proves it gone (the lock file it locked is this one and ``flock`` locks here);
        the record of an owner that has ended is replaced."""
        me = Owner.me(fd)
        locks = _locks_work(self.path)
        for _ in range(3):
            if owner.claim(folder, me):
                return me
            other = owner.read(folder)
            live = None if other is None else other.alive()
            if other is None or live is False or (other.pid, other.host) == (me.pid, me.host):
                owner.forget(folder)  # cut short, or its process has ended
            elif live is None and locks and other.lock == me.lock:
                owner.forget(folder)  # another host's, whose lock on this very file is free
            else:
                raise _in_use(folder, other.text(), why=_fooled(folder, locks, other, me))
        raise _in_use(folder, "another process")

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            folder = self.path.parent
            _held.pop(folder, None)
            if self._me is not None:
                owner.release(moved(folder) or folder, self._me)
            os.close(self._fd)  # releases the lock
            self._fd = None


def _in_use(folder: Path, holder: str, why: str = "") -> UserError:
    return UserError(
        f"run folder {folder} is in use by {holder}{why}; wait for it to end or choose another "
        f"run folder"
    )


def _fooled(folder: Path, locks: bool, other: Owner, me: Owner) -> str:
    """Why the lock let this process in although ``other`` owns the folder."""
    if other.host == me.host:
        return (
            " (this file system's flock does nothing; the folder's owner record names it)"
            if not locks
            else " (its lock file was deleted under it; the folder's owner record names it)"
        )
    return (
        f" as far as this host can tell (its lock file was replaced since it started, or "
        f"this file system's flock does nothing): if that process has ended, delete "
        f"{owner.path(folder)}"
    )


def _locks_work(path: Path) -> bool:
    """Whether ``flock`` locks here: a second open of the lock file, which this process holds,
    cannot lock it too (on a file system whose flock does nothing, it can)."""
    try:
        fd = open_regular(path, os.O_RDWR)
    except OSError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


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
    """Who holds ``run_dir`` now (``pid N on host H (started ...)``, or a process that is not
    fedrun's), or None when no process does: the lock's holder, or an owner alive on this host
    whose lock file was deleted under it."""
    try:
        fd = open_regular(Path(run_dir) / run_files.LOCK)
    except FileNotFoundError:  # deleted: the owner record tells
        fd = -1
    except OSError:  # not a lock file fedrun made (atomic.NotRegular)
        return None
    if fd >= 0:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _holder(Path(run_dir), fd)
        except OSError:  # no locks on this file system: the owner record tells
            pass
        finally:
            os.close(fd)
    recorded = owner.read(Path(run_dir))
    return recorded.text() if recorded is not None and recorded.alive() else None


def _holder(run_dir: Path, fd: int) -> str:
    """Who holds the lock open as ``fd``: the folder's recorded owner, an older fedrun that
    wrote its name into the lock file, or, named by the kernel's lock table, another program."""
    recorded = owner.read(run_dir)
    written = os.pread(fd, 200, 0).decode(errors="replace").strip()
    pid = _locking_pid(fd)
    if pid is None:  # no lock table here (another host holds it over NFS, not Linux)
        return recorded.text() if recorded is not None else written or "another process"
    if recorded is not None and recorded.pid == pid and recorded.host == owner.HERE:
        return recorded.text()
    if written.startswith(f"pid {pid} on host {owner.HERE}"):
        return written
    return f"pid {pid} ({_command(pid)}), which is not a fedrun run"


def _locking_pid(fd: int) -> int | None:
    """The pid the kernel's lock table (``/proc/locks``) gives for the flock on ``fd``'s file."""
    st = os.fstat(fd)
    dev = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        with open("/proc/locks") as table:
            for line in table:
                fields = line.split()
                if "->" in fields:  # a waiter
                    continue
                if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == dev:
                    return int(fields[4])
    except (OSError, ValueError):
        pass
    return None


def _command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip() or "a process"
    except OSError:
        return "a process gone or of another user"


def is_held(run_dir: Path) -> bool:
    """Whether some process holds ``run_dir``'s lock now."""
    return holder(run_dir) is not None
