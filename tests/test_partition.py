import time

import numpy as np
import pytest

from fedprox_cli.common.errors import UserError
from fedprox_cli.data import load_partition, partition, save_partition

LABELS = np.random.default_rng(0).integers(0, 10, size=5000)


@pytest.mark.parametrize(
    "scheme,params", [("iid", {}), ("dirichlet", {"alpha": 0.5}), ("dirichlet", {"alpha": 1e-3})]
)
def test_every_sample_exactly_once_and_reproducible(scheme, params):
    a = partition(scheme, LABELS, n=20, seed=3, min_size=10, **params)
    b = partition(scheme, LABELS, n=20, seed=3, min_size=10, **params)
    c = partition(scheme, LABELS, n=20, seed=4, min_size=10, **params)
    allidx = np.concatenate(a)
    assert np.array_equal(np.sort(allidx), np.arange(len(LABELS)))
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not all(np.array_equal(x, y) for x, y in zip(a, c))
    assert min(len(x) for x in a) >= 10


def test_dirichlet_tiny_alpha_terminates_fast_and_is_skewed():
    start = time.perf_counter()
    parts = partition("dirichlet", LABELS, n=100, seed=0, min_size=5, alpha=1e-3)
    assert time.perf_counter() - start < 5
    assert len(parts) == 100 and min(len(p) for p in parts) >= 5
    # most clients hold essentially one class
    dominant = [np.bincount(LABELS[p], minlength=10).max() / len(p) for p in parts]
    assert np.median(dominant) > 0.9


def test_refuses_impossible_minimum():
    with pytest.raises(UserError, match="needs 6000 samples"):
        partition("dirichlet", LABELS, n=100, seed=0, min_size=60, alpha=0.1)


def test_saved_partition_round_trips(tmp_path):
    parts = partition("dirichlet", LABELS, n=12, seed=1, min_size=1, alpha=0.1)
    save_partition(tmp_path / "partition.npz", parts)
    back = load_partition(tmp_path / "partition.npz")
    assert len(back) == 12 and all(np.array_equal(x, y) for x, y in zip(parts, back))
