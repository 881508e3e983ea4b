"""What a SLURM launcher config (``hydra.launcher``) must leave room for.

slurmctld looks for jobs near their time limit every 30 s and sends ``--signal``'s warning when
``now + signal_delay_s + 30 s`` reaches a job's end (sbatch(1): it "may be sent up to 60 seconds
earlier than specified"). So ``timeout_min=1 signal_delay_s=30`` can signal a job in its first
seconds, while Python is still starting: SIGUSR2's default action kills it before any handler
exists, and it is not requeued. Checked with the sweep's other jobs, before anything is written.
"""

from __future__ import annotations

import math
from typing import Any

from ..common.errors import UserError

EARLY_S = 60  # how much earlier than signal_delay_s SLURM may signal
STARTUP_S = 30  # a job's start before its handlers exist (Python, torch, the data), at most


def check_time_limit(launcher: Any) -> None:
    """Refuse a SLURM launcher config (``hydra.launcher``) whose warning signal may come before
    a job can catch it: ``timeout_min * 60`` must exceed ``signal_delay_s`` by
    :data:`EARLY_S` + :data:`STARTUP_S` (above)."""
    timeout, delay = launcher.get("timeout_min"), launcher.get("signal_delay_s")
    if timeout is None or delay is None:  # not SLURM's (the local launcher has no warning)
        return
    need, room = delay + EARLY_S + STARTUP_S, timeout * 60 - EARLY_S - STARTUP_S
    if timeout * 60 < need:
        raise UserError(
            f"hydra.launcher.timeout_min={timeout} with signal_delay_s={delay}: SLURM may "
            f"send its warning up to {EARLY_S} s before signal_delay_s, while a job is "
            f"still starting, which kills the job without a requeue; ask for "
            f"timeout_min >= {math.ceil(need / 60)}"
            + (f" or signal_delay_s <= {room}" if room > 0 else "")
        )
