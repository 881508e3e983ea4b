"""The one exception type for bad input, and fedrun's exit codes."""

import difflib

# Exit codes (docs/robustness.md, "Faults and exit codes"; also the statuses' codes in summary.json): a sweep exits
# with its worst job's code.
EXIT = {"finished": 0, "diverged": 1, "error": 2, "internal": 3, "interrupted": 130}


class UserError(Exception):
    """A problem with the user's configuration, data or files, reported without a traceback."""


class Refusal(BaseException):
    """A :class:`UserError` raised from a Hydra callback before a run or sweep starts: a
    BaseException, because Hydra turns a callback's exceptions into warnings and goes on;
    ``cli.main`` prints it as one line, exit code 2."""


def refuse_in_callback(check, *args) -> None:
    """``check(*args)``, its :class:`UserError` raised as a :class:`Refusal`."""
    try:
        check(*args)
    except UserError as e:
        raise Refusal(str(e)) from None


def require(condition: bool, message: str) -> None:
    """Raise :class:`UserError` with ``message`` unless ``condition`` holds."""
    if not condition:
        raise UserError(message)


def closest(name: str, among) -> str | None:
    """The string of ``among`` closest to ``name`` (a misspelt key's "did you mean"), or None."""
    close = difflib.get_close_matches(name, [str(a) for a in among], n=1, cutoff=0.6)
    return close[0] if close else None


def is_overflow(e: BaseException) -> bool:
    """Arithmetic that overflowed the run's number type: a finite step too large (torch: "value
    cannot be converted to type float without overflow", or Python's :class:`OverflowError`)."""
    return isinstance(e, OverflowError) or isinstance(e, RuntimeError) and "without overflow" in str(e)


def squeeze(text: str, limit: int = 400) -> str:
    """``text`` on one line (whitespace runs become one space), cut at ``limit`` characters."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[:limit - 3] + "..."


def describe(exc: Exception) -> str:
    """The one-line message of a :class:`UserError`, or of an ``OSError`` (a file or folder
    that cannot be read or written: the path and the cause)."""
    if isinstance(exc, UserError):
        return squeeze(str(exc))
    if isinstance(exc, OSError) and exc.filename:
        return f"{exc.strerror or type(exc).__name__}: {exc.filename}"
    if isinstance(exc, OSError):
        return squeeze(f"{exc.strerror or type(exc).__name__}" + (f" ({exc})" if str(exc) else ""))
    return squeeze(str(exc))
