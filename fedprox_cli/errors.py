"""The one exception type for bad input: printed as a single line, exit code 2."""


class UserError(Exception):
    """A problem with the user's configuration or data, reported without a traceback."""


def require(condition: bool, message: str) -> None:
    """Raise :class:`UserError` with ``message`` unless ``condition`` holds."""
    if not condition:
        raise UserError(message)


def describe(exc: Exception) -> str:
    """The one-line message of a :class:`UserError`, or of an ``OSError`` (a file or folder
    that cannot be read or written)."""
    if isinstance(exc, OSError) and exc.filename:
        return f"{exc.strerror or type(exc).__name__}: {exc.filename}"
    return str(exc)
