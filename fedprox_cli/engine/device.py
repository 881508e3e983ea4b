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

import torch

from ..common.errors import require


def resolve_device(name: str) -> torch.device:
    """The device ``name`` (auto: CUDA where present); CUDA that is not here is refused."""
    require(name in ("auto", "cpu", "cuda") or str(name).startswith("cuda:"),
            f"device must be auto, cpu or cuda, got {name!r}")
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    require(name == "cpu" or torch.cuda.is_available(),
            f"device={name} requested but CUDA is not available here (use device=cpu or auto)")
    return torch.device(name)


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
    return " ".join(x for x in (info.get("model name", ""), f"family {info.get('cpu family', '?')}",
                                f"model {info.get('model', '?')}", vec) if x)


def hardware(device: torch.device) -> dict:
    """What a run ran on (summary.json's ``hardware``): the device's name (GPU, or CPU model as
    :func:`device_name` gives it), its memory in GiB (the GPU's, or the machine's RAM), and the
    torch, CUDA runtime and NVIDIA driver versions (the last two null on a CPU run)."""
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return {"name": props.name, "memory_gib": round(props.total_memory / 2**30, 1),
                "torch": torch.__version__, "cuda": torch.version.cuda, "driver": _nvidia_driver()}
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") if hasattr(os, "sysconf") else 0
    return {"name": device_name(device), "memory_gib": round(memory / 2**30, 1) or None,
            "torch": torch.__version__, "cuda": None, "driver": None}


def _nvidia_driver() -> str | None:
    """The NVIDIA driver's version (nvidia-smi), or None where it cannot be asked."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
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
