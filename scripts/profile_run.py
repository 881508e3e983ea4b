"""Where one fedrun process spends its wall time: ``python scripts/profile_run.py OVERRIDES...``
runs ``fedrun OVERRIDES`` in this process with timers around its phases and prints one JSON
line of seconds (wall) per phase; ``scripts/bench_peers.py`` prints it as the profile of what
bounds a goal it does not meet.

Phases (none inside another): ``import torch``; ``import fedprox_cli`` (the CLI and what it
imports before Hydra runs, the drawing process's start, made before torch loads as the command
makes it); Hydra's ``composition`` (once for a run: config/compose_once.py;
once more for the validation's reference config where an override deletes something);
``data`` (loading the dataset); ``data fingerprint`` (the digest of the loaded arrays that a
re-run compares: runs/provenance.py); ``engine choice`` (``engine=auto`` / ``compile=auto``:
measured, or read from their caches); ``evaluation`` (every metrics row, round 0's included);
``rounds`` (training, what the run's ``time_s`` counts); ``plot`` (``metrics.png``: the wait for
the drawing process, cli/drawer.py); ``file writes`` (atomic writes of the run folder's records,
the plot's file excluded); ``other`` (the rest of the process: the interpreter, Hydra's set-up,
building the model and the partition, checks).
"""

from __future__ import annotations

import functools
import importlib
import json
import sys
import time

START = time.perf_counter()
from fedprox_cli.cli import drawer  # noqa: E402

drawer.start()  # as the fedrun command starts it: before torch loads (cli/main.py)
DRAWER = time.perf_counter() - START
import torch  # noqa: E402,F401

TORCH = time.perf_counter() - START - DRAWER

PHASES = {  # phase: (module, qualified name) of the calls timed
    "composition": [("hydra._internal.config_loader_impl", "ConfigLoaderImpl.load_configuration")],
    "data": [("fedprox_cli.data", "load_config")],
    "data fingerprint": [("fedprox_cli.runs.provenance", "of_data")],
    "engine choice": [
        ("fedprox_cli.engine.choice", "choose"),
        ("fedprox_cli.engine.compile", "choose"),
    ],
    "evaluation": [("fedprox_cli.runs.training", "evaluate")],
    "rounds": [("fedprox_cli.runs.training", "Training.round")],
    "plot": [("fedprox_cli.cli.drawer", "figures")],
    "file writes": [("fedprox_cli.common.files", "_write_replace")],
}


def main() -> None:
    seconds = {"import torch": TORCH}
    started = time.perf_counter()
    from fedprox_cli.cli import main as cli

    seconds["import fedprox_cli"] = DRAWER + time.perf_counter() - started
    active: list[str] = []  # the phase being timed (a nested call counts for the outer one)

    def timer(phase: str, fn):
        @functools.wraps(fn)
        def timed(*args, **kwargs):
            if active:
                return fn(*args, **kwargs)
            active.append(phase)
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                seconds[phase] = seconds.get(phase, 0.0) + time.perf_counter() - t
                active.pop()

        return timed

    for phase, calls in PHASES.items():
        for module, name in calls:
            owner = importlib.import_module(module)
            *path, attr = name.split(".")
            for part in path:
                owner = getattr(owner, part)
            setattr(owner, attr, timer(phase, getattr(owner, attr)))
    try:
        cli.main()  # as the fedrun command (its drawing process too), overrides in sys.argv
    except SystemExit as e:
        code = e.code
    total = time.perf_counter() - START
    seconds["other"] = total - sum(seconds.values())
    print(json.dumps({"exit": code, "total": total, "seconds": seconds}), file=sys.__stdout__)


if __name__ == "__main__":
    main()
