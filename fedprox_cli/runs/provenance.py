"""What a run trained on, recorded and compared.

A run's fingerprint of its data (:func:`of_data`, :func:`of_partition`) holds the sizes and a
digest of the arrays as training sees them after loading (train and test images and labels,
the writers of a grouped data set) and of the partition; it is a function of the loaded
arrays only, whichever file or cache they came from; data read back from the decoded-data cache
have theirs computed once and kept beside it (:func:`of_data`). It is recorded in ``summary.json``
(``data``) and in the checkpoint. A re-run into the folder -- a resume, an extension, a run
that has finished already -- compares it with the fingerprint of the data it loads now
(:func:`changes`, a function over two recorded dicts), and a difference is one line naming
what changed (:func:`check`), before anything in the folder is written.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..common import guarded
from ..common.errors import require
from ..common.files import atomic_write_text
from ..data import cache
from ..data.datasets import Dataset

# what each part of the fingerprint is called in the line that names a change
PARTS = {
    "train_x": "training images",
    "train_y": "training labels",
    "groups": "training writers",
    "test_x": "test images",
    "test_y": "test labels",
    "partition": "partition",
}


def digest(a: torch.Tensor | np.ndarray) -> dict[str, Any]:
    """The shape, dtype and a SHA-256 of the bytes of an array (on the CPU), hashed once."""
    a = a.detach().cpu().numpy() if isinstance(a, torch.Tensor) else np.asarray(a)
    a = np.ascontiguousarray(a)
    return {
        "shape": list(a.shape),
        "dtype": str(a.dtype),
        "sha256": hashlib.sha256(a.data.cast("B")).hexdigest()[:16],
    }


def of_data(ds: Dataset) -> dict[str, Any]:
    """The fingerprint of a loaded :class:`data.Dataset` (before anything moves it to a device);
    for data with an ``origin`` (read back from the decoded-data cache), computed once and kept
    in :func:`cache_file` under it."""
    if not ds.origin:
        return _of_arrays(ds)
    path = cache_file()
    try:
        known = guarded.read_json(path)
    except (OSError, ValueError):
        known = {}  # none yet, or unreadable: computed and written again
    key = hashlib.sha256(ds.origin.encode()).hexdigest()
    got = known.get(key) if isinstance(known, dict) else None
    if isinstance(got, dict):
        return got
    got = _of_arrays(ds)
    try:
        atomic_write_text(path, json.dumps({**known, key: got}, indent=1, sort_keys=True))
    except OSError:
        pass  # an unwritable cache folder: the next run computes it again
    return got


def cache_file() -> Path:
    """The fingerprints of cached data sets, beside the decoded-data cache's entries."""
    return cache.folder() / "fingerprints.json"


def _of_arrays(ds: Dataset) -> dict[str, Any]:
    parts = {"train_x": ds.train_x, "train_y": ds.train_y, "test_x": ds.test_x, "test_y": ds.test_y}
    if ds.groups is not None:
        parts["groups"] = ds.groups
    return {k: digest(v) for k, v in parts.items()}


def of_partition(clients: list[np.ndarray]) -> dict[str, Any]:
    """The fingerprint of a partition: every client's sample ids, in order."""
    sizes = np.array([len(c) for c in clients], np.int64)
    joined = np.concatenate([sizes, *[np.asarray(c, np.int64) for c in clients]])
    return {"partition": {**digest(joined), "clients": len(clients)}}


def _size(d: dict[str, Any]) -> str:
    return "x".join(map(str, d.get("shape", []))) or "?"


def changes(recorded: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """What differs between two fingerprints, in words (``training labels changed``, ``test
    images 10000x1x28x28 -> 9000x1x28x28``); the partition only when the data are the same.
    Parts one of them lacks (recorded by an older version) are not compared."""
    out: list[str] = []
    for key, what in PARTS.items():
        a, b = recorded.get(key), now.get(key)
        if not (isinstance(a, dict) and isinstance(b, dict)) or a == b:
            continue
        if key == "partition" and out:
            continue
        if a.get("shape") != b.get("shape"):
            out.append(f"{what} {_size(a)} -> {_size(b)}")
        elif a.get("dtype") != b.get("dtype"):
            out.append(f"{what} {a.get('dtype')} -> {b.get('dtype')}")
        else:
            out.append(f"{what} changed")
    return out


def check(recorded: dict[str, Any] | None, now: dict[str, Any], out: Path) -> None:
    """Refuse (:class:`UserError`) data that differ from those the run in ``out`` trained on
    (``recorded``: its fingerprint; None for a run recorded without one)."""
    diff = changes(recorded, now) if isinstance(recorded, dict) else []
    require(
        not diff,
        f"the data differ from those the run in {out} trained on ({'; '.join(diff)}); "
        f"point data.root at the data it used, or set resume=false to start it over",
    )
