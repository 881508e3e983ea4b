"""Methods by the names the papers print (``FedCanon``, ``FedMiD``, ``ZA1``, ``SCAFFNEW``): the
``display_name`` an algorithm's class declares (a plugin's too), used by every figure and table."""

from __future__ import annotations

from .run import CHOICE


def algorithm_title(name) -> str:
    """An algorithm's printed name: its class's ``display_name``, or ``name`` if it cannot be
    found here (a plugin not installed where the figure is drawn)."""
    from ..common.errors import UserError
    try:
        from .. import algorithms
        return str(algorithms.base.lookup(str(name)).display_name)
    except (UserError, ImportError, AttributeError):
        return str(name)


def method_names(configs: list[dict], key: str) -> dict[str, str]:
    """Printed names for the values of ``key`` when it names the method: ``algorithm.name``'s
    values, or a group choice (``algorithm=fedcanon_fig2/fedavg``) whose every value holds one
    method, each a different one. Empty for any other key."""
    if key not in ("algorithm.name", f"{CHOICE}algorithm"):
        return {}
    by_value: dict[str, set] = {}
    for c in configs:
        if key in c and "algorithm.name" in c:
            by_value.setdefault(str(c[key]), set()).add(str(c["algorithm.name"]))
    if any(len(v) != 1 for v in by_value.values()) or len({next(iter(v)) for v in by_value.values()}) < len(by_value):
        return {}
    return {value: algorithm_title(next(iter(algs))) for value, algs in by_value.items()}
