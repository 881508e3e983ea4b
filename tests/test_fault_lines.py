"""Small faults by their mechanisms (docs/robustness.md): a deleted working folder named (an
absolute run folder still runs), a deleted key named as given, a run's liveness decided by its
lock and not by a reader's clock, and long values shortened in a line."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import child_env, fedrun

from fedprox_cli.runs import view
from fedprox_cli.runs.lock import RunLock

TINY = ["dataset=digits", "model=linear", "n=4", "K=2", "T=3"]
ENV = child_env(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def in_deleted_folder(tmp_path, *args) -> subprocess.CompletedProcess:
    gone = tmp_path / "gone"
    gone.mkdir()
    script = f'cd "{gone}" && rmdir "{gone}" && exec "{sys.executable}" -m fedprox_cli "$@"'
    return subprocess.run(
        ["sh", "-c", script, "sh", *args], env=ENV, capture_output=True, text=True, timeout=300
    )


def test_a_deleted_working_folder_is_named_and_an_absolute_run_folder_still_runs(tmp_path):
    p = in_deleted_folder(tmp_path, *TINY)
    assert p.returncode == 2
    assert p.stderr.splitlines() == [
        f"fedrun: error: the working folder {tmp_path / 'gone'} was deleted; cd to an "
        f"existing folder, or give an absolute hydra.run.dir (hydra.sweep.dir with -m)"
    ]
    p = in_deleted_folder(tmp_path, *TINY, f"hydra.run.dir={tmp_path / 'r'}")
    assert p.returncode == 0, p.stderr
    assert json.loads((tmp_path / "r" / "summary.json").read_text())["status"] == "finished"


@pytest.mark.parametrize(
    "deleted, named",
    [
        ("~algorithm.beta", "algorithm.beta"),
        ("~algorithm", "algorithm"),
        ("~regularizer.lam", "regularizer.lam"),
    ],
)
def test_a_deleted_key_is_named_as_given(tmp_path, deleted, named):
    p = fedrun(*TINY, deleted, f"hydra.run.dir={tmp_path / 'r'}", cwd=tmp_path, env=ENV)
    assert p.returncode == 2
    assert p.stderr.splitlines() == [
        f"fedrun: error: {named} cannot be deleted (~): fedrun needs it; override the value instead"
    ]


def test_a_locked_run_is_running_whatever_the_readers_clock_says(tmp_path):
    (tmp_path / "summary.json").write_text(
        json.dumps({"status": "running", "heartbeat": "2001-01-01T00:00:00+00:00"})
    )
    assert view.status(tmp_path) == "dead"
    with RunLock(
        tmp_path
    ):  # a live process holds it: its heartbeat's age on this clock does not matter
        assert view.status(tmp_path) == "running"


def test_a_long_folder_name_is_shortened_in_the_line(tmp_path):
    long = "/".join(["a" * 250] * 400)  # 100 KB
    p = fedrun(*TINY, f"hydra.run.dir={tmp_path / long}", cwd=tmp_path, env=ENV)
    assert p.returncode == 2
    [line] = p.stderr.splitlines()
    assert line.startswith(f"fedrun: error: File name too long: {tmp_path}") and len(line) < 500, (
        line[:600]
    )
