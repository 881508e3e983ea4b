"""The one exception type for bad input: printed as a single line, exit code 2."""


class UserError(Exception):
    """A problem with the user's configuration or data, reported without a traceback."""


def require(condition: bool, message: str) -> None:
    """Raise :class:`UserError` with ``message`` unless ``condition`` holds."""
    if not condition:
        raise UserError(message)
