"""How a fault outside a run becomes one line: Hydra's, OmegaConf's and the OS's messages
squeezed (:func:`one_line`), and an internal error's traceback kept in :data:`CRASH_LOG`
(:func:`crash`). The fault contract is in :mod:`cli`."""

from __future__ import annotations

import os
import tempfile
import traceback
from pathlib import Path

from hydra.errors import HydraException
from omegaconf import DictConfig
from omegaconf.errors import OmegaConfBaseException

from ..config import extras
from ..common.files import atomic_write_text
from ..common.console import say
from ..common.errors import EXIT, UserError, closest, describe, exhausted, exhausted_line, squeeze

CRASH_LOG = Path(tempfile.gettempdir()) / "fedrun-error.log"  # an internal error outside a run

_DROP = ("full_key:", "object_type", "reference_type", "Config search path", "provider=", "path=",
         "To append to your config", "Set the environment variable")


def one_line(exc: BaseException) -> str:
    """A Hydra/OmegaConf/OS error message squeezed into one readable line (a missing extra's
    config: the extra to install, :func:`extras.explain`)."""
    missing = extras.explain(exc)
    if missing:
        return missing
    if exhausted(exc):
        return exhausted_line(exc)
    if isinstance(exc, (OSError, UserError)) and not isinstance(exc, HydraException):
        return describe(exc)
    lines = []
    for line in str(exc).splitlines():
        line = line.strip()
        if not line or line.startswith(_DROP):
            continue
        if line.startswith("Config search path"):
            break
        lines.append(line.rstrip(":") + ":" if line.startswith("Available options") else line)
    text = " ".join(lines).replace(":\t", ": ").replace("\t", ", ") or type(exc).__name__
    if isinstance(exc.__cause__, OmegaConfBaseException):  # e.g. "Key 'x' is not in struct"
        text += " " + one_line(exc.__cause__)
    return squeeze(text + did_you_mean(exc))


def did_you_mean(exc: BaseException) -> str:
    """`` (did you mean regularizer.lam?)`` for a key that is not in the config but close to one
    of its siblings (OmegaConf's error carries the node it was looked up in), else ``""``."""
    node, key, full = (getattr(exc, a, None) for a in ("parent_node", "key", "full_key"))
    if not isinstance(node, DictConfig) or not isinstance(key, str) or not isinstance(full, str):
        return ""
    close = closest(key, node.keys())
    return f" (did you mean {full[:len(full) - len(key)]}{close}?)" if close else ""


def crash(e: BaseException) -> int:
    """An internal error outside a run folder: one line, the traceback in :data:`CRASH_LOG`;
    memory that ran out (at an import, say) is the environment's fault: its line, exit 2."""
    if exhausted(e):
        say(exhausted_line(e), "error")
        return EXIT["error"]
    if os.environ.get("FEDRUN_DEBUG"):
        raise e
    try:
        atomic_write_text(CRASH_LOG, traceback.format_exc())
        where = f"; traceback in {CRASH_LOG}"
    except OSError:
        where = ""
    say(f"internal error: {type(e).__name__}: {squeeze(str(e))}{where}")
    return EXIT["internal"]
