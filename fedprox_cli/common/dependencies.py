"""A package that is not installed, as one line: which package, and how to install it.

Every command's top (:mod:`cli.commands`, and each command's own handler of unexpected errors)
asks :func:`missing` of an ``ImportError`` before calling it a bug: a module that cannot be
found outside fedprox_cli (torch in a fresh virtual environment, a plugin's own dependency)
is the environment's fault, exit code 2 (:data:`errors.EXIT`). The package named is the
distribution that provides the module (``hydra`` -> ``hydra-core``), with the version the
project requires where it is one of its dependencies (pyproject.toml, read from the installed
package's metadata). Nothing heavier than :mod:`importlib.metadata` is imported here.
"""

from __future__ import annotations

import re

# Top-level modules whose distribution has another name (the rest: the module's own name).
DISTRIBUTION = {
    "hydra": "hydra-core",
    "sklearn": "scikit-learn",
    "yaml": "PyYAML",
    "PIL": "pillow",
}
_OWN = __name__.split(".")[0]


def _requirement(distribution: str) -> str:
    """``torch>=2.4``: the project's requirement of ``distribution`` (its metadata), else the
    name alone."""
    from importlib.metadata import PackageNotFoundError, requires

    try:
        required = requires(_OWN) or []
    except PackageNotFoundError:  # a checkout on PYTHONPATH, not installed
        required = []
    key = re.sub(r"[-_.]+", "-", distribution).lower()
    for r in required:
        if ";" in r:  # an extra's ("pytest>=7; extra == 'test'")
            continue
        name = re.split(r"[<>=!~\[ ]", r, maxsplit=1)[0]
        if re.sub(r"[-_.]+", "-", name).lower() == key:
            return r.replace(" ", "")
    return distribution


def missing(e: BaseException | None) -> str | None:
    """The one line for ``e`` when it (or an exception it was raised from) is a module that is
    not installed, outside fedprox_cli itself; None otherwise (a module of fedprox_cli that
    cannot be found is a bug)."""
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, ModuleNotFoundError) and e.name:
            top = e.name.split(".")[0]
            if top == _OWN:
                return None
            if top == "hydra_plugins":  # a launcher's or sweeper's plugin: an extra
                return (
                    f"{e.name} is not installed; install the extra that provides it: "
                    f"pip install 'fedprox_cli[all]' (from a checkout: pip install -e '.[all]')"
                )
            dist = DISTRIBUTION.get(top, top)
            return (
                f"the package {dist} is not installed (No module named {e.name!r}); install it: "
                f"pip install '{_requirement(dist)}' -- or fedprox_cli with all its dependencies: "
                f"pip install fedprox_cli (from a checkout: make setup, or pip install -e .)"
            )
        e = e.__cause__ or e.__context__
    return None
