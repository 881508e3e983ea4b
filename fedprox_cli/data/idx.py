"""MNIST-format (IDX) datasets: mnist, fmnist."""

from __future__ import annotations

import gzip
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from ..common.errors import UserError, require
from . import cache
from .datasets import REDOWNLOAD, Dataset, labels, not_found, reading, register, standardize


def read_idx(path: Path) -> np.ndarray:
    """Read an IDX file (MNIST format), gzip-compressed or not."""
    opener = gzip.open if path.suffix == ".gz" else open
    with reading(path), opener(path, "rb") as f:
        data = f.read()
    require(
        len(data) >= 4 and data[0] == 0 and data[1] == 0 and data[2] == 8,
        f"{path} is not an unsigned-byte IDX file (wrong magic number: corrupt or another "
        f"format); {REDOWNLOAD}",
    )
    ndim = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    body = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    require(
        body.size == int(np.prod(shape)),
        f"{path} is {'truncated' if body.size < np.prod(shape) else 'too long'}: header says "
        f"{shape}, found {body.size} bytes; {REDOWNLOAD}",
    )
    return body.reshape(shape)


def find_or_download(
    candidates: list[Path], found: Callable[[Path], bool], download: Callable[[], object]
) -> Path | None:
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


_IDX_FILES = (
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
)


def _idx_file(d: Path, f: str) -> bool:
    return (d / f).exists() or (d / (f + ".gz")).exists()


def _has_idx(d: Path) -> bool:
    return all(_idx_file(d, f) for f in _IDX_FILES)


def check_whole(name: str, files: dict[Path, np.ndarray]) -> None:
    """The four IDX arrays (train images, train labels, test images, test labels), each read
    on its own, checked together: images are (N, H, W), labels (N,), each images file as long
    as its labels file, and the test images of the training images' size. One
    :class:`UserError` naming the files that disagree."""
    (trx, tr_x), (try_, tr_y), (tex, te_x), (tey, te_y) = files.items()
    for path, a, kind, ndim in (
        (trx, tr_x, "images", 3),
        (try_, tr_y, "labels", 1),
        (tex, te_x, "images", 3),
        (tey, te_y, "labels", 1),
    ):
        require(
            a.ndim == ndim,
            f"dataset {name}: {path} should hold {kind} ({ndim}-dimensional IDX) but holds "
            f"a {a.ndim}-dimensional array {a.shape}: another file in its place; "
            f"{REDOWNLOAD}",
        )
    for images, x, labels_, y in ((trx, tr_x, try_, tr_y), (tex, te_x, tey, te_y)):
        require(
            len(x) == len(y),
            f"dataset {name}: {images} holds {len(x)} images but {labels_} "
            f"{len(y)} labels; {REDOWNLOAD.replace('it', 'them')}",
        )
    require(
        tr_x.shape[1:] == te_x.shape[1:],
        f"dataset {name}: the training images in {trx} are {'x'.join(map(str, tr_x.shape[1:]))}, "
        f"the "
        f"test images in {tex} {'x'.join(map(str, te_x.shape[1:]))}; a model takes one size: "
        f"{REDOWNLOAD.replace('it', 'them')}",
    )


def load_idx_dataset(
    name: str,
    root: Path,
    tv_folder: str,
    system_dirs: list[str],
    tv_name: str,
    mean: float,
    std: float,
    how_to_get: str,
) -> Dataset:
    """MNIST-style IDX data: ``root`` in torchvision's layout, then ``system_dirs``, then a
    download by torchvision's class ``tv_name`` (where a network exists; torchvision loads
    only then)."""
    candidates = [root / tv_folder / "raw", root / tv_folder, root] + [Path(d) for d in system_dirs]

    def download() -> None:
        import torchvision.datasets

        tv_class = getattr(torchvision.datasets, tv_name)
        tv_class(str(root), train=True, download=True)
        tv_class(str(root), train=False, download=True)

    found = find_or_download(candidates, _has_idx, download)
    if found is None:
        partial = next((d for d in candidates if any(_idx_file(d, f) for f in _IDX_FILES)), None)
        if partial is not None:  # some of the four files: name those that are missing
            missing = [f for f in _IDX_FILES if not _idx_file(d := partial, f)]
            raise UserError(
                f"dataset {name} in {d} is incomplete: {', '.join(missing)} (or .gz) "
                f"{'is' if len(missing) == 1 else 'are'} missing; {how_to_get}"
            )
        raise not_found(name, candidates, how_to_get)

    sources = [found / f if (found / f).exists() else found / (f + ".gz") for f in _IDX_FILES]

    def decode() -> dict[str, np.ndarray]:
        arrays = [read_idx(p) for p in sources]
        check_whole(name, dict(zip(sources, arrays)))
        return dict(zip(("train_x", "train_y", "test_x", "test_y"), arrays))

    a = cache.decoded(name, sources, decode)

    def normalize(u8: torch.Tensor) -> torch.Tensor:
        return standardize(u8.double() / 255.0, u8[:0].double(), mean, std)[0]

    return Dataset(
        name,
        cache.lookup(a["train_x"], normalize).unsqueeze(1),
        labels(a["train_y"]),
        cache.lookup(a["test_x"], normalize).unsqueeze(1),
        labels(a["test_y"]),
        num_classes=10,
        source=str(found),
        origin=a.origin,
    )


@register("mnist")
def mnist(root: Path) -> Dataset:
    """MNIST (60,000 / 10,000 28x28 grey digits, 10 classes), normalized with the training
    set's mean 0.1307 and std 0.3081."""
    return load_idx_dataset(
        "mnist",
        root,
        "MNIST",
        [],
        "MNIST",
        mean=0.1307,
        std=0.3081,
        how_to_get="set data.root=DIR where torchvision can download it (needs a network), or put "
        "the four IDX files of http://yann.lecun.com/exdb/mnist/ in DIR/MNIST/raw",
    )


@register("fmnist")
def fmnist(root: Path) -> Dataset:
    """Fashion-MNIST (60,000 / 10,000 28x28 grey images, 10 classes), normalized with the
    training set's mean 0.2860 and std 0.3530."""
    return load_idx_dataset(
        "fmnist",
        root,
        "FashionMNIST",
        ["/usr/share/datasets/fashion-mnist"],
        "FashionMNIST",
        mean=0.2860,
        std=0.3530,
        how_to_get="set data.root=DIR where torchvision can download it (needs a network), or "
        "`apt-get install dataset-fashion-mnist` (Debian/Ubuntu)",
    )
