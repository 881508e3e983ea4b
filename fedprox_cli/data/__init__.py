"""Datasets and partitions.

``load(name, root=None)`` returns a :class:`Dataset` of float train/test tensors exactly as
training sees them (normalized, image-shaped where the data are images) and int64 labels.
``partition(...)`` splits the training set over clients; ``save_partition`` /
``load_partition`` read and write a run's ``partition.npz`` (one int64 index array per client,
keys ``client_000``, ``client_001``, ..., indices into ``Dataset.train_x``).
"""

from . import idx, images, leaf, tabular  # noqa: F401  (loaders register on import)
from .datasets import Dataset, load, load_config, names
from .partition import load_partition, partition, save_partition

__all__ = [
    "Dataset",
    "load",
    "load_config",
    "names",
    "partition",
    "load_partition",
    "save_partition",
]
