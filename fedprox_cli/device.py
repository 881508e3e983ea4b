"""What keeps a run's numbers the same on every device, and the float32 precision knob.

Random streams: every random draw of a run (mini-batch ids, participating clients, compressor
draws, SCAFFNEW's coin) comes from a CPU ``torch.Generator`` seeded by :func:`stream_seed` of an
integer key such as (seed, round, step), and what it draws moves to the run's device afterwards
with :func:`to_device`. CUDA generators produce other streams than CPU ones by design, so drawing
on the CPU is what makes a run take the same mini-batches on CPU and CUDA and lets a run stopped
on one kind of machine be resumed on the other.

``matmul_precision`` (:func:`set_matmul_precision`): ``highest`` (default) computes float32
matrix products and convolutions in full float32 on every device; ``high`` lets GPUs use TF32
(and cuDNN's TF32 convolutions), ``medium`` bf16 products. It sets process-wide torch flags.
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


MATMUL_PRECISIONS = ("highest", "high", "medium")


def set_matmul_precision(precision: str) -> None:
    """``torch.set_float32_matmul_precision(precision)``, with cuDNN's TF32 convolutions
    allowed only below ``highest`` (PyTorch allows them by default, which would make
    ``highest`` inexact for convolutions on GPUs)."""
    torch.set_float32_matmul_precision(precision)
    torch.backends.cudnn.allow_tf32 = precision != "highest"
