"""One owner of a run folder: the lock plus the owner record (pid, host, boot, start time), checked
before any start. A deleted lock file or a file system whose flock does nothing never lets a
second writer in; a lock that cannot be had (ENOLCK, EIO) names the lock file and leaves nothing;
a lock another program holds names that program."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import child_env, fedrun

from fedprox_cli.common.errors import UserError
from fedprox_cli.runs import lock, owner, view
from fedprox_cli.runs.lock import RunLock, holder

HOLD = """
import sys, time
from pathlib import Path
from fedprox_cli.runs.lock import RunLock
with RunLock(Path(sys.argv[1])):
    print("held", flush=True)
    sys.stdin.read()
"""


@pytest.fixture
def held(tmp_path):
    """``tmp_path/run`` held by another process (a live run), until the test ends."""
    folder = tmp_path / "run"
    folder.mkdir()
    p = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(folder)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=child_env(),
    )
    assert p.stdout.readline() == "held\n"
    yield folder, p.pid
    p.stdin.close()
    p.wait(timeout=30)


def test_the_owner_is_recorded_while_held_and_gone_after(tmp_path):
    with RunLock(tmp_path):
        me = owner.read(tmp_path)
        assert (me.pid, me.host) == (os.getpid(), owner.HERE) and me.alive() is True
        assert me.start is not None and me.lock == (
            os.stat(tmp_path / ".fedrun.lock").st_dev,
            os.stat(tmp_path / ".fedrun.lock").st_ino,
        )
    assert not (tmp_path / ".fedrun.owner").exists()


def test_a_deleted_lock_lets_no_second_writer_in(held):
    folder, pid = held
    (folder / ".fedrun.lock").unlink()
    with pytest.raises(UserError) as e:
        RunLock(folder).__enter__()
    start = f"run folder {folder} is in use by pid {pid} on host {owner.HERE} (started "
    assert start in str(e.value)
    assert "its lock file was deleted under it" in str(e.value)
    assert holder(folder).startswith(f"pid {pid} on host")  # fedrun-report: running, not dead
    (folder / "summary.json").write_text(json.dumps({"status": "running"}))
    assert view.status(folder) == "running"


def test_a_flock_that_does_nothing_lets_no_second_writer_in(held, monkeypatch):
    folder, pid = held
    monkeypatch.setattr(lock.fcntl, "flock", lambda fd, op: None)  # NFS with local_lock, a shim
    with pytest.raises(UserError, match=f"in use by pid {pid} .*flock does nothing"):
        RunLock(folder).__enter__()


@pytest.mark.parametrize("code", [errno.ENOLCK, errno.EIO])
def test_a_lock_that_cannot_be_had_names_its_file_and_leaves_nothing(tmp_path, monkeypatch, code):
    def fails(fd, op):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(lock.fcntl, "flock", fails)
    with pytest.raises(UserError) as e:
        RunLock(tmp_path).__enter__()
    assert str(e.value).startswith(
        f"cannot lock {tmp_path / '.fedrun.lock'}: {os.strerror(code)}: the file system of the "
        f"run folder provides no locks (flock)"
    )
    assert list(tmp_path.iterdir()) == []


def test_a_run_on_a_file_system_without_locks_leaves_no_folder(tmp_path):
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(
        "import errno, fcntl\n"
        "def flock(fd, op):\n"
        "    raise OSError(errno.ENOLCK, 'No locks available')\n"
        "fcntl.flock = flock\n"
    )
    out = tmp_path / "new" / "run"
    p = fedrun("dataset=digits", "model=linear", "T=2", f"hydra.run.dir={out}", path=[shim])
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == [
        f"fedrun: error: cannot lock {out / '.fedrun.lock'}: No locks available: the file system "
        "of the run folder provides no locks (flock), so fedrun cannot make sure it is the "
        "folder's one writer; nothing was written: use a folder on a file system with locks (a "
        "local disk, NFS with its lock service)"
    ]
    assert not (tmp_path / "new").exists()


def test_a_lock_another_program_holds_is_named_as_not_fedrun(tmp_path):
    (tmp_path / ".fedrun.lock").write_text("pid 1 on host gone\n")  # an earlier run's name
    p = subprocess.Popen(["flock", str(tmp_path / ".fedrun.lock"), "sleep", "30"])
    try:
        for _ in range(100):
            if holder(tmp_path) is not None:
                break
            time.sleep(0.05)
        with pytest.raises(UserError) as e:
            RunLock(tmp_path).__enter__()
    finally:
        p.kill()
        p.wait()
    assert "pid 1 on host gone" not in str(e.value)
    assert f"in use by pid {p.pid} (flock), which is not a fedrun run" in str(e.value)


def _record(folder: Path, **fields) -> None:
    st = os.stat(folder / ".fedrun.lock")
    base = {"pid": 1, "host": owner.HERE, "lock": [st.st_dev, st.st_ino]}
    (folder / ".fedrun.owner").write_text(json.dumps({**base, **fields}))


def test_an_ended_owners_record_is_replaced(tmp_path):
    (tmp_path / ".fedrun.lock").touch()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], **TEXT)
    _record(tmp_path, pid=int(dead.stdout))  # killed: its record stayed, its lock went
    with RunLock(tmp_path):
        assert owner.read(tmp_path).pid == os.getpid()
    _record(tmp_path, pid=os.getpid(), start=0)  # a pid reused by a later process
    with RunLock(tmp_path):
        assert owner.read(tmp_path).start != 0


TEXT = {"capture_output": True, "text": True, "check": True}


def test_another_hosts_owner_is_named_unless_the_lock_proves_it_gone(tmp_path):
    (tmp_path / ".fedrun.lock").touch()
    _record(tmp_path, pid=4242, host="node7")  # the lock file it locked is this one: free now
    with RunLock(tmp_path):
        assert owner.read(tmp_path).host == owner.HERE
    _record(tmp_path, pid=4242, host="node7", started="2026-01-01 00:00:00 UTC", lock=[0, 1])
    with pytest.raises(UserError) as e:  # its lock file was replaced: it may still write
        RunLock(tmp_path).__enter__()
    assert str(e.value).startswith(
        f"run folder {tmp_path} is in use by pid 4242 on host node7 (started 2026-01-01 00:00:00 "
        f"UTC) as far as this host can tell"
    )
    assert f"if that process has ended, delete {tmp_path / '.fedrun.owner'}" in str(e.value)


def test_an_owner_record_is_no_foreign_file(tmp_path):
    """A killed run's record is fedrun's: the folder is still a fedrun run folder to start in."""
    out = tmp_path / "run"
    out.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], **TEXT)
    (out / ".fedrun.owner").write_text(json.dumps({"pid": int(dead.stdout), "host": owner.HERE}))
    p = fedrun("dataset=digits", "model=linear", "T=2", f"hydra.run.dir={out}", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert not (out / ".fedrun.owner").exists()
