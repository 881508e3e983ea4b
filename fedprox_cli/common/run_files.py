"""The files of a run folder, by name: the one place they are spelled. Every file is written
atomically (:func:`files.atomic_write`): a reader never sees a half-written file, and
concurrent jobs never share one.

- :data:`METRICS` ``metrics.csv``: one row per evaluated round (``engine.metrics.COLUMNS``)
- :data:`CONFIG` ``config.yaml``: the resolved config
- :data:`PARTITION` ``partition.npz``: per-client index arrays into the training set
- :data:`SUMMARY` ``summary.json``: the run's record (``runs.outputs.Summary``)
- :data:`METRICS_FIGURE` ``metrics.png``: loss, accuracy and stationarity against round
- :data:`CLIENTS`, :data:`CLIENTS_SUMMARY`, :data:`CLIENTS_FIGURE` ``clients.csv``,
  ``clients_summary.csv``, ``clients.png``: per-client metrics, with ``metrics.per_client=true``
  (``engine.clients``)
- :data:`CHECKPOINT` ``checkpoint.pt``: the state to resume from (``runs.checkpoint``);
  :data:`TRACKER` ``tracker.json``: an experiment tracker's run id (``runs.trackers``)
- :data:`HYDRA` ``.hydra/``: Hydra's record of the command (:data:`HYDRA_FILES`: config, hydra
  config, overrides)
- :data:`LOG` ``fedrun.log``: every line fedrun printed about this run; :data:`ERROR_LOG`
  ``error.log``: the traceback of an internal error
- :data:`LOCK` ``.fedrun.lock``: held (``flock``) by the one process running in the folder
  (``runs.lock``); :data:`KEPT` ``.kept/``: a finished run's files while it is extended
  (``runs.keep``)
- ``seed_<s>/`` (:func:`seed_folder`): the run folders of a seed batch (``seeds=R``)
"""

from __future__ import annotations

METRICS = "metrics.csv"
METRICS_FIGURE = "metrics.png"
SUMMARY = "summary.json"
CONFIG = "config.yaml"
PARTITION = "partition.npz"
PARTITION_FIGURE = "partition.png"  # fedrun-plot --partition's default
CHECKPOINT = "checkpoint.pt"
TRACKER = "tracker.json"
CLIENTS = "clients.csv"
CLIENTS_SUMMARY = "clients_summary.csv"
CLIENTS_FIGURE = "clients.png"
LOG = "fedrun.log"
ERROR_LOG = "error.log"
LOCK = ".fedrun.lock"
KEPT = ".kept"
HYDRA = ".hydra"
HYDRA_CONFIG, HYDRA_RECORD, OVERRIDES = "config.yaml", "hydra.yaml", "overrides.yaml"
HYDRA_FILES = (HYDRA_CONFIG, HYDRA_RECORD, OVERRIDES)  # what HYDRA holds
SEED_PREFIX = "seed_"

# the files of a run's record, which a finished run keeps while it is extended (runs.keep)
RECORD = (
    METRICS,
    METRICS_FIGURE,
    SUMMARY,
    CONFIG,
    PARTITION,
    CHECKPOINT,
    TRACKER,
    CLIENTS,
    CLIENTS_SUMMARY,
    CLIENTS_FIGURE,
)


def seed_folder(seed: int) -> str:
    """The name of seed ``seed``'s run folder in a seed batch's folder."""
    return f"{SEED_PREFIX}{seed}"
