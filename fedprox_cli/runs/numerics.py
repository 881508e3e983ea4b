"""What a run's numbers depend on beyond its config, recorded with the run (summary.json's
``numerics`` and each checkpoint) so that a resume gives the numbers of a run never stopped:
the engine chosen (``engine=auto`` may choose another one under other threads or a stale
cache) and whether its call is compiled (``compile=auto``: :mod:`engine.compile`), torch's
intra-op thread count (a reduction split over other threads adds in another order), the
device's name, the dtype and the torch version.

A resume (:func:`resume_with`, :func:`compiled_on_resume`) uses the recorded engine, compile
choice and thread count; what it cannot make equal (another device, another torch) is said in
one line, with what the run does: it goes on, its later rows computed there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from ..common import thread_room
from ..common.console import say
from ..common.errors import UserError
from ..config.schema import RunConfig
from ..engine.device import device_name


def of_run(engine: str, cfg: RunConfig, compiled: bool = False) -> dict[str, Any]:
    """The record of a run computing with ``engine`` (its call ``compiled`` or not) under
    ``cfg``, in this process."""
    return {
        "engine": engine,
        "compiled": compiled,
        "threads": torch.get_num_threads(),
        "device": device_name(cfg.torch_device),
        "dtype": str(cfg.torch_dtype).removeprefix("torch."),
        "torch": str(torch.__version__),
    }


def resume_with(recorded: dict[str, Any] | None, cfg: RunConfig, out: Path) -> str | None:
    """Before a resume of the run in ``out`` is built: torch's thread count set to the
    ``recorded`` one (:func:`of_run`, from the checkpoint), saying so when it differs; the
    engine to build with (the recorded one, for ``engine=auto``; None: as configured); one line
    for each dependency that cannot be made equal."""
    if not isinstance(recorded, dict):
        return None
    threads = recorded.get("threads")
    room = (
        thread_room.short_of(threads - 1)
        if isinstance(threads, int) and threads > torch.get_num_threads()
        else None
    )
    if room is not None:
        raise UserError(
            f"the run in {out} started with {threads} threads and resumes with as many, so that "
            f"its numbers are those of a run never stopped; the limit on this user's processes "
            f"and threads does not leave room for them ({room.said()}): raise it to resume "
            f"(resume=false starts it over)"
        )
    if isinstance(threads, int) and threads > 0 and threads != torch.get_num_threads():
        say(
            f"resuming {out} with {threads} thread{'s' if threads > 1 else ''}, as it started "
            f"(this process "
            f"has {torch.get_num_threads()}), so that its numbers are those of a run never stopped",
            "note",
        )
        torch.set_num_threads(threads)
    now = of_run(recorded.get("engine", ""), cfg)
    for key, what in (("device", "device"), ("torch", "torch version")):
        was = recorded.get(key)
        if isinstance(was, str) and was != now[key]:
            say(
                f"the run in {out} started on {what} {was!r}; this resume runs on {now[key]!r}, "
                f"so its later "
                "rows may differ from a run never stopped in the last digits; it goes on here "
                f"(resume=false "
                f"starts it over here)",
                "note",
            )
    engine = recorded.get("engine")
    return engine if cfg.engine == "auto" and engine in ("loop", "vmap") else None


def compiled_on_resume(recorded: dict[str, Any] | None, cfg: RunConfig) -> bool | None:
    """Whether a resume of a ``compile=auto`` run compiles: as it did when it started
    (``recorded``, from the checkpoint); None where the config decides (another setting, or a
    record without the choice)."""
    was = recorded.get("compiled") if isinstance(recorded, dict) else None
    return was if cfg.compile == "auto" and isinstance(was, bool) else None
