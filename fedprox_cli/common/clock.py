"""The time stamp of fedrun's records (``summary.json``'s times, ``fedrun.log``'s lines)."""

from __future__ import annotations

import datetime as dt


def now() -> str:
    """The current UTC time, ISO 8601 to the second."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
