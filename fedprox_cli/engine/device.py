"""The run's device, the machine it reports, and the float32 precision knob (the random
streams that keep a run's numbers the same on every device: :mod:`fedprox_cli.common.draws`).

``matmul_precision`` (:func:`set_matmul_precision`): ``highest`` (default) computes float32
matrix products and convolutions in full float32 on every device; ``high`` lets GPUs use TF32
(and cuDNN's TF32 convolutions), ``medium`` bf16 products. It sets process-wide torch flags.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import torch

from ..common.errors import require

PLACED_BY = "FEDRUN_PLACED_BY"  # set to the launcher's name in a job a scheduler placed (Ray)


def visible_gpus() -> int:
    """How many CUDA devices this process sees (``CUDA_VISIBLE_DEVICES`` applied); 0 without
    CUDA."""
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def resolve_device(name: str, job: int | None = None) -> torch.device:
    """The device of a run with ``device=name`` that is job number ``job`` of a sweep (None: a
    single run). The rule: ``auto`` and ``cuda`` take visible GPU ``job mod G`` (G visible
    GPUs; job 0 for a single run), so parallel jobs (joblib) spread over the GPUs in turn; a
    job Ray placed sees only the GPU Ray gave it, so G = 1 and it takes that one. ``auto``
    without CUDA is the CPU; ``cuda:K`` (the K-th visible GPU) and ``cpu`` are taken as given;
    CUDA or a GPU index that is not here is refused."""
    require(
        name in ("auto", "cpu", "cuda") or str(name).startswith("cuda:"),
        f"device must be auto, cpu or cuda, got {name!r}",
    )
    if name == "cpu":
        return torch.device("cpu")
    count = visible_gpus()
    if name == "auto" and count == 0:
        return torch.device("cpu")
    require(
        count > 0,
        f"device={name} requested but CUDA is not available here (use device=cpu or auto)",
    )
    if name in ("auto", "cuda"):
        return torch.device("cuda", (job or 0) % count)
    index = str(name)[len("cuda:") :]
    require(index.isdigit(), f"device must be auto, cpu, cuda or cuda:K (K a number), got {name!r}")
    require(
        int(index) < count,
        f"device={name} requested but this process sees {count} GPU"
        f"{'s' if count != 1 else ''} (cuda:0..cuda:{count - 1}; CUDA_VISIBLE_DEVICES="
        f"{os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')})",
    )
    return torch.device("cuda", int(index))


def placement(name: str, job: int | None = None) -> str:
    """Where :func:`resolve_device` puts job ``job`` with ``device=name``, and why (a dry run's
    column)."""
    if name == "cpu":
        return "device=cpu as given"
    count = visible_gpus()
    if count == 0:
        return "no CUDA here: cpu" if name == "auto" else f"device={name}: no CUDA here"
    if name in ("auto", "cuda"):
        return (
            f"device={name}, job {job or 0} mod {count} visible "
            f"GPU{'s' if count != 1 else ''}: cuda:{(job or 0) % count}"
        )
    return f"device={name} as given"


def device_name(device: torch.device) -> str:
    """The GPU's name, or the CPU's model name with its family/model numbers and vector width
    (one name such as "AMD EPYC" covers several generations)."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    info: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            k, _, v = line.partition(":")
            info.setdefault(k.strip(), v.strip())
    except OSError:
        import platform

        return platform.processor() or platform.machine()
    flags = info.get("flags", "").split()
    vec = "avx512" if "avx512f" in flags else "avx2" if "avx2" in flags else ""
    return " ".join(
        x
        for x in (
            info.get("model name", ""),
            f"family {info.get('cpu family', '?')}",
            f"model {info.get('model', '?')}",
            vec,
        )
        if x
    )


def hardware(device: torch.device) -> dict[str, Any]:
    """What a run ran on (summary.json's ``hardware``): the device's name (GPU, or CPU model as
    :func:`device_name` gives it), its memory in GiB (the GPU's, or the machine's RAM), the
    torch, CUDA runtime and NVIDIA driver versions (the last two null on a CPU run), and where
    it was placed (:func:`gpu_record`)."""
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return {
            "name": props.name,
            "memory_gib": round(props.total_memory / 2**30, 1),
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "driver": _nvidia_driver(),
            **gpu_record(device, props.name),
        }
    memory = (
        os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") if hasattr(os, "sysconf") else 0
    )
    return {
        "name": device_name(device),
        "memory_gib": round(memory / 2**30, 1) or None,
        "torch": torch.__version__,
        "cuda": None,
        "driver": None,
        **gpu_record(device),
    }


def gpu_record(device: torch.device, name: str | None = None) -> dict[str, Any]:
    """The GPU a run ran on: ``gpu`` is ``{"index": K, "name": ...}`` (K as this process numbers
    the GPUs it sees, i.e. ``cuda:K``) or ``"cpu"``; ``cuda_visible_devices`` is the GPUs this
    process was given (``CUDA_VISIBLE_DEVICES``, null when unset: all of them) and
    ``placed_by`` who gave them (``ray``, or null: fedrun's own rule, :func:`resolve_device`).
    A run given GPUs that ran on the CPU says so in ``note`` (Ray told of GPUs that are not
    there, or ``device=cpu``)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    out: dict[str, Any] = {
        "gpu": {"index": device.index or 0, "name": name} if device.type == "cuda" else "cpu",
        "cuda_visible_devices": visible,
        "placed_by": os.environ.get(PLACED_BY) or None,
    }
    if device.type != "cuda" and visible:
        why = "device=cpu" if visible_gpus() else "CUDA is not available here"
        out["note"] = (
            f"given GPU {visible} "
            f"(CUDA_VISIBLE_DEVICES{' by ' + out['placed_by'] if out['placed_by'] else ''})"
            f" but ran on the CPU: {why}"
        )
    return out


def _nvidia_driver() -> str | None:
    """The NVIDIA driver's version (nvidia-smi), or None where it cannot be asked."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    driver = out.stdout.split("\n")[0].strip() if out.returncode == 0 else ""
    return driver or None


MATMUL_PRECISIONS = ("highest", "high", "medium")


def set_matmul_precision(precision: str) -> None:
    """``torch.set_float32_matmul_precision(precision)``, with cuDNN's TF32 convolutions
    allowed only below ``highest`` (PyTorch allows them by default, which would make
    ``highest`` inexact for convolutions on GPUs)."""
    torch.set_float32_matmul_precision(precision)
    torch.backends.cudnn.allow_tf32 = precision != "highest"
