"""A plugin's class named by its dotted path (``package.module.Class``): the one rule for
writing it, and the import of what it names."""

from __future__ import annotations

import os
import re
import sys
from importlib import import_module
from typing import Any

from .errors import UserError, squeeze

_DOTTED = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+$")


def dotted(spec: str) -> str | None:
    """The one rule for naming a plugin's class without installing it, the same in ``fedrun
    GROUP=...`` and ``fedrun-check-algorithm``: its dotted path ``package.module.Class``
    (importable from the current folder or ``PYTHONPATH``), returned as is; None for a plain
    name (a registered or installed one); any other spelling (``module:Class``, a file path) is
    one :class:`UserError` saying how to write it."""
    if _DOTTED.match(spec):
        return spec
    if re.match(r"^[A-Za-z_]\w*$", spec):
        return None
    raise UserError(
        f"{spec!r} is neither a plugin's name nor a dotted path to its class: write "
        f"package.module.Class (importable from the current folder or PYTHONPATH)"
    )


def located(target: str) -> Any:
    """The object at the dotted path ``target`` (``package.module.Attr``), importable from
    ``sys.path`` or the current folder (a console script's path lacks it: appended)."""
    module, _, attr = target.rpartition(".")
    try:
        if os.getcwd() not in sys.path and "" not in sys.path:
            sys.path.append(os.getcwd())
        return getattr(import_module(module), attr)
    except Exception as e:  # the user module's own fault: one line naming it
        raise UserError(
            f"{target} cannot be imported ({type(e).__name__}: "
            f"{squeeze(str(e), 200)}); a plugin's class by dotted path is "
            f"package.module.Class, importable from the current folder or PYTHONPATH"
        ) from None
