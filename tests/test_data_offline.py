"""The offline datasets load as training sees them."""

import pytest
import torch

from fedprox_cli import data
from fedprox_cli.common.errors import UserError


def test_digits_standardized_and_split():
    ds = data.load("digits")
    assert ds.train_x.shape == (1437, 1, 8, 8) and ds.test_x.shape == (360, 1, 8, 8)
    assert abs(ds.train_x.mean()) < 1e-4 and abs(ds.train_x.std() - 1) < 1e-3
    assert ds.num_classes == 10 and set(ds.train_y.tolist()) == set(range(10))


def test_fmnist_from_debian_package(monkeypatch):
    monkeypatch.setenv("FEDPROX_DATA", "/nonexistent-root")  # no data.root given: Debian's copy
    ds = data.load("fmnist")
    assert ds.source == "/usr/share/datasets/fashion-mnist"
    assert ds.train_x.shape == (60000, 1, 28, 28) and ds.test_x.shape == (10000, 1, 28, 28)
    assert ds.train_x.dtype == torch.float32 and abs(ds.train_x.mean()) < 0.01
    assert abs(ds.train_x.std() - 1) < 0.01


def test_fmnist_corrupt_file_is_a_clear_error(tmp_path):
    raw = tmp_path / "FashionMNIST" / "raw"
    raw.mkdir(parents=True)
    for f in (
        "train-images-idx3-ubyte",
        "train-labels-idx1-ubyte",
        "t10k-images-idx3-ubyte",
        "t10k-labels-idx1-ubyte",
    ):
        (raw / f).write_bytes(b"\x00\x00\x08\x03" + (100).to_bytes(4, "big") * 3 + b"\x01" * 10)
    with pytest.raises(UserError, match="truncated"):
        data.load("fmnist", root=tmp_path)
