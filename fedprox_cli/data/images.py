"""Colour image datasets: cifar10 (CIFAR pickle batches), cinic10 and tinyimagenet (image
folders). Decoded images are cached once as uint8 tensors in a ``.pt`` file beside the data
(:func:`~.datasets.cached`), so later runs load 90k-100k images in seconds."""

from __future__ import annotations

import os
import pickle
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import torch

from ..common import thread_room
from ..common.errors import UserError, require
from ..common.files import read_text
from .cache import decoded, lookup
from .datasets import Dataset, cached, labels, not_found, reading, register, standardize
from .idx import find_or_download

_CIFAR_BATCHES = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]


def _read_cifar_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """One CIFAR-10 pickle batch: uint8 images (m, 3, 32, 32) and labels (m,)."""
    with reading(path), open(path, "rb") as f:
        d = pickle.load(f, encoding="bytes")
        x = np.asarray(d[b"data"], dtype=np.uint8).reshape(-1, 3, 32, 32)
        return x, np.asarray(d[b"labels"], dtype=np.int64)


# per data set: the per-channel mean and std it is normalized with, and its classes
NORMALIZED: dict[str, tuple[Sequence[float], Sequence[float], int]] = {
    "cifar10": ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616), 10),
    "cinic10": ((0.4789, 0.4723, 0.4305), (0.2421, 0.2383, 0.2587), 10),
    "tinyimagenet": ((0.4802, 0.4481, 0.3975), (0.2302, 0.2265, 0.2262), 200),
}


def _from_uint8(name: str, d: Mapping[str, np.ndarray | torch.Tensor]) -> Dataset:
    """uint8 (N, C, H, W) arrays or tensors -> float (x/255 - mean)/std per channel, with
    the data set's :data:`NORMALIZED` mean and std."""
    mean, std, num_classes = NORMALIZED[name]

    def normalize(u8: torch.Tensor) -> torch.Tensor:
        return standardize(u8 / 255.0, u8[:0] / 255.0, mean, std)[0]

    train_x, test_x = (
        lookup(np.asarray(d[k]), normalize, channel_dim=1) for k in ("train_x", "test_x")
    )
    return Dataset(
        name,
        train_x,
        labels(d["train_y"]),
        test_x,
        labels(d["test_y"]),
        num_classes,
        origin=getattr(d, "origin", ""),
    )


@register("cifar10")
def cifar10(root: Path) -> Dataset:
    """CIFAR-10 (50,000 / 10,000 32x32 colour images, 10 classes) from torchvision's layout
    ``data.root/cifar-10-batches-py/`` (downloaded there by torchvision where a network exists);
    normalized per channel with the training set's mean (0.4914, 0.4822, 0.4465) and std
    (0.2470, 0.2435, 0.2616)."""

    def download() -> None:
        from torchvision.datasets import CIFAR10

        CIFAR10(str(root), train=True, download=True)

    candidates = [root / "cifar-10-batches-py", root]
    d = find_or_download(
        candidates, lambda c: all((c / b).is_file() for b in _CIFAR_BATCHES), download
    )
    if d is None:
        raise not_found(
            "cifar10",
            candidates,
            "set data.root=DIR where torchvision can download "
            "it (needs a network), or unpack https://www.cs.toronto.edu/~kriz/"
            "cifar-10-python.tar.gz in DIR",
        )

    def decode() -> dict[str, np.ndarray]:
        parts = [_read_cifar_batch(d / b) for b in _CIFAR_BATCHES]
        tr_x, tr_y = (np.concatenate(a) for a in zip(*parts[:-1]))
        return {"train_x": tr_x, "train_y": tr_y, "test_x": parts[-1][0], "test_y": parts[-1][1]}

    u8 = decoded("cifar10", [d / b for b in _CIFAR_BATCHES], decode)
    return _from_uint8("cifar10", u8)


def _decode(path: Path) -> np.ndarray:
    from PIL import Image

    with (
        reading(
            path, "delete or replace the file (and the fedprox_uint8.pt cache beside the data)"
        ),
        Image.open(path) as im,
    ):
        return np.asarray(im.convert("RGB"), dtype=np.uint8)


def decode_images(paths: list[Path]) -> torch.Tensor:
    """Decode image files (in parallel threads) into one uint8 tensor (N, 3, H, W)."""
    require(len(paths) > 0, "no image files found")
    threads = thread_room.pool_threads(min(thread_room.POOL_MAX, os.cpu_count() or 1))
    if threads == 1:  # a limit on the user's threads: in this thread
        arrays = [_decode(p) for p in paths]
    else:
        with ThreadPoolExecutor(max_workers=threads) as pool:
            arrays = list(pool.map(_decode, paths, chunksize=256))
    shapes = {a.shape for a in arrays}
    if len(shapes) != 1:
        raise UserError(
            f"images of different sizes {sorted(shapes)[:3]} under {paths[0].parent.parent}"
        )
    return torch.from_numpy(np.stack(arrays)).permute(0, 3, 1, 2).contiguous()


def image_folder(folder: Path, classes: list[str]) -> tuple[list[Path], torch.Tensor]:
    """Image files of an ImageFolder tree ``folder/<class>/**/*.png|jpeg`` and their labels
    (index in ``classes``)."""
    from torchvision.datasets import ImageFolder

    f = ImageFolder(str(folder), allow_empty=True)
    require(
        set(f.classes) <= set(classes),
        f"{folder}: unknown class folders {sorted(set(f.classes) - set(classes))[:5]}",
    )
    return [Path(p) for p, _ in f.samples], labels(
        np.array([classes.index(f.classes[c]) for _, c in f.samples], np.int64)
    )


CINIC_CLASSES = [
    "airplane",
    "automobile",
    "bird",
    "cat",
    "deer",
    "dog",
    "frog",
    "horse",
    "ship",
    "truck",
]


@register("cinic10")
def cinic10(root: Path) -> Dataset:
    """CINIC-10 (90,000 train / 90,000 test 32x32 colour images, CIFAR-10's classes) from
    ``data.root/CINIC-10/{train,test}/<class>/*.png`` (``valid/`` is not used); normalized per
    channel with its mean (0.4789, 0.4723, 0.4305) and std (0.2421, 0.2383, 0.2587)."""
    d = root / "CINIC-10"
    if not all((d / s).is_dir() for s in ("train", "test")):
        raise not_found(
            "cinic10",
            [d / "train", d / "test"],
            "download and unpack "
            "https://datashare.ed.ac.uk/bitstream/handle/10283/3192/CINIC-10.tar.gz "
            "into DIR/CINIC-10 and set data.root=DIR",
        )

    def build() -> dict[str, torch.Tensor]:
        (tr_p, tr_y), (te_p, te_y) = (image_folder(d / s, CINIC_CLASSES) for s in ("train", "test"))
        return {
            "train_x": decode_images(tr_p),
            "train_y": tr_y,
            "test_x": decode_images(te_p),
            "test_y": te_y,
        }

    return _from_uint8("cinic10", cached(d / "fedprox_uint8.pt", build))


@register("tinyimagenet")
def tinyimagenet(root: Path) -> Dataset:
    """Tiny ImageNet (100,000 train / 10,000 val 64x64 colour images, 200 classes) from
    ``data.root/tiny-imagenet-200/``: ``wnids.txt``, ``train/<wnid>/images/*.JPEG`` and
    ``val/images/*.JPEG`` labelled by ``val/val_annotations.txt`` (the val set is the test set;
    the official test set has no labels). Normalized per channel with mean (0.4802, 0.4481,
    0.3975) and std (0.2302, 0.2265, 0.2262)."""
    d = root / "tiny-imagenet-200"
    need = [d / "wnids.txt", d / "train", d / "val" / "val_annotations.txt"]
    if not all(p.exists() for p in need):
        raise not_found(
            "tinyimagenet",
            need,
            "download and unpack "
            "http://cs231n.stanford.edu/tiny-imagenet-200.zip into DIR and set "
            "data.root=DIR",
        )

    def build() -> dict[str, torch.Tensor]:
        classes = sorted(read_text(d / "wnids.txt").split())
        tr_p, tr_y = image_folder(d / "train", classes)
        rows = [
            line.split("\t")
            for line in read_text(d / "val" / "val_annotations.txt").splitlines()
            if line.strip()
        ]
        require(
            all(len(r) >= 2 and r[1] in classes for r in rows),
            f"{d}/val/val_annotations.txt: each line must be 'file<TAB>wnid...' with a wnid of "
            f"wnids.txt",
        )
        te_p = [d / "val" / "images" / r[0] for r in rows]
        return {
            "train_x": decode_images(tr_p),
            "train_y": tr_y,
            "test_x": decode_images(te_p),
            "test_y": labels([classes.index(r[1]) for r in rows]),
        }

    return _from_uint8("tinyimagenet", cached(d / "fedprox_uint8.pt", build))
