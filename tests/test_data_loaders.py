"""Dataset loaders on fixtures in their true on-disk formats, and the offline datasets."""

import numpy as np
import pytest
import torch
from data_fixtures import (
    a9a_files,
    cifar_files,
    cinic_files,
    leaf_files,
    mnist_files,
    tiny_imagenet_files,
)

from fedprox_cli import data
from fedprox_cli.common.errors import UserError


def pixels(x: torch.Tensor, mean, std) -> np.ndarray:
    """Invert (p/255 - mean)/std per channel: the uint8 pixels p a loader read."""
    shape = (1, -1, 1, 1)
    p = (x * torch.tensor(std).view(shape) + torch.tensor(mean).view(shape)) * 255
    return p.round().numpy().astype(int)


def test_every_agreed_dataset_is_registered():
    assert set(data.names()) >= {
        "a9a",
        "mnist",
        "fmnist",
        "femnist",
        "cifar10",
        "cinic10",
        "tinyimagenet",
        "digits",
        "breast_cancer",
        "mnist5k",
    }


def test_mnist_idx_gz_and_plain(tmp_path):
    f = mnist_files(tmp_path)
    ds = data.load("mnist", tmp_path)
    assert ds.train_x.shape == (20, 1, 28, 28) and ds.test_x.shape == (10, 1, 28, 28)
    assert (pixels(ds.train_x, [0.1307], [0.3081])[:, 0] == f["train_x"]).all()
    assert (pixels(ds.test_x, [0.1307], [0.3081])[:, 0] == f["test_x"]).all()
    assert ds.train_y.tolist() == f["train_y"].tolist() and ds.num_classes == 10


def test_cifar10_pickle_batches(tmp_path):
    f = cifar_files(tmp_path)
    ds = data.load("cifar10", tmp_path)
    mean, std = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)
    assert ds.train_x.shape == (20, 3, 32, 32) and ds.test_x.shape == (4, 3, 32, 32)
    assert (pixels(ds.train_x, mean, std) == f["train_x"]).all()
    assert (pixels(ds.test_x, mean, std) == f["test_x"]).all()
    assert (
        ds.train_y.tolist() == f["train_y"].tolist() and ds.test_y.tolist() == f["test_y"].tolist()
    )


def test_a9a_libsvm_text(tmp_path):
    a9a_files(tmp_path)
    ds = data.load("a9a", tmp_path)
    assert ds.train_x.shape == (4, 123) and ds.test_x.shape == (2, 123)  # 123 features in both
    assert ds.train_y.tolist() == [0, 1, 0, 1] and ds.test_y.tolist() == [1, 0]
    assert ds.train_x[0].nonzero().flatten().tolist() == [2, 10, 122]  # 1-based LIBSVM indices
    assert ds.num_classes == 2


def test_femnist_leaf_json_with_writer_ids(tmp_path):
    f = leaf_files(tmp_path)
    ds = data.load("femnist", tmp_path)
    assert ds.train_x.shape == (9, 1, 28, 28) and ds.test_x.shape == (3, 1, 28, 28)
    assert ds.num_classes == 62 and ds.train_y.tolist() == f["train_y"].tolist()
    assert ds.groups.tolist() == [0, 0, 0, 1, 1, 2, 2, 2, 2]
    assert ds.train_x.mean().abs() < 1e-5 and (ds.train_x.std() - 1).abs() < 1e-3
    # standardization is affine: the loaded images are a fixed affine map of LEAF's pixels
    raw = torch.tensor(f["train_x"], dtype=torch.float32)
    back = ds.train_x.flatten(1) * raw.std() + raw.mean()
    assert torch.allclose(back, raw, atol=1e-5)


def test_cinic10_image_folder_and_cache(tmp_path):
    f = cinic_files(tmp_path)
    mean, std = (0.4789, 0.4723, 0.4305), (0.2421, 0.2383, 0.2587)
    ds = data.load("cinic10", tmp_path)
    assert ds.train_x.shape == (3, 3, 32, 32) and ds.train_y.tolist() == [0, 1, 2]
    for c in range(3):
        assert (
            pixels(ds.train_x[c : c + 1], mean, std)[0] == f[("train", c, 0)].transpose(2, 0, 1)
        ).all()
        assert (
            pixels(ds.test_x[c : c + 1], mean, std)[0] == f[("test", c, 0)].transpose(2, 0, 1)
        ).all()
    cache = tmp_path / "CINIC-10" / "fedprox_uint8.pt"
    assert cache.is_file() and not list(cache.parent.glob(".*tmp*"))
    for png in (tmp_path / "CINIC-10" / "train").rglob("*.png"):
        png.unlink()  # a second load must come from the cache alone
    again = data.load("cinic10", tmp_path)
    assert torch.equal(again.train_x, ds.train_x) and torch.equal(again.test_y, ds.test_y)


def test_tinyimagenet_layout(tmp_path):
    colours = tiny_imagenet_files(tmp_path)
    mean, std = (0.4802, 0.4481, 0.3975), (0.2302, 0.2265, 0.2262)
    ds = data.load("tinyimagenet", tmp_path)
    assert ds.num_classes == 200 and ds.train_x.shape == (4, 3, 64, 64)
    # classes are the sorted wnids: n01443537 -> 0, n02124075 -> 1
    assert sorted(ds.train_y.tolist()) == [0, 0, 1, 1] and ds.test_y.tolist() == [0, 1, 0]
    p = pixels(ds.train_x, mean, std)
    for img, y in zip(p, ds.train_y.tolist()):  # each image has one of its own class's colours
        wnid = sorted({w for w, _ in colours})[y]
        err = min(
            np.abs(img.reshape(3, -1) - c[:, None]).max()
            for (w, _), c in colours.items()
            if w == wnid
        )
        assert err <= 4  # JPEG's colour-space rounding
    val = pixels(ds.test_x, mean, std)
    assert np.abs(val[2] - 100).max() <= 4 and (val[2][0] == val[2][1]).all()  # grey -> RGB


@pytest.mark.parametrize(
    "name, where, how",
    [
        ("a9a", "a9a", "libsvmtools"),
        ("cinic10", "CINIC-10", "CINIC-10.tar.gz"),
        ("tinyimagenet", "tiny-imagenet-200", "tiny-imagenet-200.zip"),
        ("femnist", "femnist", "leaf"),
    ],
)
def test_missing_dataset_names_place_and_source(tmp_path, name, where, how):
    with pytest.raises(UserError) as e:
        data.load(name, tmp_path)
    msg = str(e.value)
    assert f"dataset {name} not found" in msg and str(tmp_path / where) in msg and how in msg


def test_corrupt_a9a_is_a_user_error(tmp_path):
    (tmp_path / "a9a").write_text("not libsvm at all\n")
    (tmp_path / "a9a.t").write_text("+1 1:1\n")
    with pytest.raises(UserError, match="LIBSVM"):
        data.load("a9a", tmp_path)


def test_offline_breast_cancer_and_mnist5k():
    bc = data.load("breast_cancer")
    assert bc.train_x.shape == (455, 30) and bc.test_x.shape == (114, 30) and bc.num_classes == 2
    assert torch.allclose(bc.train_x.mean(0), torch.zeros(30), atol=1e-5)
    assert torch.allclose(bc.train_x.std(0, unbiased=False), torch.ones(30), atol=1e-4)
    m = data.load("mnist5k")
    assert m.train_x.shape == (4000, 1, 28, 28) and m.test_x.shape == (1000, 1, 28, 28)
    assert m.train_y.bincount().tolist() == [400] * 10  # stratified split of 500 per class
    assert torch.equal(data.load("mnist5k").train_y, m.train_y)  # deterministic split
