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
"""

from __future__ import annotations

from dataclasses import fields
from importlib import import_module
from importlib.metadata import entry_points
from types import ModuleType

from .errors import UserError, require, squeeze


def _located(target: str):
    """The object at the dotted path ``target`` (``package.module.Attr``)."""
    module, _, attr = target.rpartition(".")
    try:
        return getattr(import_module(module), attr)
    except Exception as e:  # the user module's own fault: one line naming it
        raise UserError(f"_target_ {target} cannot be imported ({type(e).__name__}: "
                        f"{squeeze(str(e), 200)})") from None


class Registry(dict):
    """Config name -> class or function, completed from the entry-point group
    ``fedprox_cli.<plural>`` on demand (see module docstring)."""

    def __init__(self, kind: str, plural: str):
        super().__init__()
        self.kind, self.group = kind, f"fedprox_cli.{plural}"

    def _load(self, name: str | None = None) -> None:
        """Import the group's entry points not yet registered (only ``name``'s if given)."""
        for ep in entry_points(group=self.group):
            if ep.name in self or name not in (None, ep.name):
                continue
            try:
                obj = ep.load()
            except Exception as e:  # the plugin's own fault: one line naming it
                raise UserError(f"{self.kind} plugin '{ep.name}' ({ep.value}, entry point group "
                                f"{self.group}) cannot be loaded: {type(e).__name__}: "
                                f"{squeeze(str(e), 200)}") from None
            if not isinstance(obj, ModuleType):
                self.setdefault(ep.name, obj)

    def register(self, cls):
        """Class decorator: ``cls`` under its ``name``."""
        self[cls.name] = cls
        return cls

    def make(self, name: str, target: str | None = None, **params):
        """An instance of the dataclass ``name`` (:meth:`lookup`) with ``params``; a parameter
        it does not have is one :class:`UserError` naming the ones it takes."""
        cls = self.lookup(name, target)
        allowed = [f.name for f in fields(cls)]
        unknown = sorted(set(params) - set(allowed))
        require(not unknown, f"{self.kind} {name} has no parameter {', '.join(unknown)} "
                             f"(it takes: {', '.join(allowed) or 'none'})")
        return cls(**params)

    def names(self) -> list[str]:
        """Every registered name, the installed plugins' included."""
        self._load()
        return sorted(self)

    def lookup(self, name: str, target: str | None = None):
        """The entry ``name``: registered, from an entry point, or from ``target`` (a
        ``_target_`` dotted path, registered under ``name``); a :class:`UserError` if none."""
        if target is not None:
            obj = _located(target)
            require(self.setdefault(name, obj) is obj,
                    f"{self.kind} '{name}' is already defined ({self[name].__module__}); "
                    f"give _target_ {target} another name")
        if name not in self:
            self._load(name)
        if name not in self:  # (the listing imports every plugin: only for the message)
            raise UserError(f"unknown {self.kind} '{name}' (choose from: {', '.join(self.names())})")
        return self[name]
