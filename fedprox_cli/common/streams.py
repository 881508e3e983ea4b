"""The one way fedprox_cli writes to stdout and stderr: a write that cannot fail.

A run's result, status and exit code never depend on whether its output can be shown: stdout or
stderr may be closed (``2>&-``), a pipe whose reader has gone (``| head -1``), or unable to
encode the text (a folder named with non-UTF-8 bytes, a non-ASCII path under an ASCII locale).

- :func:`out`, :func:`err` and :func:`line` write one line; text a stream cannot encode is written
escaped
  (``\\udcff``), a stream that is closed or broken swallows the line.
- :func:`guard` (called first by every console script) makes ``sys.stdout`` and ``sys.stderr``
  such streams for everything else that writes to them -- tqdm's bars, logging handlers,
  Hydra -- and reopens a closed descriptor 0, 1 or 2 on ``/dev/null``, so that no file fedrun
  opens later takes its number.
- :func:`set_aside_stdout` keeps descriptor 1 for a child process's replies to its parent.

A pipe whose reader has gone is replaced by ``/dev/null`` at the descriptor, as the Python
documentation advises for SIGPIPE, so that Python's own flush at exit neither fails (exit
code 120) nor prints a ``BrokenPipeError``.
"""

from __future__ import annotations

import errno
import io
import os
import sys
from collections.abc import Callable
from typing import IO, Any, TextIO


class Safe(io.TextIOBase):
    """A text stream around ``stream`` (may be None: closed) whose writes and flushes never
    raise; unencodable text is escaped; the stream falls silent once it has failed."""

    def __init__(self, stream: IO[str] | None) -> None:
        self.stream = stream
        self.failed = stream is None

    def write(self, text: str) -> int:
        if self.stream is not None and not self.failed:  # None: failed from the start
            self._guarded(self.stream.write, escaped(text, getattr(self.stream, "encoding", None)))
        return len(text)

    def flush(self) -> None:
        if self.stream is not None and not self.failed:
            self._guarded(self.stream.flush)

    def _guarded(self, call: Callable[..., object], *args: str) -> None:
        try:
            call(*args)
        except (OSError, ValueError) as e:  # a closed stream: ValueError; a broken pipe: EPIPE
            self.failed = True
            if isinstance(e, OSError) and e.errno == errno.EPIPE and self.stream is not None:
                _silence(self.stream)

    def isatty(self) -> bool:
        try:
            return self.stream is not None and not self.failed and self.stream.isatty()
        except (OSError, ValueError):
            return False

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        if self.stream is None:
            raise io.UnsupportedOperation("fileno")
        return self.stream.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]  # typeshed: an attribute; here the stream's
        return getattr(self.stream, "encoding", None) or "utf-8"

    @property
    def errors(self) -> str:  # type: ignore[override]  # typeshed: an attribute; here a constant
        return "backslashreplace"

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def as_text(arg: str) -> str:
    """The text a command-line argument stands for: the bytes a locale could not decode (an
    ASCII locale's ``→``: surrogates, :func:`os.fsdecode`) read as UTF-8, and those that are
    no UTF-8 either as the bytes' ``\\xff``. For text only (a label, a value to match), never
    for a path, which the file system takes as the locale decoded it."""
    try:
        return arg.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a lone surrogate that is no byte of a name
        return arg.encode("utf-8", "backslashreplace").decode("utf-8")


def escaped(text: str, encoding: str | None = "utf-8") -> str:
    """``text`` with what ``encoding`` cannot encode as backslash escapes; the undecodable
    bytes of a file name (surrogates, :func:`os.fsdecode`) become the bytes' ``\\xff``."""
    encoding = encoding or "utf-8"
    try:
        text.encode(encoding)
        return text
    except (UnicodeEncodeError, LookupError):
        pass
    text = as_text(text)
    try:
        return text.encode(encoding, "backslashreplace").decode(encoding)
    except LookupError:
        return text.encode("ascii", "backslashreplace").decode("ascii")


def _silence(stream: IO[str]) -> None:
    """Point the descriptor of the broken ``stream`` at /dev/null, so that flushing what is left
    in its buffers (at exit too) succeeds."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, stream.fileno())
        finally:
            os.close(null)
    except (OSError, ValueError, AttributeError):
        pass


def _safe(stream: IO[str] | None) -> Safe:
    return stream if isinstance(stream, Safe) else Safe(stream)


def guard() -> None:
    """Make ``sys.stdout`` and ``sys.stderr`` :class:`Safe` (a console script's first step)."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:  # closed: keep the number from being taken by a file fedrun opens
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
    sys.stdout, sys.stderr = _safe(sys.stdout), _safe(sys.stderr)


def set_aside_stdout() -> TextIO:
    """Take descriptor 1 aside for this process's own replies (a drawing process's, read by its
    parent) and return it as a text stream; ``sys.stdout`` and descriptor 1 then write to
    stderr, so that nothing a library prints reaches the replies."""
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return replies


def line(stream: IO[str] | None, text: str) -> None:
    """Write ``text`` and a newline to ``stream`` (None: closed); never raises."""
    s = _safe(stream)
    s.write(text + "\n")
    s.flush()


def out(text: str = "") -> None:
    """Write ``text`` and a newline to stdout; never raises."""
    line(sys.stdout, text)


def err(text: str) -> None:
    """Write ``text`` and a newline to stderr; never raises."""
    line(sys.stderr, text)


def flush() -> None:
    """Flush stdout and stderr (a process that ends without Python's own flush at exit); never
    raises."""
    _safe(sys.stdout).flush()
    _safe(sys.stderr).flush()


def identity(stream: IO[str] | None = None) -> str:
    """``device:inode`` of the file, pipe or terminal behind ``stream`` (default: stderr; ``""``
    for none: closed, or not a file, as a capture in memory)."""
    try:
        st = os.fstat((sys.stderr if stream is None else stream).fileno())
    except (AttributeError, OSError, ValueError):
        return ""
    return f"{st.st_dev}:{st.st_ino}"


def debugging() -> bool:
    """Whether ``FEDRUN_DEBUG`` asks for tracebacks: set to anything but empty, ``0``, ``false``,
    ``no`` or ``off`` (any case)."""
    return os.environ.get("FEDRUN_DEBUG", "").strip().lower() not in ("", "0", "false", "no", "off")


def trace(e: BaseException) -> None:
    """With ``FEDRUN_DEBUG=1``: the traceback of ``e`` on stderr -- of the plugin's own exception
    when ``e`` reports one (its ``cause``, :func:`common.plugin_calls.calling`) -- printed before
    the
    error's one line; never raises."""
    if not debugging():
        return
    import traceback

    cause = getattr(e, "cause", None)
    shown = cause if isinstance(cause, BaseException) else e
    err("".join(traceback.format_exception(type(shown), shown, shown.__traceback__)).rstrip("\n"))
