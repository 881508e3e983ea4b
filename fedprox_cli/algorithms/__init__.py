"""Federated algorithms, one file each.

An algorithm is a dataclass of its paper's parameters with a pure ``init``/``round``/``output``
triple over tensors (see :mod:`fedprox_cli.algorithms.base`). To add one, write
``algorithms/<name>.py`` with a class decorated by :func:`register` and a config
``conf/algorithm/<name>.yaml``; every module in this package is imported automatically.
"""

import importlib
import pkgutil

from ._timed_round import TimedRound
from .base import Algorithm, Env, State, build, names, register

for _m in pkgutil.iter_modules(__path__):
    if _m.name != "base":
        importlib.import_module(f"{__name__}.{_m.name}")

__all__ = ["Algorithm", "Env", "State", "TimedRound", "build", "names", "register"]
