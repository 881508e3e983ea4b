"""LEAF's FEMNIST (JSON shards with writer ids)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from ..common.errors import require
from .datasets import Dataset, cached, labels, not_found, reading, register, standardize


def read_leaf(folder: Path) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """All ``*.json`` shards of a LEAF split: images (N, 784) float32, labels (N,), and the
    writer (LEAF "user") of each sample."""
    xs, ys, users = [], [], []
    for f in sorted(folder.glob("*.json")):
        remedy = (
            "regenerate it with LEAF's preprocess.sh (and delete fedprox_float32.pt beside "
            "the splits)"
        )
        with reading(f, remedy):
            shard = json.loads(f.read_text())
        require(
            isinstance(shard, dict) and "users" in shard and "user_data" in shard,
            f"{f} is not LEAF JSON (no 'users' / 'user_data' keys); {remedy}",
        )
        for u in shard["users"]:
            ud = shard["user_data"][u]
            require(
                len(ud["x"]) == len(ud["y"]),
                f"{f}: writer {u} has {len(ud['x'])} images but {len(ud['y'])} labels",
            )
            xs.append(np.asarray(ud["x"], dtype=np.float32).reshape(-1, 784))
            ys.append(np.asarray(ud["y"], dtype=np.int64))
            users += [u] * len(ud["y"])
    require(len(xs) > 0, f"{folder}: the LEAF JSON files hold no samples")
    return np.concatenate(xs), np.concatenate(ys), users


FEMNIST_CLASSES = 62  # 10 digits, 26 upper- and 26 lower-case letters


@register("femnist")
def femnist(root: Path) -> Dataset:
    """FEMNIST (LEAF; 28x28 grey characters, 62 classes, about 3,500 writers) from LEAF's JSON
    output ``data.root/femnist/data/{train,test}/*.json`` (or ``data.root/femnist/{train,test}``).
    ``groups`` holds each training sample's writer id (0..W-1, in order of first appearance);
    pixels (LEAF gives values in [0, 1]) are standardized with the training mean/std."""
    candidates = [root / "femnist" / "data", root / "femnist"]
    d = next(
        (
            c
            for c in candidates
            if any((c / "train").glob("*.json")) and any((c / "test").glob("*.json"))
        ),
        None,
    )
    if d is None:
        raise not_found(
            "femnist",
            [c / s for c in candidates for s in ("train", "test")],
            "generate it with LEAF (https://github.com/TalwalkarLab/leaf, data/femnist: "
            "./preprocess.sh -s niid --sf 1.0 -k 0 -t sample) and set data.root to "
            "the folder holding femnist/",
        )

    def build() -> dict[str, torch.Tensor]:
        (tr_x, tr_y, users), (te_x, te_y, _) = read_leaf(d / "train"), read_leaf(d / "test")
        ids = {u: i for i, u in enumerate(dict.fromkeys(users))}
        return {
            "train_x": torch.from_numpy(tr_x),
            "train_y": labels(tr_y),
            "test_x": torch.from_numpy(te_x),
            "test_y": labels(te_y),
            "groups": labels([ids[u] for u in users]),
        }

    c = cached(d / "fedprox_float32.pt", build)
    require(
        int(max(c["train_y"].max(), c["test_y"].max())) < FEMNIST_CLASSES,
        f"femnist in {d}: labels must lie in 0..{FEMNIST_CLASSES - 1}",
    )
    mean, std = float(c["train_x"].mean()), float(c["train_x"].std())
    train_x, test_x = standardize(c["train_x"], c["test_x"], mean, std)
    return Dataset(
        "femnist",
        train_x.view(-1, 1, 28, 28),
        c["train_y"],
        test_x.view(-1, 1, 28, 28),
        c["test_y"],
        FEMNIST_CLASSES,
        groups=c["groups"],
        source=str(d),
    )
