"""The one exception type for bad input, and fedrun's exit codes."""

import difflib
import errno
from collections.abc import Callable, Iterable

# Exit codes (docs/robustness.md, "Faults and exit codes"; also the statuses' codes in
# summary.json): a sweep exits with its worst job's code. 130 also for a stop signal before a
# run starts, from a command's first instant (cli/commands.py); 2 also for a package that is not
# installed (dependencies.py).
EXIT = {"finished": 0, "diverged": 1, "error": 2, "internal": 3, "interrupted": 130}


class UserError(Exception):
    """A problem with the user's configuration, data or files, reported without a traceback."""


class Refusal(BaseException):
    """A :class:`UserError` raised from a Hydra callback before a run or sweep starts: a
    BaseException, because Hydra turns a callback's exceptions into warnings and goes on;
    ``cli.main`` prints it as one line, exit code 2."""


def refuse_in_callback(check: Callable[..., object], *args: object) -> None:
    """``check(*args)``, its :class:`UserError` raised as a :class:`Refusal`."""
    try:
        check(*args)
    except UserError as e:
        raise Refusal(str(e)) from None


def require(condition: object, message: str) -> None:
    """Raise :class:`UserError` with ``message`` unless ``condition`` holds."""
    if not condition:
        raise UserError(message)


def closest(name: str, among: Iterable[str]) -> str | None:
    """The string of ``among`` closest to ``name`` (a misspelt key's "did you mean"), or None."""
    close = difflib.get_close_matches(name, [str(a) for a in among], n=1, cutoff=0.6)
    return close[0] if close else None


def is_overflow(e: BaseException) -> bool:
    """Arithmetic that overflowed the run's number type: a finite step too large (torch: "value
    cannot be converted to type float without overflow", or Python's :class:`OverflowError`)."""
    return (
        isinstance(e, OverflowError) or isinstance(e, RuntimeError) and "without overflow" in str(e)
    )


def squeeze(text: str, limit: int = 400) -> str:
    """``text`` on one line (whitespace runs become one space), cut in the middle to ``limit``
    characters (:func:`shorten`): a line keeps its end, where it names the file and line at
    fault (``(init at FILE:LINE)``)."""
    return shorten(" ".join(str(text).split()), limit)


USER_LINE = 1000  # the longest line of a UserError (a plugin error's paths included)


def shorten(value: str, limit: int = 300) -> str:
    """A long value (a path, a name) cut in the middle to ``limit`` characters, keeping its
    start and its end (a file's name): a line never repeats a 100 KB folder name whole."""
    return (
        value
        if len(value) <= limit
        else f"{value[: limit // 2 - 2]}...{value[-(limit // 2 - 1) :]}"
    )


def describe(exc: Exception) -> str:
    """The one-line message of a :class:`UserError`, or of an ``OSError`` (a file or folder
    that cannot be read or written: the path and the cause)."""
    if isinstance(exc, UserError):  # fedrun's words; what it quotes is bounded where quoted
        return squeeze(str(exc), USER_LINE)
    if isinstance(exc, OSError) and exc.filename:
        return f"{exc.strerror or type(exc).__name__}: {shorten(str(exc.filename))}"
    if isinstance(exc, OSError):
        return squeeze(f"{exc.strerror or type(exc).__name__}" + (f" ({exc})" if str(exc) else ""))
    return squeeze(str(exc))


# Messages of an allocation that failed, as libraries word them (glibc's loader, torch, C++).
_NO_MEMORY = (
    "cannot allocate memory",
    "can't allocate memory",
    "failed to map segment",
    "out of memory",
    "std::bad_alloc",
    "failed to allocate",
)


def exhausted(e: BaseException) -> bool:
    """Whether ``e`` is memory that ran out -- the machine's, the process's limit (``ulimit
    -v``) or the GPU's: ``MemoryError``, torch's ``OutOfMemoryError``, ENOMEM, or an
    ImportError/OSError/RuntimeError saying so (a library that could not be mapped at import).
    The environment's fault, never a bug (exit 2)."""
    if isinstance(e, MemoryError) or type(e).__name__ == "OutOfMemoryError":
        return True
    if isinstance(e, OSError) and e.errno == errno.ENOMEM:
        return True
    return isinstance(e, (RuntimeError, ImportError, OSError)) and any(
        m in str(e).lower() for m in _NO_MEMORY
    )


def exhausted_line(e: BaseException) -> str:
    """The one line of :func:`exhausted`: what ran out, where, and what to change. Built from
    the exception's type and a short slice of its message only (little memory is left)."""
    gpu = type(e).__name__ == "OutOfMemoryError"
    what = "the GPU's memory" if gpu else "the machine's memory (or the process's limit: ulimit -v)"
    where = " while loading a library" if isinstance(e, ImportError) else ""
    cause = type(e).__name__ + (f": {squeeze(str(e), 160)}" if str(e) else "")
    fix = (
        "raise the limit or run where more memory is free"
        if where
        else "reduce n, B, oracle.memory_gb or the model, or run where more memory is free"
    )
    return f"out of memory: {what} ran out{where} ({cause}); {fix}"


def did_you_mean(key: str, among: Iterable[str], prefix: str = "") -> str:
    """``; did you mean regularizer.lam?`` for the key of ``among`` closest to ``key``, or
    ``""``."""
    close = closest(key, among)
    return f"; did you mean {prefix}{close}?" if close else ""


HELP_PAGES = (
    "algorithm",
    "regularizer",
    "compressor",
)  # groups with a page: fedrun GROUP=NAME --help


def no_parameter(
    group: str, name: str, param: str, takes: Iterable[str], target: str | None = None
) -> str:
    """The line for ``GROUP.PARAM=...`` on an option ``name`` (a class at ``target``, the
    ``_target_`` it names) that has no such key: the keys it takes, the closest one, and the
    command that describes them (the same words whether Hydra or the validation finds it)."""
    keys = sorted(k for k in takes if k not in ("name", "_target_"))
    page = (
        f"`fedrun {group}={target or name} --help` describes them"
        if group in HELP_PAGES
        else "`fedrun --help` lists the settings"
    )
    return (
        f"{group} {name} has no parameter {param} "
        f"(it takes: {', '.join(keys) or 'nothing'}; {page})"
        f"{did_you_mean(param, keys, group + '.')}"
    )


def first_line(e: BaseException) -> str:
    """The first line of ``e``'s message, or its type's name."""
    return (str(e).strip().splitlines() or [type(e).__name__])[0]
