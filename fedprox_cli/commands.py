"""The ``fedrun-plot`` and ``fedrun-table`` console scripts: scripts/plot.py and
scripts/tables.py (of the checkout, or shipped inside the package by a wheel), so the two
stay one program whichever way they are called."""

from __future__ import annotations

import importlib.util
import sys

from . import shipped


def _run_script(name: str) -> None:
    path = shipped("scripts") / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"fedprox_cli_script_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.exit(module.main())


def plot() -> None:
    _run_script("plot")


def table() -> None:
    _run_script("tables")
