"""fedprox_cli: an experiment runner for composite federated learning.

The public Python API next to the ``fedrun`` command line (importing the package is light:
these load on first use):

- :func:`fedprox_cli.run` -- one run from overrides or a config, as a :class:`fedprox_cli.Run`
  (folder, status, summary, metrics as a DataFrame); :func:`fedprox_cli.load_runs` -- every run
  under a folder as one DataFrame (config keys and final metrics); see :mod:`fedprox_cli.api`;
- :func:`fedprox_cli.data.load` -- train/test tensors exactly as training sees them;
- :func:`fedprox_cli.data.load_partition` -- a run's saved per-client index arrays;
- :func:`fedprox_cli.operators.regularizers.build`, :func:`fedprox_cli.engine.models.build`,
  :func:`fedprox_cli.algorithms.build` -- the pieces a run is made of;
- :func:`fedprox_cli.runs.runner.run` -- one run from a config, into a folder;
- :class:`fedprox_cli.algorithms.Algorithm` / :class:`fedprox_cli.algorithms.Env` -- the
  interface a plugin algorithm implements (:mod:`fedprox_cli.common.registry`).
"""

from typing import Any

from .common.package import VERSION as __version__  # noqa: F401 (the package's version)

_API = ("run", "load_runs", "Run")


def __getattr__(name: str) -> Any:  # (the API's objects, each of its own type)
    """``fedprox_cli.run`` / ``load_runs`` / ``Run``, imported on first use (torch and Hydra
    load only then)."""
    if name in _API:
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
