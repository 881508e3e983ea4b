"""Tiny datasets written in their true on-disk formats (IDX, CIFAR pickle batches, LIBSVM
text, LEAF JSON, ImageFolder PNG/JPEG, Tiny ImageNet's val_annotations.txt), for loaders whose
real data cannot be had here. Each writer returns the pixel/label arrays it wrote."""

from __future__ import annotations

import gzip
import json
import pickle
from pathlib import Path

import numpy as np
from PIL import Image


def write_idx(path: Path, a: np.ndarray) -> None:
    """An unsigned-byte IDX file (gzip-compressed if the name ends in .gz)."""
    head = bytes([0, 0, 8, a.ndim]) + b"".join(int(s).to_bytes(4, "big") for s in a.shape)
    (gzip.open if path.suffix == ".gz" else open)(path, "wb").write(
        head + a.astype(np.uint8).tobytes()
    )


def mnist_files(root: Path, n_train=20, n_test=10, seed=0) -> dict:
    rng = np.random.default_rng(seed)
    d = root / "MNIST" / "raw"
    d.mkdir(parents=True)
    out = {
        "train_x": rng.integers(0, 256, (n_train, 28, 28)),
        "train_y": np.arange(n_train) % 10,
        "test_x": rng.integers(0, 256, (n_test, 28, 28)),
        "test_y": np.arange(n_test) % 10,
    }
    for key, f in [
        ("train_x", "train-images-idx3-ubyte.gz"),
        ("train_y", "train-labels-idx1-ubyte"),
        ("test_x", "t10k-images-idx3-ubyte"),
        ("test_y", "t10k-labels-idx1-ubyte.gz"),
    ]:
        write_idx(d / f, out[key])
    return out


def cifar_files(root: Path, per_batch=4, seed=0) -> dict:
    """Five training batches and a test batch (pickled dicts with b'data' (m, 3072) uint8 and
    b'labels'), as in cifar-10-python.tar.gz."""
    rng = np.random.default_rng(seed)
    d = root / "cifar-10-batches-py"
    d.mkdir(parents=True)
    xs, ys = [], []
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        x = rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8)
        y = list(rng.integers(0, 10, per_batch))
        with open(d / name, "wb") as f:
            pickle.dump({b"data": x, b"labels": y, b"batch_label": name.encode()}, f)
        xs.append(x.reshape(-1, 3, 32, 32))
        ys.append(np.array(y))
    return {
        "train_x": np.concatenate(xs[:5]),
        "train_y": np.concatenate(ys[:5]),
        "test_x": xs[5],
        "test_y": ys[5],
    }


def a9a_files(root: Path) -> None:
    """LIBSVM text; the test file's largest feature index is below 123 (as in the real a9a.t)."""
    (root / "a9a").write_text("-1 3:1 11:1 123:1\n+1 1:1 5:1\n-1 2:1\n+1 7:1 123:1\n")
    (root / "a9a.t").write_text("+1 1:1 100:1\n-1 4:1\n")


def leaf_files(root: Path, seed=0) -> dict:
    """LEAF FEMNIST JSON: two train shards (three writers), one test shard."""
    rng = np.random.default_rng(seed)
    users = {"f0001_00": 3, "f0002_11": 2, "f0003_22": 4}
    d = root / "femnist" / "data"
    out = {"train_x": [], "train_y": [], "writers": []}
    for split, shards in [
        ("train", [["f0001_00", "f0002_11"], ["f0003_22"]]),
        ("test", [["f0001_00"]]),
    ]:
        (d / split).mkdir(parents=True)
        for k, us in enumerate(shards):
            ud = {}
            for u in us:
                x = rng.random((users[u], 784)).round(3)
                y = rng.integers(0, 62, users[u])
                ud[u] = {"x": x.tolist(), "y": y.tolist()}
                if split == "train":
                    out["train_x"].append(x)
                    out["train_y"].append(y)
                    out["writers"] += [u] * users[u]
            shard = {"users": us, "num_samples": [users[u] for u in us], "user_data": ud}
            (d / split / f"all_data_{k}_niid_0_keep_0_{split}_9.json").write_text(json.dumps(shard))
    return {
        "train_x": np.concatenate(out["train_x"]),
        "train_y": np.concatenate(out["train_y"]),
        "writers": out["writers"],
    }


def _image(path: Path, a: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(a.astype(np.uint8)).save(path)


def cinic_files(root: Path, per_class=1, seed=0) -> dict:
    """CINIC-10's ImageFolder layout: CINIC-10/{train,valid,test}/<class>/*.png (32x32 RGB)."""
    from fedprox_cli.data.images import CINIC_CLASSES

    rng = np.random.default_rng(seed)
    out = {}
    for split in ("train", "valid", "test"):
        for c, name in enumerate(CINIC_CLASSES[:3]):
            for j in range(per_class):
                a = rng.integers(0, 256, (32, 32, 3))
                _image(root / "CINIC-10" / split / name / f"cifar10-{split}-{j}.png", a)
                out[(split, c, j)] = a
    return out


def tiny_imagenet_files(root: Path, seed=0) -> dict:
    """tiny-imagenet-200/: wnids.txt, train/<wnid>/images/*.JPEG (+ boxes txt), val/images/*.JPEG
    and val/val_annotations.txt. JPEG is lossy, so images are flat colours (exact after decode)."""
    rng = np.random.default_rng(seed)
    d = root / "tiny-imagenet-200"
    d.mkdir(parents=True)
    wnids = ["n02124075", "n01443537"]  # listed unsorted: class ids follow sorted order
    (d / "wnids.txt").write_text("\n".join(wnids) + "\n")
    colours = {}
    for w in wnids:
        for j in range(2):
            c = rng.integers(0, 256, 3)
            _image(d / "train" / w / "images" / f"{w}_{j}.JPEG", np.broadcast_to(c, (64, 64, 3)))
            colours[(w, j)] = c
        (d / "train" / w / f"{w}_boxes.txt").write_text(f"{w}_0.JPEG\t0\t0\t63\t63\n")
    lines = []
    for j, w in enumerate(["n01443537", "n02124075", "n01443537"]):
        _image(d / "val" / "images" / f"val_{j}.JPEG", np.full((64, 64), 50 * j))  # greyscale JPEG
        lines.append(f"val_{j}.JPEG\t{w}\t0\t0\t63\t63")
    (d / "val" / "val_annotations.txt").write_text("\n".join(lines) + "\n")
    return colours
