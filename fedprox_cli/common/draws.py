"""Random streams that keep a run's numbers the same on every device.

Every random draw of a run (mini-batch ids, participating clients, compressor draws, SCAFFNEW's
coin) comes from a CPU ``torch.Generator`` seeded by :func:`stream_seed` of an integer key such
as (seed, round, step), and what it draws moves to the run's device afterwards with
:func:`to_device`. CUDA generators produce other streams than CPU ones by design, so drawing on
the CPU is what makes a run take the same mini-batches on CPU and CUDA and lets a run stopped on
one kind of machine be resumed on the other.
"""

from __future__ import annotations

import hashlib

import torch


def stream_seed(*key: int) -> int:
    """A 63-bit seed from an integer key, e.g. (seed, round, step)."""
    h = hashlib.blake2b(",".join(map(str, key)).encode(), digest_size=8).digest()
    return int.from_bytes(h, "little") & ((1 << 63) - 1)


def generator(*key: int) -> torch.Generator:
    """A CPU generator seeded by ``stream_seed(*key)``."""
    return torch.Generator().manual_seed(stream_seed(*key))


def to_device(t: torch.Tensor, device: torch.device | str) -> torch.Tensor:
    """``t`` (on the CPU) on ``device``. To CUDA it goes through pinned memory with a
    non-blocking copy, so the host does not wait for the device (the caching host allocator
    keeps the pinned block alive until the copy is done)."""
    device = torch.device(device)
    if device.type == "cpu":
        return t
    if device.type == "cuda":
        return t.pin_memory().to(device, non_blocking=True)
    return t.to(device)
