"""The dataset registry: the :class:`Dataset` record, :func:`register`, :func:`load`.

Loaders live in one module per on-disk format (:mod:`.idx`, :mod:`.images`, :mod:`.tabular`,
:mod:`.leaf`) and register under a config name; :func:`load` dispatches. A dataset that cannot
be found raises :class:`UserError` naming where it looked and how to get it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from ..atomic import atomic_write
from ..errors import UserError, require

_LOADERS: dict[str, Callable[[Path], "Dataset"]] = {}


@dataclass
class Dataset:
    name: str
    train_x: torch.Tensor  # (N, *input_shape) float32
    train_y: torch.Tensor  # (N,) int64
    test_x: torch.Tensor
    test_y: torch.Tensor
    num_classes: int
    groups: torch.Tensor | None = None  # (N,) int64 natural group of each training sample (FEMNIST writer)

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(self.train_x.shape[1:])


def register(name: str):
    def deco(fn):
        _LOADERS[name] = fn
        return fn
    return deco


def names() -> list[str]:
    return sorted(_LOADERS)


def default_root() -> Path:
    """Where datasets are looked for (and downloaded to) unless ``data.root`` says otherwise:
    $FEDPROX_DATA, else ~/.cache/fedprox_cli/data."""
    return Path(os.environ.get("FEDPROX_DATA", "~/.cache/fedprox_cli/data")).expanduser()


def load(name: str, root: str | os.PathLike | None = None) -> Dataset:
    """Train/test tensors of dataset ``name`` (normalized as in training), on the CPU."""
    require(name in _LOADERS, f"unknown dataset '{name}' (choose from: {', '.join(names())})")
    return _LOADERS[name](Path(root).expanduser() if root else default_root())


def not_found(name: str, looked: list[Path], how_to_get: str) -> UserError:
    """The one error for a missing dataset: where it looked and how to obtain it."""
    return UserError(f"dataset {name} not found (looked in: {', '.join(map(str, looked))}); "
                     f"{how_to_get}")


def labels(y: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.asarray(y).astype(np.int64))


def standardize(train: torch.Tensor, test: torch.Tensor, mean, std, channel_dim: int = 1):
    """(x - mean) / std for float tensors; ``mean``/``std`` scalars or per-channel sequences
    (broadcast along ``channel_dim``)."""
    shape = [1] * train.dim()
    mean, std = torch.as_tensor(mean, dtype=torch.float32), torch.as_tensor(std, dtype=torch.float32)
    if mean.dim():
        shape[channel_dim] = -1
        mean, std = mean.view(shape), std.view(shape)
    return (train.float() - mean) / std, (test.float() - mean) / std


def split(x: np.ndarray, y: np.ndarray, test_fraction: float, seed: int = 0):
    """Deterministic stratified train/test split (independent of the run's seed)."""
    from sklearn.model_selection import train_test_split
    return train_test_split(x, y, test_size=test_fraction, random_state=seed, stratify=y)


def cached(path: Path, build: Callable[[], dict]) -> dict:
    """``build()``'s dict of tensors, saved to / read from ``path`` (a ``.pt`` file written
    atomically, so runs that load at once never see a partial file; skipped where the folder
    is read-only). Delete it to rebuild."""
    if path.exists():
        return torch.load(path, weights_only=True)
    out = build()
    try:
        atomic_write(path, lambda f: torch.save(out, f))
    except OSError:  # a read-only data folder: load without a cache
        pass
    return out
