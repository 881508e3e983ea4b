"""The registries of names a config may choose, open to code outside the package.

Every registry (algorithms, regularizers, compressors, models, datasets) is a :class:`Registry`:
the package's own entries register on import; a user's entries come

- from a Python entry point of the group ``fedprox_cli.<plural>`` (``fedprox_cli.algorithms``,
  ``fedprox_cli.regularizers``, ``fedprox_cli.compressors``, ``fedprox_cli.models``,
  ``fedprox_cli.datasets``) whose name is the config name and whose value is the object (an
  ``Algorithm``/``Regularizer``/``Compressor`` class, a model builder or a dataset loader) or a
  module that registers it on import; loaded when a name is not found and when the names are
  listed, so an installed plugin costs nothing until it is chosen;
- or from ``_target_`` in the group's YAML (``name: mine`` with ``_target_: my_module.Mine``):
  the object at that dotted path is registered under ``name`` when the run is built.

Every entry is checked where it enters (:meth:`Registry.admit`) against its registry's
contract (a class of the right base with a ``name``, the methods it must define, its
declarations of the right type): a plugin that breaks it is one line naming the plugin and the
contract, exit code 2. Calls into a plugin's code go through :func:`calling`, so that its
exception, or a result of the wrong kind, is reported as the plugin's (exit code 2), not as an
internal error of fedrun.
"""

from __future__ import annotations

import inspect
import os
import re
import sys
import sysconfig
import traceback
from contextlib import contextmanager
from dataclasses import fields, is_dataclass
from importlib import import_module
from importlib.metadata import entry_points
from inspect import isfunction
from pathlib import Path
from types import ModuleType
from typing import Callable

from .. import PACKAGE
from .errors import UserError, is_overflow, require, squeeze

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


def located(target: str):
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


def builtin(obj) -> bool:
    """Whether ``obj`` (a class, function or instance) is fedprox_cli's own."""
    module = getattr(obj, "__module__", None) or type(obj).__module__
    return module.split(".")[0] == "fedprox_cli"


def origin(obj) -> str:
    """``package.module.Name`` of a plugin's class or function (of an instance: its class)."""
    cls = obj if isinstance(obj, type) or isfunction(obj) else type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


def class_contract(base: type, must: tuple[str, ...], flags: tuple[str, ...] = ()) -> Callable:
    """The contract of a plugin class: a dataclass subclass of ``base`` with a ``name`` (a
    non-empty string), defining each method of ``must`` itself (not inheriting ``base``'s),
    and each ClassVar of ``flags`` a bool. Returns a test: the broken contract in words, or
    None."""

    def broken(cls) -> str | None:
        if not (isinstance(cls, type) and issubclass(cls, base)):
            return f"it must be a subclass of {base.__module__.split('.')[0]}'s {base.__name__} (got {cls!r})"
        if not is_dataclass(cls):
            return f"it must be a dataclass (decorated with @dataclass, as {base.__name__} is)"
        if not isinstance(getattr(cls, "name", None), str) or not cls.name:
            return "it must define name: ClassVar[str] = \"<its config name>\""
        for m in must:
            if not callable(getattr(cls, m, None)) or getattr(cls, m) is getattr(base, m, None):
                return f"it must define the method {m}"
        for f in flags:
            if not isinstance(getattr(cls, f), bool):
                return f"{f} must be a bool (a ClassVar[bool]), got {getattr(cls, f)!r}"
        return None

    return broken


def callable_contract(what: str) -> Callable:
    """The contract of a plugin function (a model builder, a dataset loader): callable."""
    return lambda obj: (
        None if callable(obj) and not isinstance(obj, ModuleType) else f"it must be {what}"
    )


class PluginError(UserError):
    """A plugin broke its contract: the user's code, reported as bad input (exit code 2)."""


def _tree(obj) -> tuple[str, ...]:
    """The files that are the plugin's own: its module's file, and its top-level package's
    folder when it is a package (a plugin's helpers in sibling modules are its own too)."""
    cls = obj if isinstance(obj, type) or isfunction(obj) else type(obj)
    module = sys.modules.get(getattr(cls, "__module__", "") or "")
    top = sys.modules.get((getattr(cls, "__module__", "") or "").split(".")[0])
    own = [getattr(module, "__file__", None)]
    if top is not None and getattr(top, "__path__", None) and getattr(top, "__file__", None):
        own.append(str(Path(top.__file__).parent) + os.sep)
    return tuple(str(f) for f in own if f)


def _library(filename: str) -> bool:
    """A file of fedprox_cli, of Python or of an installed library (torch, numpy...)."""
    roots = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    return filename.startswith((str(PACKAGE), *roots)) or filename.startswith("<")


def own_frame(obj, tb) -> str | None:
    """``file:line`` of the plugin's deepest own frame in the traceback ``tb``: in the plugin's
    module or package (:func:`_tree`), else the deepest frame outside fedprox_cli, Python and
    the installed libraries, else the deepest outside fedprox_cli; None if none."""
    frames = traceback.extract_tb(tb)
    own = _tree(obj)
    for test in (
        lambda f: f.filename.startswith(own) if own else False,
        lambda f: not _library(f.filename),
        lambda f: not f.filename.startswith(str(PACKAGE)),
    ):
        hits = [f for f in frames if test(f)]
        if hits:
            return f"{hits[-1].filename}:{hits[-1].lineno}"
    return None


def source_line(obj, method: str) -> str:
    """``file:line`` where the plugin's ``method`` is defined (its class's line if it cannot
    be found)."""
    cls = obj if isinstance(obj, type) else type(obj)
    for target in (getattr(cls, method, None), cls):
        try:
            target = inspect.unwrap(target)
            return f"{inspect.getsourcefile(target)}:{inspect.getsourcelines(target)[1]}"
        except (TypeError, OSError):
            continue
    return "?"


def shown(value) -> str:
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
def calling(obj, kind: str, what: str, name: str | None = None):
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


def returned(obj, kind: str, what: str, value, ok: bool, expected: str, name: str | None = None):
    """``value`` if ``ok``, else a :class:`PluginError`: the plugin's ``what`` (``round(state,
    env, t)``, its method named first) returned ``value`` (:func:`shown`) instead of ``expected``
    (``name``: as in :func:`calling`); the line names where the method is defined."""
    if not ok:
        method = what.split("(")[0]
        at = (
            source_line(obj, method)
            if hasattr(obj if isinstance(obj, type) else type(obj), method)
            else None
        )
        raise PluginError(
            f"{kind} plugin {name or getattr(obj, 'name', '?')!r} ({origin(obj)}) breaks its contract: "
            f"{what} must return {expected}, got {shown(value)}"
            + (f" ({method} at {at})" if at else "")
        )
    return value


class Registry(dict):
    """Config name -> class or function, completed from the entry-point group
    ``fedprox_cli.<plural>`` on demand; every entry checked by ``contract`` (a test giving
    the broken contract in words, or None) as it enters (see module docstring), every instance
    that :meth:`build` makes by ``check`` (the kind's own test of its parameters).

    A plugin kind makes its registry and exposes the same API in two lines, e.g.::

        _REGISTRY = Registry("compressor", "compressors", class_contract(Compressor, ("__call__",)),
                             lambda comp: comp.validate())
        register, names, lookup, build = _REGISTRY.register, _REGISTRY.names, _REGISTRY.lookup, _REGISTRY.build
    """

    def __init__(
        self,
        kind: str,
        plural: str,
        contract: Callable[[object], str | None] = lambda obj: None,
        check: Callable[[object], None] = lambda obj: None,
    ):
        super().__init__()
        self.kind, self.group, self.contract, self.check = (
            kind,
            f"fedprox_cli.{plural}",
            contract,
            check,
        )
        self.broken: dict[str, str] = {}  # installed plugins that cannot be loaded: their line

    def admit(self, name: str, obj, where: str):
        """``obj`` if it keeps the registry's contract, else one :class:`PluginError` naming
        the plugin (``where``: how it came) and the contract it breaks."""
        why = self.contract(obj)
        if why is not None:
            raise PluginError(
                f"{self.kind} plugin '{name}' ({where}) breaks the {self.kind} contract: {why} "
                f"(docs/extending.md)"
            )
        return obj

    def _load(self, name: str | None = None) -> None:
        """Import the group's entry points not yet registered (only ``name``'s if given). A
        plugin that cannot be loaded or breaks its contract is one :class:`UserError` naming it
        when it is the one asked for; when all are listed it is noted in :attr:`broken` and
        left out, so that one broken package hides no other entry."""
        for ep in entry_points(group=self.group):
            if ep.name in self or name not in (None, ep.name):
                continue
            try:
                self._admit_entry_point(ep)
            except UserError as e:
                if name is not None:
                    raise
                self.broken[ep.name] = str(e)

    def _admit_entry_point(self, ep) -> None:
        where = f"{ep.value}, entry point group {self.group}"
        try:
            obj = ep.load()
        except Exception as e:  # the plugin's own fault: one line naming it
            raise UserError(
                f"{self.kind} plugin '{ep.name}' ({where}) cannot be loaded: "
                f"{type(e).__name__}: {squeeze(str(e), 200)}"
            ) from None
        if not isinstance(obj, ModuleType):
            self.setdefault(ep.name, self.admit(ep.name, obj, where))

    def register(self, entry):
        """Decorator: a class under its ``name`` (``@register``), or a function under the name
        given (``@register("linear")``)."""
        if isinstance(entry, str):
            return lambda fn: self._put(entry, fn)
        return self._put(getattr(entry, "name", "?"), entry)

    def _put(self, name: str, obj):
        self[name] = self.admit(name, obj, origin(obj))
        return obj

    def build(self, name: str, _target_: str | None = None, **params):
        """An instance of the dataclass ``name`` (:meth:`lookup`; ``_target_``: a plugin's class
        by dotted path) with ``params``, passed by ``check``; a parameter it does not have is
        one :class:`UserError` naming the ones it takes. E.g. ``build("topk", ratio=0.1)``."""
        cls = self.lookup(name, _target_)
        allowed = [f.name for f in fields(cls)]
        unknown = sorted(set(params) - set(allowed))
        require(
            not unknown,
            f"{self.kind} {name} has no parameter {', '.join(unknown)} "
            f"(it takes: {', '.join(allowed) or 'none'})",
        )
        obj = cls(**params)
        self.check(obj)
        return obj

    def names(self) -> list[str]:
        """Every registered name, the installed plugins' included (those that cannot be loaded
        left out: :attr:`broken`)."""
        self._load()
        return sorted(self)

    def lookup(self, name: str, target: str | None = None):
        """The entry ``name``: registered, from an entry point, or from ``target`` (a
        ``_target_`` dotted path, registered under ``name``); a :class:`UserError` if none."""
        if target is not None:
            obj = self.admit(name, located(target), f"_target_ {target}")
            require(
                self.setdefault(name, obj) is obj,
                f"{self.kind} '{name}' is already defined ({self[name].__module__}); "
                f"give _target_ {target} another name",
            )
        if name not in self:
            self._load(name)
        if name not in self:  # (the listing imports every plugin: only for the message)
            choices = ", ".join(self.names())
            broken = sorted(set(self.broken) - set(self))
            raise UserError(
                f"unknown {self.kind} '{name}' (choose from: {choices}"
                + (f"; installed but not loadable: {', '.join(broken)}" if broken else "")
                + ")"
            )
        return self[name]
