"""Partitions of a training set over n clients.

Every scheme is a pure function of (labels, groups where it uses them, scheme parameters,
seed), assigns every sample to exactly one client, terminates for any parameters (no
resampling loops), and guarantees each client at least ``min_size`` samples -- or refuses with
a clear error when n * min_size exceeds the data. Schemes are a registry
(:mod:`common.registry`: ``@register("name")``, an entry point of ``fedprox_cli.partitions`` or a
``_target_``); a scheme that takes ``groups`` splits by the dataset's natural groups (e.g.
FEMNIST's writers). :func:`partition` dispatches.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from ..common import guarded
from ..common.errors import require
from ..common.files import StrPath, atomic_write
from ..common.plugin_calls import calling
from ..common.registry import Registry, callable_contract

# name -> scheme(labels, n, rng, **params) -> per-client index arrays
register, names, lookup = (
    _REGISTRY := Registry[Callable[..., list[np.ndarray]]](  # (a plugin's result checked)
        "partition",
        "partitions",
        callable_contract("a partition scheme (labels, n, rng, **params) -> index arrays"),
    )
).calls()[:3]


def partition(
    scheme: str,
    labels: np.ndarray,
    n: int,
    seed: int,
    min_size: int = 1,
    groups: np.ndarray | None = None,
    _target_: str | None = None,
    **params: Any,
) -> list[np.ndarray]:
    """Per-client sorted int64 index arrays into the training set. ``groups`` (one id per
    sample, e.g. FEMNIST's writers) is required by the grouped schemes (those that take it);
    ``_target_``: a plugin's scheme by dotted path."""
    split = lookup(scheme, _target_)
    if "groups" in inspect.signature(split).parameters:
        require(
            groups is not None,
            f"partition {scheme} needs a dataset with natural groups "
            f"(writer ids), e.g. dataset=femnist",
        )
        params["groups"] = np.asarray(groups)
    labels = np.asarray(labels)
    N = len(labels)
    require(n >= 1, f"n must be a positive number of clients, got {n}")
    require(min_size >= 1, f"partition.min_size must be >= 1, got {min_size}")
    require(
        n * min_size <= N,
        f"n = {n} clients with at least partition.min_size = {min_size} "
        f"samples each needs {n * min_size} samples; the training set has {N}",
    )
    rng = np.random.default_rng(seed)
    with calling(split, "partition", "its scheme", scheme):
        clients = split(labels, n, rng, **params)
    clients = _top_up(clients, min_size, rng)
    return [np.sort(c).astype(np.int64) for c in clients]


def _top_up(clients: list[np.ndarray], min_size: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Give every client at least ``min_size`` samples by moving random samples from the
    currently largest client; at most n * min_size moves, so it always terminates."""
    clients = [rng.permutation(c) for c in clients]
    sizes = np.array([len(c) for c in clients])
    for i in np.flatnonzero(sizes < min_size):
        while len(clients[i]) < min_size:
            j = int(np.argmax([len(c) for c in clients]))
            take = min(min_size - len(clients[i]), len(clients[j]) - min_size)
            clients[i] = np.concatenate([clients[i], clients[j][:take]])
            clients[j] = clients[j][take:]
    return clients


@register("iid")
def iid(labels: np.ndarray, n: int, rng: np.random.Generator) -> list[np.ndarray]:
    """A uniformly random split into n parts of equal size (up to one sample)."""
    return np.array_split(rng.permutation(len(labels)), n)


@register("dirichlet")
def dirichlet(
    labels: np.ndarray, n: int, rng: np.random.Generator, alpha: float
) -> list[np.ndarray]:
    """Label skew: for each class c, proportions q_c ~ Dir(alpha 1_n) split the samples of c
    over the clients (Hsu et al. 2019; FedCanon Sec. IV-A3). Smaller alpha = more skew.
    Proportions that underflow to 0 (tiny alpha) send the whole class to one random client."""
    parts: list[list[np.ndarray]] = [[] for _ in range(n)]
    for c in np.unique(labels):
        idx = rng.permutation(np.flatnonzero(labels == c))
        for i, chunk in enumerate(_dirichlet_split(idx, n, alpha, rng)):
            parts[i].append(chunk)
    return [np.concatenate(p) if p else np.empty(0, np.int64) for p in parts]


def _dirichlet_split(
    items: np.ndarray, n: int, alpha: float, rng: np.random.Generator
) -> list[np.ndarray]:
    """``items`` cut into n consecutive chunks with proportions q ~ Dir(alpha 1_n).
    Proportions that underflow to 0 (tiny alpha) send all items to one random client."""
    require(alpha > 0, f"partition.alpha must be > 0, got {alpha}")
    q = rng.dirichlet(np.full(n, float(alpha)))
    if not np.all(np.isfinite(q)) or q.sum() <= 0:
        q = np.eye(n)[rng.integers(n)]
    return np.split(items, (np.cumsum(q)[:-1] * len(items)).round().astype(int))


@register("dirichlet_writers")
def dirichlet_writers(
    labels: np.ndarray, n: int, rng: np.random.Generator, alpha: float, groups: np.ndarray
) -> list[np.ndarray]:
    """User skew (FedCanon Sec. IV-A3, FEMNIST): proportions q ~ Dir(alpha 1_n) split the
    (shuffled) writers over the clients, and each writer's samples go whole to one client, so
    clients differ in writers (handwriting) and, through them, in labels. Only the
    ``min_size`` top-up (for clients left with too few samples) moves single samples."""
    ids, writer = np.unique(groups, return_inverse=True)
    client_of = np.empty(len(ids), np.int64)
    for c, ws in enumerate(_dirichlet_split(rng.permutation(len(ids)), n, alpha, rng)):
        client_of[ws] = c
    return _by_owner(client_of[writer], n)


def _by_owner(owner: np.ndarray, n: int) -> list[np.ndarray]:
    """Sample ids grouped by their client ``owner[s]`` in 0..n-1."""
    order = np.argsort(owner, kind="stable")
    return np.split(order, np.cumsum(np.bincount(owner, minlength=n))[:-1])


@register("sorted_shards")
def sorted_shards(labels: np.ndarray, n: int, rng: np.random.Generator) -> list[np.ndarray]:
    """FedNMap Sec. 5.1: "sort training samples by class labels and partition them among
    clients without overlap" -- the label-sorted data (random order within a class) cut into
    n contiguous shards of equal size (up to one sample), so each client sees one or a few
    consecutive classes."""
    order = rng.permutation(len(labels))
    return np.array_split(order[np.argsort(labels[order], kind="stable")], n)


def save_partition(path: StrPath, clients: list[np.ndarray]) -> None:
    """Write ``partition.npz``: arrays ``client_000``, ``client_001``, ... (atomically)."""
    arrays: dict[str, Any] = {f"client_{i:03d}": c for i, c in enumerate(clients)}
    atomic_write(path, lambda f: np.savez_compressed(f, **arrays))


def load_partition(path: StrPath) -> list[np.ndarray]:
    """The per-client index arrays of a saved ``partition.npz`` (a run folder's file)."""
    with guarded.opened(path) as f, np.load(f) as z:
        return [z[k] for k in sorted(z.files, key=lambda k: int(k.split("_")[1]))]
