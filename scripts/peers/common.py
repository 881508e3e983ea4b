"""What the peers' FedAvg scripts share with fedrun's workload: Fashion-MNIST read from its IDX
files and normalized as fedrun does (mean 0.2860, std 0.3530), an iid split into n equal
clients, fedrun's MLP 784-200-200-10, the final model's metrics as fedrun computes them (the
same outputs: :func:`final_metrics`), and
the log of each client call's seconds that the benchmark reads (``PEER_CALL_LOG``).

The data are read, decoded and split once per process: :func:`fmnist`, :func:`iid` and
:func:`client_data` are cached (``functools.lru_cache``) in this module, which a process keeps
imported. For Flower this is the worker's cache across client calls -- the role of the
module-level ``fds`` cache in the ``task.py`` of Flower's PyTorch quickstart -- and it has to
live here, not in the ``ClientApp``'s file: a ``ClientApp`` defined in a script's ``__main__``
reaches Ray's worker by value with every message, its module globals fresh each time. The cached
arrays are shared: callers must not write to them."""

import functools
import gzip
import os
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch
from torch import nn

FMNIST = Path(os.environ.get("FMNIST_DIR", "/usr/share/datasets/fashion-mnist"))


def _idx(name: str) -> np.ndarray:
    path = next(p for p in (FMNIST / name, FMNIST / f"{name}.gz") if p.exists())
    data = (gzip.open if path.suffix == ".gz" else open)(path, "rb").read()
    shape = tuple(int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(data[3]))
    return np.frombuffer(data, np.uint8, offset=4 + 4 * data[3]).reshape(shape)


@functools.lru_cache(maxsize=None)
def fmnist() -> tuple[np.ndarray, np.ndarray]:
    """Training images (60000, 784) float32, normalized, and labels (60000,) int64; read and
    decoded once per process."""
    x = (_idx("train-images-idx3-ubyte").reshape(-1, 784) / 255.0 - 0.2860) / 0.3530
    return x.astype(np.float32), _idx("train-labels-idx1-ubyte").astype(np.int64)


@functools.lru_cache(maxsize=None)
def iid(n: int, samples: int = 60000, seed: int = 0) -> tuple[np.ndarray, ...]:
    """Sample indices of n equal iid clients."""
    return tuple(np.array_split(np.random.default_rng(seed).permutation(samples), n))


@functools.lru_cache(maxsize=None)
def client_data(n: int, i: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Client ``i`` of ``n`` iid clients: its images and labels as tensors, gathered once per
    process."""
    x, y = fmnist()
    part = iid(n)[i]
    return torch.from_numpy(x[part]), torch.from_numpy(y[part])


def mlp() -> nn.Sequential:
    return nn.Sequential(
        nn.Linear(784, 200), nn.ReLU(), nn.Linear(200, 200), nn.ReLU(), nn.Linear(200, 10)
    )


@functools.lru_cache(maxsize=None)
def worker_mlp() -> nn.Sequential:
    """One MLP per process, for client calls that load each message's weights into it."""
    return mlp()


@functools.lru_cache(maxsize=None)
def fmnist_test() -> tuple[np.ndarray, np.ndarray]:
    """Test images (10000, 784) float32, normalized as the training images, and labels."""
    x = (_idx("t10k-images-idx3-ubyte").reshape(-1, 784) / 255.0 - 0.2860) / 0.3530
    return x.astype(np.float32), _idx("t10k-labels-idx1-ubyte").astype(np.int64)


def final_metrics(model: nn.Module) -> dict[str, float]:
    """What fedrun computes at round T (eval_every=0), the same in every system: the train loss
    f(x) (mean cross-entropy over all 60,000 training samples: the iid clients are of equal
    size), the stationarity ||grad f(x)||^2 (h = 0) over them, and the test loss and accuracy
    over the 10,000 test samples."""
    x, y = fmnist()
    loss = nn.functional.cross_entropy(model(torch.from_numpy(x)), torch.from_numpy(y))
    grads = torch.autograd.grad(loss, list(model.parameters()))
    with torch.no_grad():
        tx, ty = (torch.from_numpy(a) for a in fmnist_test())
        logits = model(tx)
        return {
            "train_loss": float(loss),
            "stationarity": float(sum(g.square().sum() for g in grads)),
            "test_loss": float(nn.functional.cross_entropy(logits, ty)),
            "test_acc": float((logits.argmax(1) == ty).float().mean()),
        }


@contextmanager
def timed_call():
    """Times one client call (Flower: the ClientApp's ``train``; pfl: ``simulate_one_user``) and
    appends its seconds to the file ``PEER_CALL_LOG`` names, one line per call, in the process
    that ran it (a Ray worker for Flower)."""
    start = time.perf_counter()
    try:
        yield
    finally:
        path = os.environ.get("PEER_CALL_LOG")
        if path:
            with open(path, "a") as f:
                f.write(f"{time.perf_counter() - start:.6f}\n")
