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
    values, or the values of a group choice (``algorithm=fedcanon_fig2/fedavg``) that each hold
    one method no other value holds (two choices of one method keep their own text). Empty for
    any other key."""
    if key not in ("algorithm.name", f"{CHOICE}algorithm"):
        return {}
    by_value: dict[str, set] = {}
    for c in configs:
        if key in c and "algorithm.name" in c:
            by_value.setdefault(str(c[key]), set()).add(str(c["algorithm.name"]))
    one = {value: next(iter(algs)) for value, algs in by_value.items() if len(algs) == 1}
    shared = {a for a in one.values() if list(one.values()).count(a) > 1}
    return {value: algorithm_title(a) for value, a in one.items() if a not in shared}
