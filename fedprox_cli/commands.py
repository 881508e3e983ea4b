"""The ``fedrun-plot`` and ``fedrun-table`` console scripts: scripts/plot.py and
scripts/tables.py of this checkout (the package runs from its checkout: conf/ lives there too),
so the two stay one program whichever way they are called."""

from __future__ import annotations

import importlib.util
import sys

from . import CONF_DIR


def _run_script(name: str) -> None:
    path = CONF_DIR.parent / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"fedprox_cli_script_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.exit(module.main())


def plot() -> None:
    _run_script("plot")


def table() -> None:
    _run_script("tables")
