"""The memory this process may use: the machine's physical memory, or less where its control
group sets a limit (a container, a SLURM job, systemd's ``MemoryMax``) -- a run sized against the
machine's memory there is killed by the kernel with no line. Read from cgroup v2
(``memory.max`` of the process's group and every group above it) and v1
(``memory.limit_in_bytes`` of the memory controller's group)."""

from __future__ import annotations

import os
from pathlib import Path

PROC = Path("/proc/self/cgroup")
ROOT = Path("/sys/fs/cgroup")


def physical() -> int:
    """The machine's physical memory in bytes (0 where it cannot be told)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return 0


def limit(proc: Path | None = None, root: Path | None = None) -> int | None:
    """The smallest memory limit of this process's control groups in bytes, None without one
    (no cgroup, ``max``, or v1's "unlimited", a number beyond any machine); ``proc`` and
    ``root`` default to :data:`PROC` and :data:`ROOT`."""
    proc, root = proc or PROC, root or ROOT
    try:
        lines = proc.read_text().splitlines()
    except OSError:
        return None
    found: list[int] = []
    for line in lines:
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        group = path.strip().lstrip("/")
        if controllers == "":  # v2: the group and every group above it
            here = root / group
            for folder in (here, *here.parents):
                if not folder.is_relative_to(root):
                    break
                found += _number(folder / "memory.max")
        elif "memory" in controllers.split(","):  # v1: the group, or the namespace's root
            base = root / "memory"
            found += _number(base / group / "memory.limit_in_bytes") or _number(
                base / "memory.limit_in_bytes"
            )
    return min((v for v in found if v < 2**62), default=None)


def _number(path: Path) -> list[int]:
    try:
        text = path.read_text().strip()
    except OSError:
        return []
    return [int(text)] if text.isdigit() else []


def available() -> tuple[int, str]:
    """The memory this process may use and what sets it: ``(bytes, "")`` for the machine's
    physical memory, ``(bytes, "its cgroup's memory limit")`` where that is less."""
    machine, group = physical(), limit()
    if group is not None and (not machine or group < machine):
        return group, "its cgroup's memory limit"
    return machine, ""
