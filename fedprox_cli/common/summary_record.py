"""``summary.json``'s fields and their types (:class:`SummaryRecord`, what each means:
``runs.outputs``), and whether a value read has its field's type (:func:`typed`): the record
that :mod:`run_files` reads and ``runs.outputs.Summary`` writes."""

from __future__ import annotations

from types import UnionType
from typing import Any, TypedDict, Union, get_args, get_origin, get_type_hints


class SummaryRecord(TypedDict, total=False):
    """``summary.json``, every field typed (what each means: ``runs.outputs``). A field that a
    file holds with another type is left out by :func:`read_summary`, as if absent."""

    status: str  # running, finished, diverged, interrupted, error (sweeps: planned)
    error: str
    exit_code: int
    round: int
    T: int
    started_round: int
    final: dict[str, float]
    progress: str | None
    pid: int
    host: str
    started: str
    ended: str
    heartbeat: str
    slurm: dict[str, str]
    git_commit: str | None
    command: str
    versions: dict[str, str]
    device: str
    hardware: dict[str, Any]
    dimension: int
    engine: dict[str, Any]
    compile: dict[str, Any]
    data_source: str
    data: dict[str, Any]
    numerics: dict[str, Any]
    code: dict[str, Any]
    code_history: list[dict[str, Any]]


def _classes(hint: Any) -> tuple[type, ...]:
    """The classes a value of the type ``hint`` is an instance of (``dict[str, int]``: dict)."""
    if get_origin(hint) in (Union, UnionType):
        return tuple(c for a in get_args(hint) for c in _classes(a))
    return (get_origin(hint) or hint,)


SUMMARY_TYPES = {k: _classes(t) for k, t in get_type_hints(SummaryRecord).items()}


def typed(key: str, value: Any) -> bool:
    """Whether ``value`` has the type of summary field ``key`` (a bool is no int); a field not
    of :class:`SummaryRecord` (another tool's) is kept as it is."""
    classes = SUMMARY_TYPES.get(key)
    if classes is None:
        return True
    return isinstance(value, classes) and not (isinstance(value, bool) and bool not in classes)
