"""MNIST-format (IDX) datasets: mnist, fmnist."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from ..common.errors import require
from . import cache
from .datasets import REDOWNLOAD, Dataset, labels, not_found, reading, register, standardize


def read_idx(path: Path) -> np.ndarray:
    """Read an IDX file (MNIST format), gzip-compressed or not."""
    opener = gzip.open if path.suffix == ".gz" else open
    with reading(path), opener(path, "rb") as f:
        data = f.read()
    require(len(data) >= 4 and data[0] == 0 and data[1] == 0 and data[2] == 8,
            f"{path} is not an unsigned-byte IDX file (wrong magic number: corrupt or another "
            f"format); {REDOWNLOAD}")
    ndim = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim))
    body = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    require(body.size == int(np.prod(shape)),
            f"{path} is {'truncated' if body.size < np.prod(shape) else 'too long'}: header says "
            f"{shape}, found {body.size} bytes; {REDOWNLOAD}")
    return body.reshape(shape)


def find_or_download(candidates: list[Path], found: Callable[[Path], bool],
                     download: Callable[[], object]) -> Path | None:
    """The first candidate folder holding the data, after one torchvision download attempt
    into ``data.root`` if none does (it fails quietly without a network)."""
    hit = next((d for d in candidates if found(d)), None)
    if hit is None:
        try:
            download()
        except Exception:
            pass
        hit = next((d for d in candidates if found(d)), None)
    return hit


_IDX_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
              "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")


def _has_idx(d: Path) -> bool:
    return all((d / f).exists() or (d / (f + ".gz")).exists() for f in _IDX_FILES)


def load_idx_dataset(name: str, root: Path, tv_folder: str, system_dirs: list[str],
                     tv_name: str, mean: float, std: float, how_to_get: str) -> Dataset:
    """MNIST-style IDX data: ``root`` in torchvision's layout, then ``system_dirs``, then a
    download by torchvision's class ``tv_name`` (where a network exists; torchvision loads
    only then)."""
    candidates = [root / tv_folder / "raw", root / tv_folder, root] + [Path(d) for d in system_dirs]

    def download():
        import torchvision.datasets
        tv_class = getattr(torchvision.datasets, tv_name)
        tv_class(str(root), train=True, download=True)
        tv_class(str(root), train=False, download=True)
    found = find_or_download(candidates, _has_idx, download)
    if found is None:
        raise not_found(name, candidates, how_to_get)

    sources = [found / f if (found / f).exists() else found / (f + ".gz") for f in _IDX_FILES]

    def decode():
        tr_x, tr_y, te_x, te_y = (read_idx(p) for p in sources)
        require(len(tr_x) == len(tr_y) and len(te_x) == len(te_y),
                f"dataset {name} in {found}: image and label counts differ (corrupt files); "
                f"{REDOWNLOAD.replace('it', 'them')}")
        return {"train_x": tr_x, "train_y": tr_y, "test_x": te_x, "test_y": te_y}
    a = cache.decoded(name, sources, decode)

    def normalize(u8: torch.Tensor) -> torch.Tensor:
        return standardize(u8.double() / 255.0, u8[:0].double(), mean, std)[0]
    return Dataset(name, cache.lookup(a["train_x"], normalize).unsqueeze(1), labels(a["train_y"]),
                   cache.lookup(a["test_x"], normalize).unsqueeze(1), labels(a["test_y"]),
                   num_classes=10, source=str(found))


@register("mnist")
def mnist(root: Path) -> Dataset:
    """MNIST (60,000 / 10,000 28x28 grey digits, 10 classes), normalized with the training
    set's mean 0.1307 and std 0.3081."""
    return load_idx_dataset(
        "mnist", root, "MNIST", [], "MNIST", mean=0.1307, std=0.3081,
        how_to_get="set data.root=DIR where torchvision can download it (needs a network), or put "
                   "the four IDX files of http://yann.lecun.com/exdb/mnist/ in DIR/MNIST/raw")


@register("fmnist")
def fmnist(root: Path) -> Dataset:
    """Fashion-MNIST (60,000 / 10,000 28x28 grey images, 10 classes), normalized with the
    training set's mean 0.2860 and std 0.3530."""
    return load_idx_dataset(
        "fmnist", root, "FashionMNIST", ["/usr/share/datasets/fashion-mnist"], "FashionMNIST",
        mean=0.2860, std=0.3530,
        how_to_get="set data.root=DIR where torchvision can download it (needs a network), or "
                   "`apt-get install dataset-fashion-mnist` (Debian/Ubuntu)")
