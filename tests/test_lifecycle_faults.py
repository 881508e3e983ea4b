"""fedrun's own faults around a run's life: the leftovers of a killed fedrun (temp files of its
writes, a start cut short before its config), a full disk (ENOSPC injected at the one gate of
file writes, ``common/files.py``), every stop signal, and sweeps sharing folders (``held``
jobs, job records per launch). In-process where no real signal, lock or exit code is needed."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import child_env, fedrun, fedrun_process, job_folders

from fedprox_cli import data
from fedprox_cli.analysis import jobrecords
from fedprox_cli.analysis.run_figures import draw
from fedprox_cli.cli import threads_left
from fedprox_cli.common import files, signals
from fedprox_cli.common.run_files import read_summary
from fedprox_cli.config.compose import compose
from fedprox_cli.config.validate import typed
from fedprox_cli.runs import provenance, runner, training
from fedprox_cli.runs.lock import RunLock, is_held

TINY = ["dataset=digits", "model=linear", "T=3", "K=2", "n=4"]
ENV = child_env(OMP_NUM_THREADS="1")

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def run(out: Path, *overrides: str) -> int:
    return runner.run(compose([*TINY, *overrides]), out, progress=False, plot=draw)


def temps(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*.tmp*"))


def numbers(out: Path) -> pd.DataFrame:
    return pd.read_csv(out / "metrics.csv").drop(columns="time_s")


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("reference") / "run"
    assert run(out) == 0
    return out


# ---- fedrun's own leftovers --------------------------------------------------------------


def test_a_first_summary_write_killed_leaves_a_folder_fedrun_takes_back(
    tmp_path, capsys, reference
):
    out = tmp_path / "run"
    (out / ".hydra").mkdir(parents=True)
    (out / ".summary.json.k1ll3d_x.tmp").write_text('{"status": "runn')  # cut by kill -9
    (out / ".hydra" / ".config.yaml.a1b2c3d4.tmp").write_text("seed: ")
    (out / ".fedrun.lock").write_text("pid 1 on host gone\n")  # a dead holder's lock file
    assert run(out) == 0
    assert "deleted 2 temp files" in capsys.readouterr().err and temps(out) == []
    pd.testing.assert_frame_equal(numbers(out), numbers(reference))


def test_temp_files_of_killed_writes_go_from_a_finished_run(tmp_path, capsys):
    out = tmp_path / "run"
    assert run(out, "checkpoint_every=1") == 0
    for name in (
        ".checkpoint.pt.zz99yy88.tmp",
        ".metrics.csv.q1w2e3r4.tmp",
        ".metrics.png.abcdefgh.tmp.png",
    ):
        (out / name).write_bytes(b"half")
    before = {
        p.name: p.read_bytes() for p in out.iterdir() if p.is_file() and p.name != "fedrun.log"
    }
    assert run(out, "checkpoint_every=1") == 0  # finished already: nothing to do but the clearing
    assert "deleted 3 temp files" in capsys.readouterr().err and temps(out) == []
    assert {
        p.name: p.read_bytes() for p in out.iterdir() if p.is_file() and p.name != "fedrun.log"
    } == {k: v for k, v in before.items() if ".tmp" not in k}


def test_a_temp_name_of_a_file_fedrun_never_writes_is_still_foreign(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / ".notes.txt.abcdefgh.tmp").write_text("mine")
    assert run(out) == 2
    assert "not a fedrun run (.notes.txt.abcdefgh.tmp)" in capsys.readouterr().err
    assert [p.name for p in out.iterdir()] == [".notes.txt.abcdefgh.tmp"]


@pytest.mark.parametrize("status", ["running", "interrupted", "error"])
def test_a_start_cut_before_its_config_is_started_over(tmp_path, capsys, status, reference):
    out = tmp_path / "run"
    assert run(out) == 0
    s = read_summary(out)
    for name in ("config.yaml", "metrics.csv", "partition.npz", "metrics.png"):
        (out / name).unlink()
    (out / "summary.json").write_text(json.dumps({**s, "status": status}))
    assert run(out) == 0
    if status != "error":  # an error's folder holds no prior run anyway
        assert "ended before it recorded its config; starting it over" in capsys.readouterr().err
    pd.testing.assert_frame_equal(numbers(out), numbers(reference))


def test_a_finished_run_without_its_config_is_still_refused(tmp_path, capsys):
    out = tmp_path / "run"
    assert run(out) == 0
    (out / "config.yaml").unlink()
    assert run(out) == 2 and "config.yaml cannot be read" in capsys.readouterr().err


# ---- a full disk -------------------------------------------------------------------------


def fill_disk_at(monkeypatch, name: str) -> dict:
    """From the first write of a file called ``name`` on, every write through the gate fails
    as on a full disk."""
    real, state = files._write_replace, {"full": False}

    def write_replace(path, write, fsync, suffix):
        state["full"] = state["full"] or path.name == name
        if state["full"]:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(path, write, fsync, suffix)

    monkeypatch.setattr(files, "_write_replace", write_replace)
    return state


@pytest.mark.parametrize(
    "name, status",
    [
        ("checkpoint.pt", "error"),  # during training
        ("metrics.csv", "error"),  # the first evaluation's row
        ("config.yaml", "error"),  # before the config was recorded
        ("metrics.png", "error"),  # after the last round
    ],
)
def test_a_full_disk_ends_the_run_with_a_truthful_status(
    tmp_path, monkeypatch, capsys, reference, name, status
):
    out = tmp_path / "run"
    state = fill_disk_at(monkeypatch, name)
    assert run(out, "checkpoint_every=1") == 2
    err = capsys.readouterr().err
    assert f"fedrun: error: No space left on device: {out / name}" in err.splitlines()
    s = read_summary(out)  # written in place when no temp file fits
    assert s["status"] == status and s["error"] == f"No space left on device: {out / name}"
    assert temps(out) == []
    state["full"] = False
    monkeypatch.undo()
    assert run(out, "checkpoint_every=1") == 0  # space freed: the same command goes on
    pd.testing.assert_frame_equal(numbers(out), numbers(reference))


def test_a_lock_whose_holder_cannot_be_written_still_holds(tmp_path, monkeypatch):
    def full(fd, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    with monkeypatch.context() as m:
        m.setattr(os, "write", full)  # no byte fits: the holder's name is not written
        lock = RunLock(tmp_path).__enter__()
    try:
        assert is_held(tmp_path)
    finally:
        lock.__exit__()
    assert not is_held(tmp_path)


FULL_DRIVER = """
import errno, sys
from fedprox_cli.cli import main as cli
from fedprox_cli.common import files, signals
real, trigger, state = files._write_replace, sys.argv[1], {"full": False}
def write_replace(path, write, fsync, suffix):
    state["full"] = state["full"] or trigger in str(path)
    if state["full"]:
        raise OSError(errno.ENOSPC, "No space left on device", str(path))
    return real(path, write, fsync, suffix)
files._write_replace = write_replace
sys.argv = ["fedrun", *sys.argv[2:]]
cli.main()
"""


def test_a_full_disk_in_a_sweep_reports_each_job_truthfully(tmp_path):
    """The job that hit it and the ones after it: ``error`` with the path, not ``dead`` or
    ``not started``, although their records could not be written either."""
    p = subprocess.run(
        [
            sys.executable,
            "-c",
            FULL_DRIVER,
            "seed=1",
            "-m",
            *TINY,
            "seed=0,1,2",
            f"hydra.sweep.dir={tmp_path / 's'}",
        ],
        cwd=tmp_path,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 2, p.stderr
    assert "sweep: 1 of 3 jobs finished" in p.stdout
    lines = [line for line in p.stderr.splitlines() if line.startswith("  ")]
    assert len(lines) == 2 and all(
        ": error (No space left on device: " in line for line in lines
    ), lines
    assert "Traceback" not in p.stderr


# ---- signals -----------------------------------------------------------------------------

SIGNAL_DRIVER = """
import os, sys
from fedprox_cli.cli import main as cli
from fedprox_cli.algorithms.fedavg import FedAvg
import signal
stop_t, sig, fedavg_round = int(sys.argv[1]), int(sys.argv[2]), FedAvg.round
signal.signal(sig, signal.SIG_DFL)  # its default action, whatever the shell that ran the tests ignores
def round(self, s, env, t):
    if t == stop_t:
        os.kill(os.getpid(), sig)
    return fedavg_round(self, s, env, t)
FedAvg.round = round
sys.argv = ["fedrun", *sys.argv[3:]]
cli.main()
"""
LONG = [
    "dataset=digits",
    "model=linear",
    "K=2",
    "n=4",
    "T=6",
    "algorithm=fedavg",
    "regularizer=none",
    "checkpoint_every=100",
]


@pytest.mark.parametrize(
    "sig", [signal.SIGHUP, signal.SIGUSR1, signal.SIGQUIT, signal.SIGRTMIN + 1]
)
def test_every_stop_signal_ends_a_run_like_sigterm(tmp_path, sig):
    out, name = tmp_path / "run", signals.name(sig)
    p = subprocess.run(
        [sys.executable, "-c", SIGNAL_DRIVER, "2", str(int(sig)), *LONG, f"hydra.run.dir={out}"],
        cwd=tmp_path,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 130, p.stderr
    assert (
        f"fedrun: interrupted after round 3; re-run the same command to resume (stopped by {name})"
        in p.stderr.splitlines()
    )
    s = read_summary(out)
    assert (s["status"], s["round"], s["error"]) == ("interrupted", 3, f"stopped by {name}")
    assert (out / "checkpoint.pt").exists()  # of round 3, although checkpoint_every=100
    p = fedrun(*LONG, f"hydra.run.dir={out}", cwd=tmp_path, env=ENV)  # the resume: in this process
    assert (
        p.returncode == 0 and "resuming" in p.stderr and read_summary(out)["status"] == "finished"
    )


def test_a_signal_someone_else_handles_or_ignores_is_left_to_them():
    """``nohup`` ignores SIGHUP; a test runner's SIGALRM has a handler of its own."""
    mine = []
    before = {
        signal.SIGHUP: signal.signal(signal.SIGHUP, signal.SIG_IGN),
        signal.SIGALRM: signal.signal(signal.SIGALRM, lambda s, f: mine.append(s)),
    }
    try:
        with signals.StopAfterRound() as stop:
            os.kill(os.getpid(), signal.SIGHUP)
            os.kill(os.getpid(), signal.SIGALRM)
            assert not stop.requested and mine == [signal.SIGALRM]
            os.kill(os.getpid(), signal.SIGUSR1)
            assert stop.signum == signal.SIGUSR1
        assert signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL
    finally:
        for s, h in before.items():
            signal.signal(s, h)


def _a_signal_before(monkeypatch, owner, attr: str, sig: int = signal.SIGTERM) -> None:
    """``owner.attr`` gets signal ``sig`` before it does its work: a sweep's launching process
    ending its workers an instant after the user's Ctrl-C reached them (cluster/pool.py)."""
    plain = getattr(owner, attr)

    def late(*args, **kwargs):
        os.kill(os.getpid(), sig)
        return plain(*args, **kwargs)

    monkeypatch.setattr(owner, attr, late)


def _stopped_in_process(out: Path, *overrides: str) -> int | str:
    """:func:`run` with fedrun's handlers of the command (every stop signal raises or is noted,
    SIGTERM too), put back afterwards; its exit code, or "escaped" for an interrupt it let out."""
    with signals.held_by_fedrun():
        signals.stops_interrupt()
        try:
            return run(out, *overrides)
        except KeyboardInterrupt:
            return "escaped"


def test_a_signal_while_a_run_stopped_at_its_start_records_its_end_is_noted_only(
    tmp_path, monkeypatch
):
    """The compile-trial race of a joblib sweep (tests/test_sweep_stop.py): a job stopped while
    its run starts (a trial compile, or the wait for another job's) got the launcher's SIGTERM
    while it recorded the user's Ctrl-C, and ended without summary.json."""
    monkeypatch.setattr(signals, "received", [])

    def build(*args, **kwargs):  # the run's start (its engine's compile trial): Ctrl-C
        os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(runner.experiment, "build", build)
    _a_signal_before(monkeypatch, runner.ending, "end")
    out = tmp_path / "run"
    assert _stopped_in_process(out) == 130
    s = read_summary(out)
    assert (s["status"], s["error"]) == ("interrupted", "stopped by SIGINT before the run started")
    assert signals.received == [signal.SIGINT, signal.SIGTERM]


def test_a_signal_while_a_stopped_run_records_its_end_is_noted_only(tmp_path, monkeypatch):
    """A run told to stop after its round (Ctrl-C) records its end whatever signal comes while
    it does (the launcher's SIGTERM): not left saying ``running``."""
    monkeypatch.setattr(signals, "received", [])
    plain = training.Training.round

    def round(self):
        if self.t == 1:
            os.kill(os.getpid(), signal.SIGINT)
        plain(self)

    monkeypatch.setattr(training.Training, "round", round)
    _a_signal_before(monkeypatch, training.Training, "close")
    out = tmp_path / "run"
    assert _stopped_in_process(out, "T=6") == 130
    s = read_summary(out)
    assert (s["status"], s["round"], s["error"]) == ("interrupted", 2, "stopped by SIGINT")
    assert signals.received == [signal.SIGINT, signal.SIGTERM]


THREAD_DRIVER = """
import signal, sys, threading, time
from fedprox_cli.cli import main as cli
from fedprox_cli.algorithms.fedavg import FedAvg
fedavg_round = FedAvg.round
def round(self, s, env, t):
    if t == 0:  # a plugin's worker that never ends, not a daemon
        threading.Thread(target=time.sleep, args=(600,), name="plugin-worker").start()
    return fedavg_round(self, s, env, t)
FedAvg.round = round
handlers = lambda: {s: signal.getsignal(s) for s in signals.SIGNALS}
from fedprox_cli.common import signals
before = handlers()
if sys.argv[1] == "in-python":  # main(argv) from Python: fedrun's handlers are gone afterwards
    try:
        cli.main(sys.argv[2:])
    except SystemExit as e:
        print("exit", e.code, "handlers restored", handlers() == before, flush=True)
else:
    sys.argv = ["fedrun", *sys.argv[2:]]
    cli.main()
"""


def test_a_plugins_leftover_thread_does_not_hang_fedruns_exit(tmp_path):
    # engine=loop: engine=auto's probe times rounds of the algorithm, each starting one more
    # thread here, and probes or not as the session's engine cache already holds this setting
    args = [*LONG, "engine=loop", f"hydra.run.dir={tmp_path / 'r'}"]
    p = subprocess.run(
        [sys.executable, "-c", THREAD_DRIVER, "fedrun", *args],
        cwd=tmp_path,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    assert (
        "fedrun: note: 1 thread started during the command still running (plugin-worker); fedrun exits "
        "without waiting for them"
    ) in p.stderr.splitlines()
    assert read_summary(tmp_path / "r")["status"] == "finished"


def test_an_idle_pool_worker_is_not_a_leftover_thread(capfd):
    """torch.compile leaves its compile pool's workers idle: the pool's exit hook ends them,
    so fedrun neither waits for them nor names them (a plain thread it does: above)."""
    before = set(threading.enumerate())
    pool = ThreadPoolExecutor(2)
    pool.submit(int).result()
    try:
        threads_left.leave_threads(before, 0, exit_now=False)
    finally:
        pool.shutdown()
    assert "still running" not in capfd.readouterr().err


def test_fedruns_signal_handlers_live_only_while_main_runs(tmp_path):
    """After ``main()`` returns, a SIGTERM meets the process's own handler: no ``Exception
    ignored in threading ... KeyboardInterrupt`` from fedrun's."""
    p = subprocess.Popen(
        [
            sys.executable,
            "-c",
            THREAD_DRIVER,
            "in-python",
            *LONG,
            f"hydra.run.dir={tmp_path / 'r'}",
        ],
        cwd=tmp_path,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    said = [""]
    while said[-1] is not None and not said[-1].startswith("exit"):
        said.append(p.stdout.readline().strip() or None)
    assert said[-1] == "exit 0 handlers restored True", said
    p.send_signal(signal.SIGTERM)  # while the interpreter waits for the plugin's thread
    try:
        err = p.communicate(timeout=60)[1]
    finally:
        p.kill()
    assert p.returncode == -signal.SIGTERM, err
    assert "KeyboardInterrupt" not in err and "Exception ignored" not in err, err


# ---- sweeps sharing folders --------------------------------------------------------------


def test_a_job_another_process_holds_is_held_and_the_sweep_did_not_finish(tmp_path):
    s = tmp_path / "s"
    args = ["-m", *TINY, f"hydra.sweep.dir={s}"]
    p = fedrun(*args, "seed=0,1", cwd=tmp_path, env=ENV)
    assert p.returncode == 0, p.stderr
    first = {r.folder: r for r in jobrecords.records(s)}
    held = job_folders(s)[1]
    with RunLock(held):  # another process runs seed=1 now; the sweep below is a process of its own
        p = fedrun_process(*args, "seed=1,2", cwd=tmp_path, env=ENV, timeout=300)
    assert p.returncode == 2, p.stderr
    assert "sweep: 1 of 2 jobs finished" in p.stdout
    assert f"  {held.name}: held (run folder {held} is in use by pid {os.getpid()}" in p.stderr
    # each launch keeps its own records: the first sweep's record of seed=1 still says finished
    mine = [jobrecords.read(f) for f in (s / jobrecords.RECORDS).glob("*.json")]
    assert sorted((r.status for r in mine if r.folder == str(held)), key=str) == [
        "finished",
        "held",
    ]
    assert first[str(held)] in mine
    assert {r.folder: r.status for r in jobrecords.records(s)}[
        str(held)
    ] == "held"  # the latest per folder


# ---- the data a run trained on -----------------------------------------------------------


def files_of(out: Path) -> dict[str, bytes]:
    """A run folder's files but fedrun's log and lock (which a refused attempt may touch)."""
    return {
        str(p.relative_to(out)): p.read_bytes()
        for p in sorted(out.rglob("*"))
        if p.is_file() and p.name not in ("fedrun.log", ".fedrun.lock")
    }


def with_data(monkeypatch, change) -> None:
    """Runs load the data as ``change(dataset)`` makes them (the data changed on disk: other
    files, so no cache entry's ``origin`` to key a known fingerprint on)."""
    load = data.load_config

    def changed(s):
        ds = load(s)
        change(ds)
        ds.origin = ""
        return ds

    monkeypatch.setattr(data, "load_config", changed)


def shift_labels(ds, split="train"):
    y = getattr(ds, f"{split}_y")
    y[:50] = (y[:50] + 1) % ds.num_classes


def fewer(ds):
    ds.train_x, ds.train_y = ds.train_x[:1400], ds.train_y[:1400]


def padded(ds):  # 10 x 10 images: a model of another input size
    ds.train_x = torch.nn.functional.pad(ds.train_x, (1, 1, 1, 1))
    ds.test_x = torch.nn.functional.pad(ds.test_x, (1, 1, 1, 1))


def inverted(ds):
    ds.train_x, ds.test_x = -ds.train_x, -ds.test_x


KEEP = ["keep_checkpoint=true", "checkpoint_every=1"]


@pytest.mark.parametrize(
    "change, said, again",
    [
        (shift_labels, "training labels changed", ["T=5"]),  # an extension
        (lambda ds: shift_labels(ds, "test"), "test labels changed", []),  # finished already
        (inverted, "training images changed; test images changed", ["T=5"]),
        (fewer, "training images 1437x1x8x8 -> 1400x1x8x8; training labels 1437 -> 1400", []),
        (
            padded,
            "training images 1437x1x8x8 -> 1437x1x10x10; test images 360x1x8x8 -> 360x1x10x10",
            ["T=5"],
        ),
    ],
)
def test_changed_data_are_named_and_nothing_is_written(
    tmp_path, monkeypatch, capsys, change, said, again
):
    out = tmp_path / "run"
    assert run(out, *KEEP) == 0
    before = files_of(out)
    capsys.readouterr()
    with_data(monkeypatch, change)
    assert run(out, *KEEP, *again) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"fedrun: error: the data differ from those the run in {out} trained on ({said}); point "
        f"data.root at the data it used, or set resume=false to start it over"
    ]
    assert files_of(out) == before
    assert run(out, *KEEP, *again, "resume=false") == 0  # the way out it names


def test_a_resume_from_a_checkpoint_compares_its_data(tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"
    assert run(out, "T=2", *KEEP) == 0
    s = json.loads((out / "summary.json").read_text())
    s.pop("data")  # a summary without it: the checkpoint's own record decides
    (out / "summary.json").write_text(json.dumps(s))
    with_data(monkeypatch, inverted)
    assert run(out, "T=4", *KEEP) == 2
    assert "(training images changed; test images changed)" in capsys.readouterr().err


def test_a_seed_batch_checks_each_runs_data(tmp_path, monkeypatch, capsys):
    out = tmp_path / "b"
    assert run(out, "seeds=2") == 0
    before = files_of(out)
    with_data(monkeypatch, shift_labels)
    assert run(out, "seeds=2") == 2  # both finished already
    assert "seed_0 trained on (training labels changed)" in capsys.readouterr().err
    assert run(out, "seeds=3") == 2  # seed 2 would be new; the finished ones refuse
    new = read_summary(out / "seed_2")  # a new folder says why it holds no run, as for one run
    assert new["status"] == "error" and "seed_0 trained on" in new["error"]
    assert {k: v for k, v in files_of(out).items() if not k.startswith("seed_2")} == before


def test_a_data_root_without_the_data_never_falls_back_to_another_copy(tmp_path, capsys):
    debian = Path("/usr/share/datasets/fashion-mnist")
    if not debian.is_dir():
        pytest.skip("Debian's dataset-fashion-mnist is not installed")
    (tmp_path / "empty").mkdir()
    out = tmp_path / "run"
    assert run(out, "dataset=fmnist", f"data.root={tmp_path / 'empty'}") == 2
    assert capsys.readouterr().err.splitlines() == [
        f"fedrun: error: dataset fmnist is not under data.root={tmp_path / 'empty'} (a copy is in {debian}); "
        f"put it there, give data.root={debian}, or leave data.root unset to use that copy"
    ]
    assert not (out / "summary.json").exists() or read_summary(out)["status"] == "error"


def test_the_fingerprint_names_each_change_once():
    ds = data.load("digits")
    a = {**provenance.of_data(ds), **provenance.of_partition([np.arange(3), np.arange(3, 9)])}
    b = {**a, **provenance.of_partition([np.arange(4), np.arange(4, 9)])}
    assert provenance.changes(a, b) == ["partition changed"]
    shift_labels(ds)
    ds.origin = ""  # other labels: not the cache entry's arrays any more
    c = {**provenance.of_data(ds), **provenance.of_partition([np.arange(4), np.arange(4, 9)])}
    assert provenance.changes(a, c) == ["training labels changed"]  # a partition follows its labels
    assert provenance.changes({"train_x": a["train_x"]}, c) == []  # parts an older record lacks


# ---- a resume reproduces -----------------------------------------------------------------


def test_a_resume_under_other_threads_and_a_changed_cache_gives_the_same_numbers(tmp_path):
    """Interrupted with one thread, resumed under OMP_NUM_THREADS=2 with an engine cache that
    now names the other engine: the recorded engine and thread count are used again, and the
    metrics equal an uninterrupted run's in every column but time."""
    env = {**ENV, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    auto = [*LONG, "engine=auto"]
    ref, out = tmp_path / "ref", tmp_path / "run"
    assert fedrun_process(*auto, f"hydra.run.dir={ref}", cwd=tmp_path, env=env).returncode == 0
    p = subprocess.run(
        [
            sys.executable,
            "-c",
            SIGNAL_DRIVER,
            "2",
            str(int(signal.SIGTERM)),
            *auto,
            f"hydra.run.dir={out}",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 130, p.stderr
    started = read_summary(out)["numerics"]
    assert started["threads"] == 1 and started["engine"] in ("loop", "vmap")
    cache = tmp_path / "cache" / "fedprox_cli" / "engine.json"
    entries = json.loads(cache.read_text())
    for e in entries.values():
        e["engine"] = {"loop": "vmap", "vmap": "loop"}[e["engine"]]
    cache.write_text(json.dumps(entries))
    p = fedrun_process(
        *auto, f"hydra.run.dir={out}", cwd=tmp_path, env={**env, "OMP_NUM_THREADS": "2"}
    )
    assert p.returncode == 0, p.stderr
    assert (
        f"fedrun: note: resuming {out} with 1 thread, as it started (this process has 2), so that its "
        f"numbers are those of a run never stopped" in p.stderr.splitlines()
    )
    s = read_summary(out)
    assert s["engine"]["engine"] == started["engine"] and s["numerics"]["threads"] == 1
    pd.testing.assert_frame_equal(numbers(out), numbers(ref))


# ---- memory that ran out -----------------------------------------------------------------


def test_memory_running_out_in_a_plugins_round_is_the_environments_fault(tmp_path, monkeypatch):
    from fedprox_cli.algorithms.fedavg import FedAvg

    def round(self, s, env, t):
        raise MemoryError

    monkeypatch.setattr(FedAvg, "round", round)
    out = tmp_path / "r"
    p = fedrun(*LONG, f"hydra.run.dir={out}", cwd=tmp_path, env=ENV)
    assert p.returncode == 2, p.stderr
    line = (
        "out of memory: the machine's memory (or the process's limit: ulimit -v) ran out (MemoryError); "
        "reduce n, B, oracle.memory_gb or the model, or run where more memory is free"
    )
    assert [x for x in p.stderr.splitlines() if "error" in x] == [f"fedrun: error: {line}"]
    s = read_summary(out)
    assert (s["status"], s["error"], s["exit_code"]) == ("error", line, 2)
    assert not (out / "error.log").exists()


MAP_FAILS = """
import sys
FAILING = sys.argv[1]
class Unmappable:  # torch's libraries cannot be mapped (ulimit -v)
    def find_spec(self, name, path=None, target=None):
        if name == FAILING:
            raise ImportError("libtorch_cuda.so: failed to map segment from shared object")
sys.meta_path.insert(0, Unmappable())
from fedprox_cli.cli import main as cli
sys.argv = ["fedrun", *sys.argv[2:]]
cli.main()
"""


@pytest.mark.parametrize("module", ["torch", "fedprox_cli.runs.runner"])
def test_memory_running_out_at_import_is_the_environments_fault(module, tmp_path):
    """Wherever the import fails -- as Hydra composes (a search-path plugin importing torch) or
    inside the job (the run's own modules, loaded after the config is checked) -- the user
    sees fedrun's one line, never Hydra's "Error executing job" before it."""
    p = subprocess.run(
        [sys.executable, "-c", MAP_FAILS, module, *TINY, f"hydra.run.dir={tmp_path / 'r'}"],
        cwd=tmp_path,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 2, p.stderr
    assert p.stderr.splitlines() == [
        "fedrun: error: out of memory: the machine's memory (or the process's limit: ulimit -v) ran out while "
        "loading a library (ImportError: libtorch_cuda.so: failed to map segment from shared object); raise the "
        "limit or run where more memory is free"
    ]


def test_a_resume_says_what_it_cannot_make_equal(tmp_path, capsys):
    """Another torch or device than the run started with: one note each, and the run goes on."""
    from fedprox_cli.runs import numerics

    cfg = typed(compose([*TINY, "engine=auto"]))
    recorded = {**numerics.of_run("vmap", cfg), "torch": "1.0.0", "device": "a GPU"}
    assert numerics.resume_with(recorded, cfg, tmp_path) == "vmap"
    err = capsys.readouterr().err.splitlines()
    assert (
        f"fedrun: note: the run in {tmp_path} started on torch version '1.0.0'; this resume runs on "
        f"'{torch.__version__}', so its later rows may differ from a run never stopped in the last digits; "
        f"it goes on here (resume=false starts it over here)" in err
    )
    assert any("started on device 'a GPU'" in line for line in err)
    assert (
        numerics.resume_with(recorded, typed(compose([*TINY, "engine=loop"])), tmp_path) is None
    )  # as configured


def test_a_run_folder_renamed_mid_run_records_its_end_where_it_is(tmp_path, monkeypatch, capsys):
    """Renamed during round 2: the run's next write finds no folder; its end is recorded in
    the folder's new place (its lock's descriptor follows it), never left ``running``."""
    from fedprox_cli.algorithms.fedavg import FedAvg

    out, moved = tmp_path / "run", tmp_path / "renamed"
    fedavg_round = FedAvg.round

    def round(self, s, env, t):
        if t == 1:
            out.rename(moved)
        return fedavg_round(self, s, env, t)

    monkeypatch.setattr(FedAvg, "round", round)
    code = run(out, "algorithm=fedavg", "regularizer=none", "T=4", "eval_every=1")
    err = capsys.readouterr().err
    assert code == 2 and not out.exists(), err
    assert f"fedrun: note: the run folder {out} was moved to {moved} while the run ran" in err
    s = read_summary(moved)
    assert s["status"] == "error" and str(out) in s["error"], s


def test_the_signal_that_stopped_a_run_is_recorded_not_the_launchers_after_it(
    tmp_path, monkeypatch
):
    """A job stopped at its start by the user's Ctrl-C gets the launcher's SIGTERM an instant
    later, noted (only) as the stop is recorded: the record names the first, SIGINT, which
    stopped it (signals.first), not the last noted."""
    from contextlib import contextmanager

    monkeypatch.setattr(signals, "received", [signal.SIGTERM])  # a run before it: not its own
    plain = signals.stopping

    @contextmanager
    def late():  # the launcher's signal as the stop begins to be recorded
        with plain():
            os.kill(os.getpid(), signal.SIGTERM)
            yield

    monkeypatch.setattr(signals, "stopping", late)

    def build(*args, **kwargs):  # the run's start: Ctrl-C
        os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(runner.experiment, "build", build)
    out = tmp_path / "run"
    assert _stopped_in_process(out) == 130
    s = read_summary(out)
    assert (s["status"], s["error"]) == ("interrupted", "stopped by SIGINT before the run started")
    assert signals.received == [signal.SIGINT, signal.SIGTERM]


UNRAISABLE_DRIVER = """
import signal, sys, time, weakref
from fedprox_cli.common import signals

class Held:
    pass

def collected(_):  # a weakref callback: Python cannot raise out of it
    signal.raise_signal(int(sys.argv[1]))
    return None  # the handler runs here, inside the callback

with signals.held_by_fedrun():
    signals.stops_interrupt()
    held = Held()
    ref = weakref.ref(held, collected)
    try:
        del held
        end = time.monotonic() + 10
        while time.monotonic() < end:
            pass
        print("not stopped")
    except KeyboardInterrupt:
        print("stopped", signals.received)

class Other:
    def __del__(self):
        raise ValueError("not a stop")

Other()
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_signal_inside_a_callback_python_cannot_raise_from_still_stops(sig):
    """A handler runs wherever the main thread is: inside a weakref callback (an import's module
    lock: the race tests/test_sweep_stop.py met) its ``KeyboardInterrupt`` could not be raised,
    Python printed "Exception ignored" with a traceback and the stop was lost. It is sent again
    once the callback is over, noted once; another exception where Python cannot raise it is
    still reported as before."""
    p = subprocess.run(
        [sys.executable, "-c", UNRAISABLE_DRIVER, str(int(sig))],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.stdout.splitlines() == [f"stopped [{int(sig)}]"], (p.stdout, p.stderr)
    assert "KeyboardInterrupt" not in p.stderr and "Stop" not in p.stderr, p.stderr
    assert "Exception ignored" in p.stderr and "ValueError: not a stop" in p.stderr, p.stderr
