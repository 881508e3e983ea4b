"""What fedprox_cli uses of Hydra beyond its public API (fedprox_cli/config/hydra_private.py)
is there, with the signatures it is used with, in the Hydra installed: a Hydra other than the
one pinned fails here first, naming what to check."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import hydra
import pytest

from fedprox_cli.config import hydra_private
from fedprox_cli.config.hydra_private import ConfigLoaderImpl, Hydra

PKG = Path(__file__).resolve().parent.parent / "fedprox_cli"


def test_the_installed_hydra_is_the_pinned_one():
    assert hydra.__version__ == hydra_private.HYDRA_VERSION, (
        f"Hydra {hydra.__version__} is installed; fedprox_cli/config/hydra_private.py was written "
        f"against {hydra_private.HYDRA_VERSION}: check each name and signature it uses (this "
        f"file's tests), then set HYDRA_VERSION"
    )


@pytest.mark.parametrize(
    "owner, name, params, static",
    [
        (
            ConfigLoaderImpl,
            "load_sweep_config",
            ["self", "master_config", "sweep_overrides"],
            False,
        ),
        (ConfigLoaderImpl, "_apply_overrides_to_config", ["overrides", "cfg"], True),
        (Hydra, "get_mode", ["self", "config_name", "overrides"], False),
    ],
)
def test_each_replaced_method_has_the_signature_it_is_replaced_with(owner, name, params, static):
    held = owner.__dict__[name]
    assert isinstance(held, staticmethod) == static
    assert list(inspect.signature(getattr(owner, name)).parameters) == params


def test_the_other_private_names_take_what_they_are_given():
    sig = inspect.signature(hydra_private.get_overrides_dirname).parameters
    assert {"overrides", "kv_sep", "item_sep", "exclude_keys"} <= set(sig)
    assert list(inspect.signature(hydra_private.create_config_search_path).parameters) == [
        "search_path_dir"
    ]
    assert hydra_private.get_args_parser().prog  # an argparse parser
    assert hasattr(hydra_private.BasicSweeper, "split_arguments")


def test_replace_puts_back_what_it_replaced():
    held = ConfigLoaderImpl.__dict__["_apply_overrides_to_config"]
    was = hydra_private.replace(ConfigLoaderImpl, "_apply_overrides_to_config", staticmethod(print))
    try:
        assert was is held and ConfigLoaderImpl._apply_overrides_to_config is print
    finally:
        hydra_private.replace(ConfigLoaderImpl, "_apply_overrides_to_config", was)
    assert ConfigLoaderImpl.__dict__["_apply_overrides_to_config"] is held


def test_no_other_module_reaches_into_hydra():
    """``hydra._internal`` is imported in hydra_private.py only, and no method is assigned
    around the type checker."""
    bad = [
        f"{p.relative_to(PKG)}:{i}"
        for p in PKG.rglob("*.py")
        if p.name != "hydra_private.py"
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if re.search(r"hydra\._internal|ignore\[method-assign\]", line)
    ]
    assert not bad, bad
