"""Dataset loaders: each returns normalized tensors in the layout models expect.

Loaders register under a config name with :func:`register`; :func:`load` dispatches.
A dataset that cannot be found raises :class:`UserError` naming where it looked and how to get it.
"""

from __future__ import annotations

import gzip
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch

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


def _standardize_images(train: np.ndarray, test: np.ndarray, mean: float, std: float):
    """uint8/float images (N, H, W) -> float32 tensors (N, 1, H, W), (x/scale - mean)/std."""
    def conv(a):
        return ((torch.from_numpy(a).float() - mean) / std).unsqueeze(1)
    return conv(train), conv(test)


def read_idx(path: Path) -> np.ndarray:
    """Read an IDX file (MNIST format), gzip-compressed or not."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        data = f.read()
    require(len(data) >= 4 and data[0] == 0 and data[1] == 0 and data[2] == 8,
            f"{path} is not an unsigned-byte IDX file (corrupt or wrong format)")
    ndim = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim))
    body = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    require(body.size == int(np.prod(shape)),
            f"{path} is truncated: header says {shape}, found {body.size} bytes")
    return body.reshape(shape)


_IDX_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
              "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")


def _find_idx_dir(candidates: list[Path]) -> Path | None:
    for d in candidates:
        if all((d / f).exists() or (d / (f + ".gz")).exists() for f in _IDX_FILES):
            return d
    return None


def load_idx_dataset(name: str, root: Path, tv_folder: str, system_dirs: list[str],
                     tv_class: Callable, mean: float, std: float, how_to_get: str) -> Dataset:
    """MNIST-style IDX data: ``root`` in torchvision's layout, then ``system_dirs``, then a
    torchvision download (where a network exists)."""
    candidates = [root / tv_folder / "raw", root / tv_folder, root] + [Path(d) for d in system_dirs]
    found = _find_idx_dir(candidates)
    if found is None:
        try:  # torchvision's own download, into root in its layout
            tv_class(str(root), train=True, download=True)
            tv_class(str(root), train=False, download=True)
        except Exception:
            pass
        found = _find_idx_dir(candidates)
    if found is None:
        looked = ", ".join(str(c) for c in candidates)
        raise UserError(f"dataset {name} not found (looked in: {looked}); {how_to_get}")

    def arr(f):
        p = found / f
        return read_idx(p if p.exists() else found / (f + ".gz"))
    tr_x, tr_y, te_x, te_y = (arr(f) for f in _IDX_FILES)
    require(len(tr_x) == len(tr_y) and len(te_x) == len(te_y),
            f"dataset {name} in {found}: image and label counts differ (corrupt files)")
    train_x, test_x = _standardize_images(tr_x / 255.0, te_x / 255.0, mean, std)
    return Dataset(name, train_x, torch.from_numpy(tr_y.astype(np.int64)), test_x,
                   torch.from_numpy(te_y.astype(np.int64)), num_classes=10)


@register("fmnist")
def fmnist(root: Path) -> Dataset:
    """Fashion-MNIST (60,000 / 10,000 28x28 grey images, 10 classes), normalized with the
    training set's mean 0.2860 and std 0.3530."""
    from torchvision.datasets import FashionMNIST
    return load_idx_dataset(
        "fmnist", root, "FashionMNIST", ["/usr/share/datasets/fashion-mnist"], FashionMNIST,
        mean=0.2860, std=0.3530,
        how_to_get="set data.root=DIR where torchvision can download it (needs a network), or "
                   "`apt-get install dataset-fashion-mnist` (Debian/Ubuntu)")


def _split(x: np.ndarray, y: np.ndarray, test_fraction: float, seed: int = 0):
    """Deterministic stratified train/test split (independent of the run's seed)."""
    from sklearn.model_selection import train_test_split
    return train_test_split(x, y, test_size=test_fraction, random_state=seed, stratify=y)


@register("digits")
def digits(root: Path) -> Dataset:
    """scikit-learn's bundled handwritten digits (1,797 8x8 images, 10 classes): pixel values
    /16, standardized with the training mean/std; a fixed stratified 80/20 split."""
    from sklearn.datasets import load_digits
    d = load_digits()
    x = d.images.astype(np.float32) / 16.0
    tr_x, te_x, tr_y, te_y = _split(x, d.target, 0.2)
    mean, std = float(tr_x.mean()), float(tr_x.std())
    train_x, test_x = _standardize_images(tr_x, te_x, mean, std)
    return Dataset("digits", train_x, torch.from_numpy(tr_y.astype(np.int64)), test_x,
                   torch.from_numpy(te_y.astype(np.int64)), num_classes=10)
