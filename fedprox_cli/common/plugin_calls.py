"""Calls into a plugin's code, reported as the plugin's: what a call raises, or a result of the
wrong kind, becomes one :class:`PluginError` naming the plugin, the call and the plugin's own
line (exit code 2), not an internal error of fedrun."""

from __future__ import annotations

import inspect
import os
import sys
import sysconfig
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from inspect import isfunction
from pathlib import Path
from types import TracebackType
from typing import TypeVar

from .errors import UserError, is_overflow, squeeze
from .package import PACKAGE

T = TypeVar("T")


def builtin(obj: object) -> bool:
    """Whether ``obj`` (a class, function or instance) is fedprox_cli's own."""
    module = getattr(obj, "__module__", None) or type(obj).__module__
    return module.split(".")[0] == "fedprox_cli"


def origin(obj: object) -> str:
    """``package.module.Name`` of a plugin's class or function (of an instance: its class)."""
    cls = obj if isinstance(obj, type) or isfunction(obj) else type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


class PluginError(UserError):
    """A plugin broke its contract: the user's code, reported as bad input (exit code 2);
    ``cause``: the plugin's own exception, where one was raised."""

    cause: BaseException | None = None


def _tree(obj: object) -> tuple[str, ...]:
    """The files that are the plugin's own: its module's file, and its top-level package's
    folder when it is a package (a plugin's helpers in sibling modules are its own too)."""
    cls = obj if isinstance(obj, type) or isfunction(obj) else type(obj)
    module = sys.modules.get(getattr(cls, "__module__", "") or "")
    top = sys.modules.get((getattr(cls, "__module__", "") or "").split(".")[0])
    own = [getattr(module, "__file__", None)]
    top_file = getattr(top, "__file__", None)
    if top is not None and getattr(top, "__path__", None) and top_file:
        own.append(str(Path(top_file).parent) + os.sep)
    return tuple(str(f) for f in own if f)


def _library(filename: str) -> bool:
    """A file of fedprox_cli, of Python or of an installed library (torch, numpy...)."""
    roots = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    return filename.startswith((str(PACKAGE), *roots)) or filename.startswith("<")


def own_frame(obj: object, tb: TracebackType | None) -> str | None:
    """``file:line`` of the plugin's deepest own frame in the traceback ``tb``: in the plugin's
    module or package (:func:`_tree`), else the deepest frame outside fedprox_cli, Python and
    the installed libraries, else the deepest outside fedprox_cli; None if none."""
    frames = traceback.extract_tb(tb)
    own = _tree(obj)
    tests: tuple[Callable[[traceback.FrameSummary], bool], ...] = (
        lambda f: f.filename.startswith(own) if own else False,
        lambda f: not _library(f.filename),
        lambda f: not f.filename.startswith(str(PACKAGE)),
    )
    for test in tests:
        hits = [f for f in frames if test(f)]
        if hits:
            return f"{hits[-1].filename}:{hits[-1].lineno}"
    return None


def source_line(obj: object, method: str) -> str:
    """``file:line`` where the plugin's ``method`` is defined (its class's line if it cannot
    be found)."""
    cls = obj if isinstance(obj, type) else type(obj)
    for target in (getattr(cls, method, None), cls):
        if not callable(target):
            continue
        try:
            target = inspect.unwrap(target)
            return f"{inspect.getsourcefile(target)}:{inspect.getsourcelines(target)[1]}"
        except (TypeError, OSError):
            continue
    return "?"


def return_lines(obj: object, method: str) -> str | None:
    """``file:line`` of the ``return`` statements of the plugin's ``method`` (``file:l1, l2``
    for several; those of functions nested in it left out): where a value it returned was
    handed back. None where its source cannot be read."""
    import ast
    import textwrap

    cls = obj if isinstance(obj, type) else type(obj)
    try:
        target = inspect.unwrap(getattr(cls, method))
        lines, start = inspect.getsourcelines(target)
        tree = ast.parse(textwrap.dedent("".join(lines)))
        file = inspect.getsourcefile(target)
    except (AttributeError, TypeError, OSError, SyntaxError):
        return None
    found: list[int] = []
    todo = list(ast.iter_child_nodes(tree.body[0])) if tree.body else []
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Return):
            found.append(node.lineno + start - 1)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(node))
    return f"{file}:{', '.join(map(str, sorted(found)))}" if found and file else None


def handed_back(obj: object, method: str) -> str:
    """Where a value the plugin's ``method`` returned was handed back: ``returned at FILE:LINE``
    (its ``return`` statements, :func:`return_lines`), else ``METHOD at FILE:LINE`` (where it
    is defined)."""
    back = return_lines(obj, method)
    return f"returned at {back}" if back else f"{method} at {source_line(obj, method)}"


def shown(value: object) -> str:
    """A value in a contract line: a tensor by its shape, dtype and device (never its numbers),
    a dict by its entries so described, anything else by a short repr."""
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return f"a {type(value).__name__} of shape {tuple(value.shape)} ({value.dtype}" + (
            f" on {value.device})" if hasattr(value, "device") else ")"
        )
    if isinstance(value, dict):
        return squeeze("{" + ", ".join(f"{k!r}: {shown(v)}" for k, v in value.items()) + "}", 200)
    if isinstance(value, (tuple, list)) and any(hasattr(v, "shape") for v in value):
        return squeeze(f"a {type(value).__name__} of " + ", ".join(shown(v) for v in value), 200)
    return squeeze(repr(value), 80)


_PASS = (
    "OutOfMemoryError",  # torch's: the machine's, not the plugin's
    "GreenletExit",
)  # a seed batch's suspended run being ended (engine/lockstep.py): fedrun's own


@contextmanager
def calling(obj: object, kind: str, what: str, name: str | None = None) -> Iterator[None]:
    """Run a call into ``obj`` (a plugin's object) so that what it raises is reported as the
    plugin's: one :class:`PluginError` naming the plugin (``name``: its config name, if ``obj``
    has no ``name``), the call and the plugin's deepest own line (:func:`own_frame`). Anything
    it raises counts -- ``SystemExit``, ``GeneratorExit`` and other BaseExceptions included --
    but ``KeyboardInterrupt`` (the user's interrupt) and ``GreenletExit`` (fedrun ending a
    suspended run of a seed batch). fedprox_cli's own objects,
    :class:`UserError`, out-of-memory errors and arithmetic overflow (divergence:
    :func:`errors.is_overflow`) pass unchanged. The original exception is kept as the error's
    ``cause`` (``FEDRUN_DEBUG=1`` prints its traceback)."""
    try:
        yield
    except (UserError, MemoryError, KeyboardInterrupt):
        raise
    except BaseException as e:
        if builtin(obj) or type(e).__name__ in _PASS or is_overflow(e):
            raise
        at = own_frame(obj, e.__traceback__)
        error = PluginError(
            f"{kind} plugin {name or getattr(obj, 'name', '?')!r} ({origin(obj)}) failed in "
            f"{what}: {type(e).__name__}: {squeeze(str(e), 200)}" + (f" (at {at})" if at else "")
        )
        error.cause = e
        raise error from None


def returned(
    obj: object, kind: str, what: str, value: T, ok: bool, expected: str, name: str | None = None
) -> T:
    """``value`` if ``ok``, else a :class:`PluginError`: the plugin's ``what`` (``round(state,
    env, t)``, its method named first) returned ``value`` (:func:`shown`) instead of ``expected``
    (``name``: as in :func:`calling`); the line names where the value was handed back
    (:func:`handed_back`)."""
    if not ok:
        method = what.split("(")[0]
        defined = hasattr(obj if isinstance(obj, type) else type(obj), method)
        at = handed_back(obj, method) if defined else ""
        raise PluginError(
            f"{kind} plugin {name or getattr(obj, 'name', '?')!r} ({origin(obj)}) breaks its "
            f"contract: "
            f"{what} must return {expected}, got {shown(value)}" + (f" ({at})" if at else "")
        )
    return value
