"""A joblib sweep stops when told, at any instant (docs/robustness.md, "Stopping a sweep";
fedprox_cli.cluster.pool): Ctrl-C to the terminal's process group while the pool's workers
start, while jobs train, during a compile trial, or SIGTERM to the launching process alone --
fedrun exits within seconds with its own lines and no traceback, every job folder that holds a
file records how its job ended (``interrupted``: never ``running``, never nothing), and no
worker is left."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import child_env, job_folders, processes_of_session

from fedprox_cli.common.run_files import read_summary

pytest.importorskip("hydra_plugins.hydra_joblib_launcher", reason="the [cluster] extra")

ENV = child_env(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
JOBLIB = ["-m", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]
LONG = ["dataset=digits", "model=linear", "n=4", "K=2", "B=16", "T=100000", "eval_every=5"]
STOPPED_WITHIN_S = 20  # the 10 s, with room for a loaded test machine


class Sweep:
    """``fedrun -m`` in a session of its own (its workers in its process group, as in a
    terminal), its output (stdout and stderr, Hydra's lines on stdout) read as it comes."""

    def __init__(self, tmp_path: Path, *args: str, env: dict[str, str] = ENV):
        tmp_path.mkdir(exist_ok=True)
        self.folder = tmp_path / "sweep"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "fedprox_cli", *JOBLIB, *args, f"hydra.sweep.dir={self.folder}"],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.err: list[str] = []
        self.reader = threading.Thread(
            target=lambda: self.err.extend(self.proc.stdout), daemon=True
        )
        self.reader.start()

    def wait_for(self, *phrases: str, timeout: float = 240) -> None:
        deadline = time.time() + timeout
        while not all(any(p in line for line in self.err) for p in phrases):
            assert time.time() < deadline and self.proc.poll() is None, "".join(self.err)
            time.sleep(0.1)

    def stop(self, sig: int, group: bool = True) -> tuple[float, str]:
        """Send ``sig`` (to the process group, or the launching process alone); the seconds
        until fedrun exited, and its output."""
        (os.killpg if group else os.kill)(self.proc.pid, sig)
        start = time.time()
        self.proc.wait(timeout=120)
        took = time.time() - start
        self.reader.join(10)
        return took, "".join(self.err)


def _stopped(sweep: Sweep, sig: int, group: bool = True) -> str:
    """Stop ``sweep`` and check what every stop must give; its output."""
    took, err = sweep.stop(sig, group)
    assert took < STOPPED_WITHIN_S, (took, err)
    assert sweep.proc.returncode == 130, err
    assert "Traceback" not in err and "Warning" not in err, err
    assert "sweep: 0 of 2 jobs finished" in err, err
    for job in job_folders(sweep.folder):
        if job.is_dir() and any(job.iterdir()):  # Hydra made it: a job began there
            s = read_summary(job)
            assert s["status"] == "interrupted", (job, err)
            # the user's signal, not the one fedrun ends its workers with
            assert s["error"].startswith(f"stopped by {signal.Signals(sig).name}"), (s, err)
    deadline = time.time() + 30
    while processes_of_session(sweep.proc.pid) and time.time() < deadline:
        time.sleep(0.2)
    assert not processes_of_session(sweep.proc.pid)
    return err


def test_ctrl_c_while_the_workers_start(tmp_path):
    sweep = Sweep(tmp_path, *LONG, "seed=0,1")
    sweep.wait_for("Launching jobs")
    time.sleep(1)  # the workers import fedprox_cli and torch (seconds)
    _stopped(sweep, signal.SIGINT)


def test_ctrl_c_while_jobs_train_and_sigterm_to_the_launcher_alone(tmp_path):
    for sig, group in ((signal.SIGINT, True), (signal.SIGTERM, False)):
        sweep = Sweep(tmp_path / sig.name, *LONG, "seed=0,1")
        sweep.wait_for("job 0: round 5/", "job 1: round 5/")
        err = _stopped(sweep, sig, group)
        assert err.count("summary: interrupted") == 2, err


@pytest.mark.compiles
def test_ctrl_c_during_a_compile_trial_which_the_jobs_of_one_shape_share(tmp_path):
    """compile=auto's trial says so before it starts; two jobs of one model and shapes (seeds)
    trial once: the second waits for the first's record. Each job records its stop although the
    launcher's own signal follows the user's at once (signals.stopping; in-process:
    test_lifecycle_faults::test_a_signal_while_a_run_stopped_at_its_start_...)."""
    # a cache of its own: the session's may hold the compile record of this shape already
    fresh = {**ENV, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    sweep = Sweep(tmp_path, *LONG, "T=10000000", "seed=0,1", env=fresh)
    sweep.wait_for("compile: trying compiled rounds, about", "waiting for another run's trial")
    err = _stopped(sweep, signal.SIGINT)
    assert err.count("trying compiled rounds") == 1, err
    assert err.count("interrupted before the run started") == 2, err


def _a_worker_whose_job_takes_two_sigterms(ready) -> None:
    """A pool worker as fedrun makes one (SIGINT blocked: it reads idle) whose job, just
    handed to it, takes SIGTERMs for its stop while it records its end (0.3 s), then is idle
    (SIGTERM's default action back) and waits for its next job."""
    import signal
    import time

    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT])
    signal.signal(signal.SIGTERM, lambda *_: None)
    ready.set()
    time.sleep(0.3)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    time.sleep(60)


def test_a_worker_idle_after_its_stop_is_ended_at_once_not_after_the_grace():
    """A worker handed a job as the sweep stopped took the launcher's first SIGTERMs in its
    job's start and then went idle: it gets SIGTERM again as soon as it is seen idle, and ends
    by it, not by SIGKILL after the grace period (a joblib sweep's exit 8 s late)."""
    import multiprocessing
    import signal
    import time

    from fedprox_cli.cluster import pool

    ctx = multiprocessing.get_context("fork")
    ready = ctx.Event()
    worker = ctx.Process(target=_a_worker_whose_job_takes_two_sigterms, args=(ready,))
    worker.start()
    assert ready.wait(30)
    started = time.monotonic()
    pool.end_workers([worker], grace_s=5.0)
    took = time.monotonic() - started
    assert worker.exitcode == -signal.SIGTERM and took < 2.0, (worker.exitcode, took)
