"""How a fault outside a run becomes one line: Hydra's, OmegaConf's and the OS's messages
squeezed (:func:`one_line`), and an internal error's traceback kept in :func:`crash_log`
(:func:`crash`). The fault contract is in :mod:`cli`."""

from __future__ import annotations

import difflib
import getpass
import os
import tempfile
import traceback
from collections.abc import Iterator
from pathlib import Path

from ..common import streams
from ..common.console import say
from ..common.dependencies import missing
from ..common.errors import (
    EXIT,
    UserError,
    closest,
    describe,
    exhausted,
    exhausted_line,
    no_parameter,
    squeeze,
)
from ..common.files import atomic_write_text
from ..config import extras, plugin_defaults
from .help import plugin_options


def crash_log() -> Path | None:
    """Where an internal error outside a run folder keeps its traceback: the temp folder's
    ``fedrun-error-<uid>.log``, one per user (users sharing a machine never overwrite each
    other's); None without a usable temp folder. Asked when needed, never at import."""
    try:
        folder = tempfile.gettempdir()
    except OSError:  # no temp folder that can be written
        return None
    who = os.getuid() if hasattr(os, "getuid") else getpass.getuser()
    return Path(folder) / f"fedrun-error-{who}.log"


_DROP = (
    "full_key:",
    "object_type",
    "reference_type",
    "Config search path",
    "provider=",
    "path=",
    "To append to your config",
    "Set the environment variable",
)


def one_line(exc: BaseException) -> str:
    """A Hydra/OmegaConf/OS error message squeezed into one readable line (a missing extra's
    config: the extra to install, :func:`extras.explain`)."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    missing = extras.explain(exc) or unknown_option(exc) or unknown_parameter(exc)
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


def _chain(exc: BaseException | None) -> Iterator[BaseException]:
    while exc is not None:
        yield exc
        exc = exc.__cause__ or exc.__context__


def unknown_option(exc: BaseException) -> str | None:
    """Hydra's "Could not find 'GROUP/NAME'" as one line: the closest options of the group,
    installed plugins that ship no YAML included, and, for a name close to none, how a method
    of one's own becomes an option; None for other errors."""
    from hydra.errors import MissingConfigException

    e = next((c for c in _chain(exc) if isinstance(c, MissingConfigException)), None)
    if e is None or not e.missing_cfg_file or "/" not in e.missing_cfg_file or e.options is None:
        return None
    group, _, name = e.missing_cfg_file.rpartition("/")
    options = sorted(set(e.options) | {o for o, _ in plugin_options(group)})
    close = difflib.get_close_matches(name, options, n=3, cutoff=0.6)
    line = f"unknown {group} {name!r}" + (f" (did you mean {' or '.join(close)}?)" if close else "")
    line += f"; the options: {', '.join(options)}"
    if not close and group in plugin_defaults.GROUPS:
        line += (
            "; to add one of your own: install its plugin package (pip install -e PATH, "
            f"docs/extending.md), "
            f"name its class by dotted path ({group}=my_module.MyClass), or add "
            f"{group}/{name}.yaml to "
            f"a config dir (--config-dir DIR)"
        )
    elif not close:
        line += f"; or add {group}/{name}.yaml to a config dir (--config-dir DIR)"
    return squeeze(line, 1000)


def unknown_parameter(exc: BaseException) -> str | None:
    """OmegaConf's "Key 'alpha' is not in struct" for ``GROUP.alpha=...`` as the validation's
    line (:func:`errors.no_parameter`: the keys the option takes and the ``--help`` command);
    None for other errors."""
    from omegaconf import DictConfig
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError

    from ..config.schema import GROUPS  # (torch: only for this error's line)

    e = next(
        (c for c in _chain(exc) if isinstance(c, (ConfigKeyError, ConfigAttributeError))), None
    )
    node, key, full = (getattr(e, a, None) for a in ("parent_node", "key", "full_key"))
    if not isinstance(node, DictConfig) or not isinstance(full, str) or full.count(".") != 1:
        return None
    group = full.split(".")[0]
    if group not in GROUPS or not isinstance(node.get("name"), str):
        return None
    return no_parameter(
        group, node.name, str(key), [str(k) for k in node.keys()], node.get("_target_")
    )


def did_you_mean(exc: BaseException) -> str:
    """`` (did you mean regularizer.lam?)`` for a key that is not in the config but close to one
    of its siblings (OmegaConf's error carries the node it was looked up in), else ``""``."""
    from omegaconf import DictConfig

    node, key, full = (getattr(exc, a, None) for a in ("parent_node", "key", "full_key"))
    if not isinstance(node, DictConfig) or not isinstance(key, str) or not isinstance(full, str):
        return ""
    close = closest(key, map(str, node.keys()))
    return f" (did you mean {full[: len(full) - len(key)]}{close}?)" if close else ""


def crash(e: BaseException) -> int:
    """An internal error outside a run folder: one line, the traceback in :func:`crash_log`;
    memory that ran out (at an import, say) and a package that is not installed are the
    environment's fault: their line, exit 2."""
    if exhausted(e) or missing(e):
        say(missing(e) or exhausted_line(e), "error")
        return EXIT["error"]
    if streams.debugging():
        raise e
    log, where = crash_log(), ""
    try:
        if log is not None:
            atomic_write_text(log, traceback.format_exc())
            where = f"; traceback in {log}"
    except OSError:
        pass
    say(f"internal error: {type(e).__name__}: {squeeze(str(e))}{where}")
    return EXIT["internal"]
