"""The registries of names a config may choose, open to code outside the package.

Every registry (algorithms, regularizers, compressors, models, datasets, partitions, metrics)
is a :class:`Registry`: the package's own entries register on import; a user's entries come

- from a Python entry point of the group ``fedprox_cli.<plural>`` (``fedprox_cli.algorithms``,
  ``fedprox_cli.regularizers``, ``fedprox_cli.compressors``, ``fedprox_cli.models``,
  ``fedprox_cli.datasets``, ``fedprox_cli.partitions``, ``fedprox_cli.metrics``) whose name is
  the config name and whose value is the object (an ``Algorithm``/``Regularizer``/``Compressor``
  class, a model builder, a dataset loader, a partition scheme or a
  :class:`~.metric_table.Metric`) or a module that registers it on import; loaded when a
  name is not found and when the names are listed, so an installed plugin costs nothing until it
  is chosen;
- or from ``_target_`` in the group's YAML (``name: mine`` with ``_target_: my_module.Mine``):
  the object at that dotted path is registered under ``name`` when the run is built.

Every entry is checked where it enters (:meth:`Registry.admit`) against its registry's
contract (a class of the right base with a ``name``, the methods it must define, its
declarations of the right type): a plugin that breaks it is one line naming the plugin and the
contract, exit code 2. Calls into a plugin's code go through :mod:`plugin_calls`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields, is_dataclass
from importlib.metadata import EntryPoint, entry_points
from types import ModuleType
from typing import Any, Generic, Protocol, TypeVar, cast, overload

from .dotted import located
from .errors import UserError, closest, no_parameter, require, squeeze
from .plugin_calls import PluginError, origin

Contract = Callable[[object], str | None]
"""A registry's test of an entry: the broken contract in words, or None."""

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
E = TypeVar("E")


class Register(Protocol):
    """``register``: a decorator (``@register``), or one made from a name
    (``@register("linear")``)."""

    @overload
    def __call__(self, entry: str) -> Callable[[E], E]: ...
    @overload
    def __call__(self, entry: E) -> E: ...


class Lookup(Protocol[T_co]):
    """``lookup``: the entry of a name (:meth:`Registry.lookup`)."""

    def __call__(self, name: str, target: str | None = None) -> T_co: ...


def class_contract(base: type, must: tuple[str, ...], flags: tuple[str, ...] = ()) -> Contract:
    """The contract of a plugin class: a dataclass subclass of ``base`` with a ``name`` (a
    non-empty string), defining each method of ``must`` itself (not inheriting ``base``'s),
    and each ClassVar of ``flags`` a bool. Returns a test: the broken contract in words, or
    None."""

    def broken(cls: object) -> str | None:
        if not (isinstance(cls, type) and issubclass(cls, base)):
            return (
                f"it must be a subclass of {base.__module__.split('.')[0]}'s {base.__name__} "
                f"(got {cls!r})"
            )
        if not is_dataclass(cls):
            return f"it must be a dataclass (decorated with @dataclass, as {base.__name__} is)"
        name = getattr(cls, "name", None)
        if not isinstance(name, str) or not name:
            return "it must define name: ClassVar[str] = \"<its config name>\""
        for m in must:
            if not callable(getattr(cls, m, None)) or getattr(cls, m) is getattr(base, m, None):
                return f"it must define the method {m}"
        for f in flags:
            if not isinstance(getattr(cls, f), bool):
                return f"{f} must be a bool (a ClassVar[bool]), got {getattr(cls, f)!r}"
        return None

    return broken


def callable_contract(what: str) -> Contract:
    """The contract of a plugin function (a model builder, a dataset loader): callable."""
    return lambda obj: (
        None if callable(obj) and not isinstance(obj, ModuleType) else f"it must be {what}"
    )


class Registry(dict[str, T], Generic[T]):
    """Config name -> class or function, completed from the entry-point group
    ``fedprox_cli.<plural>`` on demand; every entry checked by ``contract`` (a test giving
    the broken contract in words, or None) as it enters (see module docstring), every instance
    that :meth:`build` makes by ``check`` (the kind's own test of its parameters).

    A plugin kind makes its registry and exposes the same calls in one statement, e.g.::

        register, names, lookup, build = (
            _REGISTRY := Registry("compressor", "compressors", class_contract(Compressor,
            ("__call__",)))
        ).calls()
    """

    def __init__(
        self,
        kind: str,
        plural: str,
        contract: Contract = lambda obj: None,
        check: Callable[[Any], None] = lambda obj: None,
    ) -> None:
        super().__init__()
        self.kind, self.group, self.contract, self.check = (
            kind,
            f"fedprox_cli.{plural}",
            contract,
            check,
        )
        self.broken: dict[str, str] = {}  # installed plugins that cannot be loaded: their line

    def calls(
        self,
    ) -> tuple[Register, Callable[[], list[str]], Lookup[T], Callable[..., Any]]:
        """The calls a plugin kind's module offers: ``register``, ``names``, ``lookup`` and
        ``build`` (docs/extending.md)."""
        return self.register, self.names, self.lookup, self.build

    def admit(self, name: str, obj: object, where: str) -> T:
        """``obj`` if it keeps the registry's contract, else one :class:`PluginError` naming
        the plugin (``where``: how it came) and the contract it breaks."""
        why = self.contract(obj)
        if why is not None:
            raise PluginError(
                f"{self.kind} plugin '{name}' ({where}) breaks the {self.kind} contract: {why} "
                f"(docs/extending.md)"
            )
        return cast(T, obj)  # the contract's test passed: an entry of this registry

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

    def _admit_entry_point(self, ep: EntryPoint) -> None:
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

    @overload
    def register(self, entry: str) -> Callable[[E], E]: ...
    @overload
    def register(self, entry: E) -> E: ...
    def register(self, entry: object) -> object:
        """Decorator: a class under its ``name`` (``@register``), or a function under the name
        given (``@register("linear")``)."""
        if isinstance(entry, str):
            name = entry
            return lambda fn: self._put(name, fn)
        return self._put(getattr(entry, "name", "?"), entry)

    def _put(self, name: str, obj: E) -> E:
        self[name] = self.admit(name, obj, origin(obj))
        return obj

    def build(self, name: str, _target_: str | None = None, **params: Any) -> Any:
        """An instance of the dataclass ``name`` (:meth:`lookup`; ``_target_``: a plugin's class
        by dotted path) with ``params``, passed by ``check``; a parameter it does not have is
        one :class:`UserError` naming the ones it takes. E.g. ``build("topk", ratio=0.1)``."""
        cls: Any = self.lookup(name, _target_)  # a class registry's entry: a dataclass
        allowed = [f.name for f in fields(cls)]
        unknown = sorted(set(params) - set(allowed))
        require(not unknown, no_parameter(self.kind, name, ", ".join(unknown), allowed, _target_))
        obj = cls(**params)
        self.check(obj)
        return obj

    def names(self) -> list[str]:
        """Every registered name, the installed plugins' included (those that cannot be loaded
        left out: :attr:`broken`)."""
        self._load()
        return sorted(self)

    def lookup(self, name: str, target: str | None = None) -> T:
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
            names = self.names()
            close = closest(name, names)
            broken = sorted(set(self.broken) - set(self))
            raise UserError(  # the words of an unknown option on the command line (cli.faults)
                f"unknown {self.kind} '{name}'"
                + (f" (did you mean {close}?)" if close else "")
                + f"; the options: {', '.join(names)}"
                + (f"; installed but not loadable: {', '.join(broken)}" if broken else "")
            )
        return self[name]
