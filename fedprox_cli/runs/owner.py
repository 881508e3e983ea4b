"""Who owns a run folder: the owner record ``RUN/.fedrun.owner`` beside the lock.

The lock (:mod:`.lock`) alone can be fooled: a deleted ``.fedrun.lock`` is made anew and locked
by a second process while the first still writes, and on a file system whose ``flock`` does
nothing (NFS mounted with ``local_lock``) every process "holds" it. So the process that takes the
lock also records itself -- pid, host, the boot and the process's start time (which tell a live
process from a later one with its pid), the time it started and which lock file it locked -- in
a file made with ``O_EXCL`` (one process makes it, however many try at once), and deletes it
when it lets the folder go. A process about to start in the folder reads that record first: an
owner alive on this host refuses the start; an owner on another host, whose life cannot be seen
from here, refuses it unless the lock proves that owner gone (the same lock file, which
``flock`` really locks, free); a record whose owner has ended (killed: the OS released its
lock, nothing deleted the record) is replaced.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from ..common import guarded, run_files
from ..common.files import open_regular

HERE = socket.gethostname()


def _boot() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _start(pid: int) -> int | None:
    """The start time of process ``pid`` in clock ticks since boot (``/proc/PID/stat``, field
    22), None where it cannot be read (gone, not Linux)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


@dataclass(frozen=True)
class Owner:
    """One process owning a run folder."""

    pid: int
    host: str
    boot: str = ""
    start: int | None = None  # clock ticks since boot (:func:`_start`)
    started: str = ""  # its wall time, for people
    lock: tuple[int, int] | None = None  # (device, inode) of the lock file it locked

    @classmethod
    def me(cls, lock_fd: int) -> Owner:
        st = os.fstat(lock_fd)
        when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
        return cls(os.getpid(), HERE, _boot(), _start(os.getpid()), when, (st.st_dev, st.st_ino))

    def alive(self) -> bool | None:
        """Whether the process lives: True or False on this host (and boot), None elsewhere."""
        if self.host != HERE or (self.boot and _boot() and self.boot != _boot()):
            return None if self.host != HERE else False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # another user's live process
            pass
        return self.start is None or _start(self.pid) in (None, self.start)

    def text(self) -> str:
        return f"pid {self.pid} on host {self.host}" + (
            f" (started {self.started})" if self.started else ""
        )


def path(run_dir: Path) -> Path:
    return Path(run_dir) / run_files.OWNER


def read(run_dir: Path) -> Owner | None:
    """The recorded owner of ``run_dir``, None when there is none (or the record is no owner
    record: a file cut short by a crash says nothing)."""
    try:
        d = guarded.read_json(path(run_dir))
        lock = d.get("lock")
        return Owner(
            int(d["pid"]),
            str(d["host"]),
            str(d.get("boot", "")),
            None if d.get("start") is None else int(d["start"]),
            str(d.get("started", "")),
            (int(lock[0]), int(lock[1])) if lock else None,
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError):
        return None


def claim(run_dir: Path, me: Owner) -> bool:
    """Record ``me`` as ``run_dir``'s owner unless a record is there (``O_EXCL``): False when
    one is. A record that cannot be made or written (a full disk, a read-only folder, whose
    fault the run's first write reports) leaves the lock alone to guard the folder."""
    data = json.dumps(
        {
            "pid": me.pid,
            "host": me.host,
            "boot": me.boot,
            "start": me.start,
            "started": me.started,
            "lock": list(me.lock) if me.lock else None,
        }
    ).encode()
    try:
        fd = open_regular(path(run_dir), os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    except FileExistsError:
        return False
    except OSError:
        return True
    try:
        os.write(fd, data)
    except OSError:
        forget(run_dir)
    finally:
        os.close(fd)
    return True


def release(run_dir: Path, me: Owner) -> None:
    """Delete ``run_dir``'s owner record if it is ``me``'s (or cut short while being made)."""
    now = read(run_dir)
    if now is None or (now.pid, now.host) == (me.pid, me.host):
        with contextlib.suppress(OSError):
            path(run_dir).unlink()


def forget(run_dir: Path) -> None:
    """Delete the record of an owner that has ended."""
    with contextlib.suppress(FileNotFoundError):
        path(run_dir).unlink()
