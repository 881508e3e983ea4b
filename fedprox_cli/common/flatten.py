"""Nested config dicts as flat ``{"a.b": value}`` dicts (one helper for resume checks and
reports)."""

from __future__ import annotations

from typing import Any


def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}, "c": [1, 2]}`` -> ``{"a.b": 1, "c": (1, 2)}`` (lists as tuples, so the
    values are hashable)."""
    out = {}
    for k, v in d.items():
        name = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, name + "."))
        else:
            out[name] = tuple(v) if isinstance(v, list) else v
    return out
