"""dirichlet_writers (FedCanon Sec. IV-A3) and sorted_shards (FedNMap Sec. 5.1)."""

import numpy as np
import pytest

from fedprox_cli.common.errors import UserError
from fedprox_cli.data import partition

RNG = np.random.default_rng(0)
LABELS = RNG.integers(0, 10, 3000)
WRITERS = RNG.integers(0, 120, 3000) * 7 + 1000  # arbitrary (non-contiguous) writer ids


def exactly_once(clients, N):
    allidx = np.concatenate(clients)
    return len(allidx) == N and np.array_equal(np.sort(allidx), np.arange(N))


@pytest.mark.parametrize("alpha", [1e-3, 0.1, 1.0, 100.0])
def test_dirichlet_writers_keeps_writers_whole(alpha):
    n, min_size = 10, 4
    clients = partition(
        "dirichlet_writers", LABELS, n, seed=3, min_size=min_size, alpha=alpha, groups=WRITERS
    )
    assert exactly_once(clients, len(LABELS)) and min(map(len, clients)) >= min_size
    owner = np.empty(len(LABELS), int)
    for i, c in enumerate(clients):
        owner[c] = i
    # samples away from their writer's main client: only the min_size top-up moves any
    moved = sum(
        (WRITERS == w).sum() - np.bincount(owner[WRITERS == w]).max() for w in np.unique(WRITERS)
    )
    assert moved <= (n - 1) * min_size
    if alpha >= 1:  # 120 writers over 10 clients: nobody needs a top-up, every writer is whole
        assert moved == 0


def test_dirichlet_writers_skew_grows_as_alpha_shrinks():
    def writers_per_client(alpha):
        return [
            len(np.unique(WRITERS[c]))
            for c in partition("dirichlet_writers", LABELS, 10, 0, alpha=alpha, groups=WRITERS)
        ]

    assert np.std(writers_per_client(1e-3)) > np.std(writers_per_client(100.0))
    assert max(writers_per_client(1e-3)) >= 100  # nearly all 120 writers on one client


def test_dirichlet_writers_tiny_alpha_many_clients_terminates_with_min_size():
    clients = partition(
        "dirichlet_writers", LABELS, 100, seed=0, min_size=5, alpha=1e-3, groups=WRITERS
    )
    assert len(clients) == 100 and min(map(len, clients)) >= 5 and exactly_once(clients, 3000)


@pytest.mark.parametrize(
    "scheme, params",
    [("dirichlet_writers", {"alpha": 0.3, "groups": WRITERS}), ("sorted_shards", {})],
)
def test_pure_function_of_seed(scheme, params):
    a = partition(scheme, LABELS, 7, seed=11, **params)
    b = partition(scheme, LABELS, 7, seed=11, **params)
    c = partition(scheme, LABELS, 7, seed=12, **params)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not all(np.array_equal(x, y) for x, y in zip(a, c))


def test_dirichlet_writers_needs_groups():
    with pytest.raises(UserError, match="writer ids"):
        partition("dirichlet_writers", LABELS, 5, seed=0, alpha=0.5)


@pytest.mark.parametrize("n", [1, 7, 10, 30, 100])
def test_sorted_shards_contiguous_label_blocks(n):
    clients = partition("sorted_shards", LABELS, n, seed=0)
    assert exactly_once(clients, len(LABELS))
    sizes = [len(c) for c in clients]
    assert max(sizes) - min(sizes) <= 1
    for a, b in zip(clients, clients[1:]):  # client i's labels all precede client i+1's
        assert LABELS[a].max() <= LABELS[b].min()
    if n == 10:  # balanced labels, 10 shards: about one class each
        assert np.mean([len(np.unique(LABELS[c])) for c in clients]) <= 2


def test_sorted_shards_refuses_too_many_clients():
    with pytest.raises(UserError, match="min_size"):
        partition("sorted_shards", LABELS[:50], 20, seed=0, min_size=3)
