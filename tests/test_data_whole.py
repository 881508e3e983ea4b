"""Data checked as a whole at load (docs/robustness.md, "Data that do not fit together"): files
each readable on its own but not together -- test images of another size than the training
images, a labels file where an images file should be, counts that differ, a file missing --
are one line naming the files, exit 2, before anything trains; a plugin's loader is held to
the same (samples against labels, train against test)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import child_env, fedrun
from data_fixtures import mnist_files, write_idx

from fedprox_cli import data
from fedprox_cli.common.errors import UserError

ENV = child_env(OMP_NUM_THREADS="1")
RUN = ["dataset=mnist", "model=linear", "n=2", "K=1", "T=1", "partition=iid"]


def run(tmp_path, root):
    return fedrun(
        *RUN, f"data.root={root}", f"hydra.run.dir={tmp_path / 'r'}", cwd=tmp_path, env=ENV
    )


def test_test_images_of_another_size_name_both_files(tmp_path):
    mnist_files(tmp_path / "d")
    raw = tmp_path / "d" / "MNIST" / "raw"
    write_idx(raw / "train-images-idx3-ubyte.gz", np.zeros((20, 3, 3)))
    p = run(tmp_path, tmp_path / "d")
    assert p.returncode == 2, p.stderr
    [line] = [x for x in p.stderr.splitlines() if x.startswith("fedrun: error:")]
    assert (
        f"the training images in {raw / 'train-images-idx3-ubyte.gz'} are 3x3, the test images in "
        f"{raw / 't10k-images-idx3-ubyte'} 28x28" in line
    )


def test_a_labels_file_in_place_of_the_images_is_named(tmp_path):
    mnist_files(tmp_path / "d")
    raw = tmp_path / "d" / "MNIST" / "raw"
    (raw / "t10k-images-idx3-ubyte").write_bytes((raw / "train-labels-idx1-ubyte").read_bytes())
    p = run(tmp_path, tmp_path / "d")
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert (
        f"{raw / 't10k-images-idx3-ubyte'} should hold images (3-dimensional IDX) but holds a "
        f"1-dimensional array (20,)" in p.stderr
    )


def test_a_partly_missing_dataset_names_the_missing_file(tmp_path):
    mnist_files(tmp_path / "d")
    raw = tmp_path / "d" / "MNIST" / "raw"
    (raw / "t10k-labels-idx1-ubyte.gz").unlink()
    p = run(tmp_path, tmp_path / "d")
    assert p.returncode == 2
    assert (
        f"dataset mnist in {raw} is incomplete: t10k-labels-idx1-ubyte (or .gz) is missing"
        in p.stderr
    )


@pytest.mark.parametrize(
    "change, said",
    [
        (
            lambda ds: setattr(ds, "test_x", ds.test_x[:, :, :3, :3]),
            "training samples of shape (1, 8, 8) but test samples of shape (1, 3, 3)",
        ),
        (lambda ds: setattr(ds, "train_y", ds.train_y[:-1]), "training samples but"),
        (lambda ds: setattr(ds, "test_y", ds.test_y.float()), "the labels integers"),
    ],
)
def test_a_loader_s_dataset_is_checked_as_a_whole(monkeypatch, change, said):
    real = data.datasets.lookup("digits")

    def loader(root):
        ds = real(root)
        ds.train_x, ds.test_x = ds.train_x.reshape(-1, 1, 8, 8), ds.test_x.reshape(-1, 1, 8, 8)
        change(ds)
        return ds

    monkeypatch.setitem(data.datasets._REGISTRY, "digits", loader)
    with pytest.raises(UserError, match=said.replace("(", r"\(").replace(")", r"\)")):
        data.load("digits")
