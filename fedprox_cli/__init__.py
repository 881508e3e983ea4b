"""fedprox_cli: an experiment runner for composite federated learning.

The public Python API next to the ``fedrun`` command line:

- :func:`fedprox_cli.data.load` -- train/test tensors exactly as training sees them;
- :func:`fedprox_cli.data.load_partition` -- a run's saved per-client index arrays;
- :func:`fedprox_cli.regularizers.build`, :func:`fedprox_cli.models.build`,
  :func:`fedprox_cli.algorithms.build` -- the pieces a run is made of;
- :func:`fedprox_cli.runner.run` -- one run from a config, into a folder.
"""

from pathlib import Path

__version__ = "0.1.0"


def shipped(folder: str) -> Path:
    """A top-level folder of the checkout (conf, scripts): inside the package where a wheel
    put it (setup.py), else beside the package in the source checkout."""
    inside = Path(__file__).resolve().parent / folder
    return inside if inside.is_dir() else inside.parent.parent / folder


CONF_DIR = shipped("conf")  # the Hydra config groups
