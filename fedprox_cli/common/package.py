"""Where the package stands and what it ships: its folder, its version, its Hydra configs."""

from pathlib import Path

VERSION = "0.1.0"

PACKAGE = Path(__file__).resolve().parent.parent  # the installed package's folder


def shipped(folder: str) -> Path:
    """A top-level folder of the checkout (conf): inside the package where a wheel put it
    (setup.py), else beside the package in the source checkout."""
    inside = PACKAGE / folder
    return inside if inside.is_dir() else inside.parent.parent / folder


CONF_DIR = shipped("conf")  # the Hydra config groups
