"""The one gate of fedprox_cli's file operations: every file it writes, appends to, deletes or
locks, and every file it reads from a path a user controls, goes through this module.

- Only regular files are replaced, appended to or deleted, and a link is never followed when
  writing: the final component is checked with ``lstat`` (:func:`check_replaceable`) or opened
  with ``O_NOFOLLOW`` (:func:`open_regular`); a folder fedrun makes inside a run folder
  (``.hydra``, a tracker's subfolder) must be a real folder inside it (:func:`folder`).
  Anything else -- a symlink, a folder, a FIFO, a device node -- is one :class:`NotRegular`
  line and nothing is written.
- No open can hang: files are opened with ``O_NONBLOCK`` and checked with ``fstat`` to be
  regular files before a byte is read (a FIFO as a data file, lock or summary is refused).
- A write is not cut by a signal: Ctrl-C, SIGTERM or SIGUSR2 arriving during
  :func:`atomic_write` is held and delivered once the file is complete
  (:func:`signals.deferred`), so torch's and numpy's writers never see it.

The content is written to a temp file created with :mod:`tempfile` in the destination folder
(a unique name even across cluster nodes sharing a file system, :data:`TEMP`; ``flock``'ed by
its writer until renamed, so that a temp file no process holds is one a killed writer left, and
the next write of the same file deletes it: :func:`_clear_left`), fsync'ed, renamed over the
destination, and the folder fsync'ed (:func:`sync_folder`): a reader sees the old file or the
new one, never a half-written one, and after a crash of the machine the file is the old one
or the new one too. On any failure (any ``OSError``: a full disk, a file-size limit, a
read-only folder, EIO, EXDEV, at the temp file's open, a write, the fsync or the rename; an
exception in the writer) the temp file is removed and the error propagates as an ``OSError``
naming the destination; the destination is untouched.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, BinaryIO, Literal, TextIO, cast, overload

from .errors import UserError
from .signals import deferred

StrPath = str | os.PathLike[str]
"""A path as the user may give it."""

# How text is encoded into a file: UTF-8, and a character standing for a byte the locale could
# not decode (surrogates: a command-line argument under an ASCII locale) as that byte.
TEXT_BYTES = "surrogateescape"

_UMASK = os.umask(0)
os.umask(_UMASK)


def cache_folder() -> Path:
    """fedprox_cli's own cache: ``$XDG_CACHE_HOME/fedprox_cli`` (default ``~/.cache``), which
    holds the engine and compile records and the decoded datasets."""
    return Path(os.environ.get("XDG_CACHE_HOME") or "~/.cache").expanduser() / "fedprox_cli"


def atomic_write(
    path: StrPath,
    write: Callable[[BinaryIO], object],
    *,
    fsync: bool = True,
    suffix: str = "",
) -> None:
    """Call ``write(f)`` on a binary temp file beside ``path``, then rename it to ``path``.

    ``suffix`` ends the temp file's name, for writers that infer a format from it (a figure's
    ``.pdf``); ``fsync`` (default) flushes the data to disk before the rename and the folder's
    entry after it (cost: docs/robustness.md, "Durable writes")."""
    path = Path(path)
    check_replaceable(path)
    _clear_left(path)
    with deferred():
        _write_replace(path, write, fsync, suffix)


# The name of :func:`atomic_write`'s temp file: ``.<name>.<8 random characters>.tmp[<suffix>]``.
TEMP = re.compile(r"^\.(?P<name>.+)\.[A-Za-z0-9_]{8}\.tmp(\.[A-Za-z0-9]+)?$")


def temp_of(path: StrPath) -> str | None:
    """The name of the file whose :func:`atomic_write` left the temp file ``path`` (a process
    killed while writing it), or None when ``path`` is no such regular file."""
    m = TEMP.match(Path(path).name)
    try:
        return m["name"] if m and stat.S_ISREG(os.lstat(path).st_mode) else None
    except OSError:
        return None


def clear_temps(root: StrPath) -> list[Path]:
    """Delete the temp files (:func:`temp_of`) left in ``root`` and its real subfolders by
    killed writers; only for a folder whose writer's lock is held. Returns those deleted."""
    gone: list[Path] = []
    for dirpath, _, filenames in os.walk(root):  # os.walk follows no link to a folder
        for name in filenames:
            p = Path(dirpath) / name
            if temp_of(p):
                p.unlink(missing_ok=True)
                gone.append(p)
    return gone


def _clear_left(path: Path) -> None:
    """Delete the temp files of ``path`` (:data:`TEMP`) that writers killed while writing it
    left beside it: those no process holds (a live writer ``flock``s its temp file until it is
    renamed: :func:`_held_temp`). A file system without locks keeps them."""
    try:
        names = [e.name for e in os.scandir(path.parent) if temp_of(e.path) == path.name]
    except OSError:
        return
    for name in names:
        try:
            fd = os.open(path.parent / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held: a live writer's
            os.unlink(path.parent / name)
        except OSError:
            pass
        finally:
            os.close(fd)


def _held_temp(path: Path, suffix: str) -> tuple[int, str]:
    """A new temp file for ``path``, ``flock``'ed: never taken for a killed writer's
    (:func:`_clear_left`). One deleted by such a cleaner before the lock was taken is
    replaced by another."""
    while True:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=f".tmp{suffix}", dir=path.parent)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:  # a file system without locks: a temp file left stays for clear_temps
            return fd, tmp
        if os.fstat(fd).st_nlink:
            return fd, tmp
        os.close(fd)


def _write_replace(
    path: Path, write: Callable[[BinaryIO], object], fsync: bool, suffix: str
) -> None:
    try:
        fd, tmp = _held_temp(path, suffix)
    except OSError as e:  # no room for the temp file's entry: named by the file the user knows
        raise OSError(e.errno, e.strerror or str(e), str(path)) from e
    f = _Watched(os.fdopen(fd, "wb"))
    try:
        with f.raw:  # closed, and its lock let go, once renamed
            write(cast(BinaryIO, f))  # f forwards every call but write to its BinaryIO
            f.flush()
            if fsync:
                os.fsync(f.fileno())
            os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp's 0o600 -> what open() would give
            os.replace(tmp, path)
    except BaseException as e:
        _unlink_quietly(tmp)
        cause = e if isinstance(e, OSError) else f.error  # a writer may wrap the OSError
        if cause is not None:  # one message naming the file the user knows, and the cause
            raise OSError(cause.errno, cause.strerror or str(cause), str(path)) from e
        raise
    if fsync:
        try:
            sync_folder(path.parent)
        except OSError as e:
            raise OSError(e.errno, e.strerror or str(e), str(path)) from e


def _unlink_quietly(path: str) -> None:
    """Remove a temp file after a failed write; a folder that refuses it (EIO, read-only) keeps
    it for :func:`clear_temps`, and the write's own error is the one reported."""
    try:
        Path(path).unlink(missing_ok=True)
    except OSError:
        pass


NO_FOLDER_SYNC = (
    errno.EINVAL,
    errno.ENOTSUP,
    errno.EBADF,
)  # file systems that cannot fsync a folder


def sync_folder(folder: StrPath) -> None:
    """fsync ``folder`` so that its entries (a rename into it) survive a crash of the machine;
    a file system that cannot (:data:`NO_FOLDER_SYNC`) is left as it is."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    except OSError as e:
        if e.errno not in NO_FOLDER_SYNC:
            raise
    finally:
        os.close(fd)


class _Watched:
    """A file object that remembers the OSError of a failed write, which writers such as
    ``torch.save`` turn into an exception of their own (a full disk, a file-size limit)."""

    def __init__(self, raw: BinaryIO) -> None:
        self.raw = raw
        self.error: OSError | None = None

    def write(self, data: bytes) -> int:
        try:
            return self.raw.write(data)
        except OSError as e:
            self.error = e
            raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)


def atomic_write_text(path: StrPath, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically; a character that stands for a byte the
    locale could not decode (a command-line argument under an ASCII locale) is written as that
    byte (:data:`TEXT_BYTES`)."""
    atomic_write(path, lambda f: f.write(text.encode("utf-8", TEXT_BYTES)))


def write_text_in_place(path: StrPath, text: str) -> None:
    """:func:`atomic_write_text`, or when that fails in any way (a full disk, a rename refused:
    EIO, EROFS, EXDEV, EACCES on the temp file, ...) and ``path`` is a regular file already,
    its text overwritten in place (and fsync'ed): a small file's blocks are reused and no
    new entry is made, so a run's record can still tell how it ended. Not atomic: for that
    last word only. When both fail, the first error propagates."""
    try:
        atomic_write_text(path, text)
    except NotRegular:
        raise
    except OSError as e:
        data = text.encode("utf-8", TEXT_BYTES)
        try:
            fd = open_regular(path, os.O_WRONLY)
        except OSError:
            raise e from None
        try:
            with deferred():
                os.pwrite(fd, data, 0)
                os.ftruncate(fd, len(data))
                os.fsync(fd)
        except OSError:
            raise e from None
        finally:
            os.close(fd)


class NotRegular(UserError, OSError):
    """A path fedrun would read, write or delete is not a regular file (or a folder it makes is
    not a real folder): bad input (a :class:`UserError`) that every handler of a file that
    cannot be read or written (an ``OSError``) also catches."""

    def __init__(self, path: StrPath, what: str):
        super().__init__(
            f"{path} is {what}; fedrun reads, replaces and deletes only regular "
            f"files and follows no link when writing: remove it or choose another folder"
        )


def as_mkdir(folder: StrPath) -> None:
    """Give ``folder``, made by :func:`tempfile.mkdtemp` (mode 0o700: its maker's alone), the
    mode ``mkdir`` gives under this process's umask, so that a folder it is renamed to is as
    readable as any other (a shared cache read by another user)."""
    os.chmod(folder, 0o777 & ~_UMASK)


def _what(mode: int) -> str:
    for test, what in (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a device node"),
        (stat.S_ISBLK, "a device node"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return what
    return "not a regular file"


def check_replaceable(path: StrPath) -> None:
    """Refuse (:class:`NotRegular`) a ``path`` that exists and is not a regular file itself (a
    link to one included): it may be replaced or deleted only when missing or regular."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISREG(mode):
        raise NotRegular(path, _what(mode))


def check_readable(path: StrPath) -> None:
    """Refuse (:class:`NotRegular`) a ``path`` that exists and is not a regular file once links
    are followed, before a reader that takes a path (gzip, PIL, scikit-learn) opens it."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return  # missing: the reader says so
    if not stat.S_ISREG(mode):
        raise NotRegular(path, _what(mode))


def open_regular(path: StrPath, flags: int = os.O_RDONLY, follow: bool = False) -> int:
    """A descriptor of the regular file ``path``, opened without blocking (a FIFO never hangs)
    and, unless ``follow``, without following a link; anything else is :class:`NotRegular`.
    ``flags`` may add ``O_CREAT`` (mode 0o666 less the umask), ``O_APPEND``, ..."""
    extra = os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags | extra, 0o666)
    except OSError as e:
        if e.errno == errno.ELOOP and not follow:
            raise NotRegular(path, "a symbolic link") from None
        if e.errno in (errno.ENXIO, errno.EISDIR):  # a FIFO without reader, a folder
            raise NotRegular(path, _what(os.lstat(path).st_mode)) from None
        raise
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise NotRegular(path, _what(mode))
    return fd


@overload
def open_file(
    path: StrPath, mode: Literal["rb"] = "rb", follow: bool = True, **kwargs: Any
) -> BinaryIO: ...
@overload
def open_file(
    path: StrPath, mode: Literal["r", "a"], follow: bool = True, **kwargs: Any
) -> TextIO: ...
def open_file(path: StrPath, mode: str = "rb", follow: bool = True, **kwargs: Any) -> IO[Any]:
    """:func:`open_regular` as a Python file object (``mode`` r / rb / a); reading follows links
    (a data set may be one), appending does not."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT if mode.startswith("a") else os.O_RDONLY
    return open(
        open_regular(path, flags, follow=follow and not mode.startswith("a")), mode, **kwargs
    )


def read_text(path: StrPath) -> str:
    """The text of the regular file ``path`` (UTF-8)."""
    with open_file(path, "r", encoding="utf-8") as f:
        return f.read()


def inside(root: StrPath, relative: StrPath) -> Path:
    """``relative`` as a path that stays inside ``root`` (relative, without ``..``), or the
    refusal (:class:`UserError`); checked before anything is made, by runs and dry runs alike."""
    rel = Path(relative)
    if rel.is_absolute() or ".." in rel.parts:
        raise UserError(f"{relative} must be a folder inside {root} (relative, without ..)")
    return rel


def folder(root: StrPath, relative: StrPath) -> Path:
    """The folder ``root/relative``, made if missing, every component a real folder (no link)
    inside ``root``; an absolute ``relative`` or one with ``..`` is refused."""
    rel = inside(root, relative)
    path = Path(root)
    for part in rel.parts:
        path = path / part
        try:
            path.mkdir()
        except FileExistsError:
            pass
        mode = os.lstat(path).st_mode
        if not stat.S_ISDIR(mode):
            raise NotRegular(path, f"{_what(mode)}, not a folder")
    return path


def remove(path: StrPath) -> None:
    """Delete the file ``path`` if it is there: a regular file, or a link (the link goes, never
    what it points to); anything else is :class:`NotRegular`."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
        raise NotRegular(path, _what(mode))
    Path(path).unlink(missing_ok=True)
