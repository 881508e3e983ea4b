"""Threads fitted to a limit on the user's processes and threads (common/thread_room.py): under
``ulimit -u`` a library that cannot start its threads ends the process from C (libgomp: exit 1)
or raises SIGINT on it (OpenBLAS), and a joblib sweep's workers fail or hang -- every command
reads the room before any such library loads and fits its thread counts to it, or refuses in
one line. The end-to-end tests run as ``nobody`` (root ignores ``ulimit -u``)."""

from __future__ import annotations

import json
import os
import pwd
import resource
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import child_env

from fedprox_cli.common import thread_room

CACHES = ("XDG_CACHE_HOME", "FEDPROX_CACHE", "MPLCONFIGDIR", "FEDPROX_DATA")  # conftest's
TWO = {"OMP_NUM_THREADS": "2"}  # the libraries' threads on 2 cores (the tests' workers set 1)
TINY = ("dataset=digits", "model=linear", "n=4", "K=2", "T=2")


@pytest.fixture
def room(monkeypatch):
    """Set the room :func:`thread_room.read` finds (limit, running); an empty fit."""
    monkeypatch.setattr(thread_room, "FITTED", [])
    monkeypatch.setattr(thread_room, "_cpus", lambda: 2)

    def set_room(limit: int | None, running: int = 1) -> None:
        value = None if limit is None else thread_room.Room(limit, running)
        monkeypatch.setattr(thread_room, "read", lambda: value)

    return set_room


def test_no_limit_or_room_enough_changes_nothing(room):
    for limit in (None, 100):
        room(limit)
        env: dict[str, str] = {}
        assert thread_room.fit("fedrun", [], env) is None and env == {}
    assert thread_room.FITTED == [] and thread_room.drawing_process()
    assert thread_room.pool_threads(8) == 8


def test_a_tight_limit_fits_the_counts(room):
    """At ``ulimit -u 2`` (one more task): torch one thread, OpenBLAS one, drawn in-process,
    images decoded in the calling thread; at 4, torch keeps its two threads and the drawing
    process its place."""
    room(2)
    env: dict[str, str] = {}
    note = thread_room.fit("fedrun", [], env)
    assert note == (
        "the limit on this user's processes and threads leaves room for 1 more (ulimit -u: 2; "
        "1 running): torch runs 1 thread, the figures are drawn in this process (raise "
        "ulimit -u for more)"
    )
    assert env["OMP_NUM_THREADS"] == env["MKL_NUM_THREADS"] == env["OPENBLAS_NUM_THREADS"] == "1"
    assert not thread_room.drawing_process() and thread_room.pool_threads(8) == 1
    thread_room.FITTED.clear()
    room(4)
    env = {}
    assert thread_room.fit("fedrun", [], env) is None
    assert "OMP_NUM_THREADS" not in env and env["OPENBLAS_NUM_THREADS"] == "1"
    assert thread_room.drawing_process() and thread_room.pool_threads(8) == 1


def test_no_room_for_what_a_command_must_start_is_one_line(room):
    room(1)
    with pytest.raises(thread_room.NoRoom, match=r"\(ulimit -u: 1; 1 running; it needs 1 more\)"):
        thread_room.fit("fedrun", [], {})
    for pages in (["--help"], ["dataset=digits", "dry_run=true"], ["-m", "--cfg", "job"]):
        thread_room.fit("fedrun", pages, {})  # starts nothing
    env: dict[str, str] = {}
    thread_room.fit("fedrun-report", [], env)  # starts nothing: it runs, on one thread
    assert env["OPENBLAS_NUM_THREADS"] == env["OMP_NUM_THREADS"] == "1"


def test_a_joblib_sweep_fits_its_workers_or_is_refused(room):
    room(10, 2)  # 8 free: fewer than 2 workers need
    with pytest.raises(thread_room.NoRoom, match="joblib sweep of 2 workers .* needs 9 more"):
        thread_room.fit_workers(2, {})
    room(11, 2)
    env: dict[str, str] = {}
    thread_room.fit_workers(2, env)
    assert env == thread_room.ONE_THREAD
    env = {}
    thread_room.fit_workers(1, env)  # one: joblib runs the jobs in the launching process
    thread_room.fit_workers(-2, env)  # all CPUs but one
    assert env == {}
    with pytest.raises(thread_room.NoRoom, match="joblib sweep of 2 workers"):
        room(10, 2)
        thread_room.fit_workers(-1, env)


def test_reproduce_runs_one_thread_and_its_runs_fit_themselves(room, monkeypatch):
    """``fedrun-reproduce`` launches runs: under a limit its own libraries run one thread, and
    its runs start with the environment as it was, each fitting itself to the room it finds."""
    monkeypatch.setattr(thread_room, "UNFITTED", {})
    for name in thread_room.ONE_THREAD:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    room(100)
    assert thread_room.fit("fedrun-reproduce", []) is None
    assert all(os.environ[k] == v for k, v in thread_room.ONE_THREAD.items())
    env = thread_room.unfitted_env()
    assert env["OMP_NUM_THREADS"] == "2" and "OPENBLAS_NUM_THREADS" not in env


def test_a_resume_whose_threads_do_not_fit_is_refused(monkeypatch, tmp_path):
    """A resume runs with the threads its run started with: where the room does not hold
    them, one line -- libgomp would have ended the process."""
    import torch

    from fedprox_cli.common.errors import UserError
    from fedprox_cli.runs import numerics

    monkeypatch.setattr(thread_room, "read", lambda: thread_room.Room(3, 2))
    monkeypatch.setattr(thread_room, "RESERVED", [1])  # fedrun's short-lived program
    assert thread_room.short_of(1) == thread_room.Room(3, 2)  # one free, for the program
    monkeypatch.setattr(thread_room, "RESERVED", [])
    assert thread_room.short_of(1) is None
    monkeypatch.setattr(thread_room, "RESERVED", [1])
    recorded = {"threads": torch.get_num_threads() + 1}
    with pytest.raises(UserError, match=r"does not leave room for them \(ulimit -u: 3; 2 run"):
        numerics.resume_with(recorded, None, tmp_path)  # the config: read after the threads


# --- end to end, as nobody ---------------------------------------------------------------


def _nobody() -> int:
    """nobody's uid, or skip where the test cannot run as another user."""
    if os.geteuid() != 0:
        pytest.skip("needs root, to run commands as nobody (root ignores ulimit -u)")
    try:
        uid = pwd.getpwnam("nobody").pw_uid
    except KeyError:
        pytest.skip("no user nobody on this machine")
    if not all(shutil.which(t) for t in ("unshare", "setpriv", "mount")):
        pytest.skip("needs unshare, setpriv and mount (util-linux)")
    if thread_room.tasks_of(uid):
        pytest.skip("processes of nobody run already: the room under the limit is theirs too")
    return uid


def _blocked(path: Path) -> tuple[Path, str] | None:
    """The first folder on ``path`` that others cannot enter, and the entry below it."""
    for parent in [*reversed(path.parents), path]:
        if parent != path and not parent.stat().st_mode & stat.S_IXOTH:
            return parent, path.relative_to(parent).parts[0]
    return None


def _reachable(under: Path) -> str:
    """Shell commands (run in a mount namespace of its own) that let any user reach this
    interpreter and its packages, where they lie under a folder others cannot enter (/root):
    a readable folder (made in ``under``) holding only those entries is mounted over it."""
    paths = [Path(os.path.realpath(sys.executable)), *(Path(p) for p in sys.path if p)]
    blocked: dict[Path, set[str]] = {}
    for p in paths:
        hit = _blocked(p) if p.exists() else None
        if hit:
            blocked.setdefault(hit[0], set()).add(hit[1])
    lines = []
    for folder, entries in blocked.items():
        cover = Path(tempfile.mkdtemp(prefix="reach-", dir=under))
        cover.chmod(0o755)
        for entry in entries:
            (cover / entry).mkdir()
            lines.append(f"mount --bind '{folder / entry}' '{cover / entry}'")
        lines.append(f"mount --rbind '{cover}' '{folder}'")
    return " && ".join([*lines, "true"])


NOBODY = pytest.mark.xdist_group("nobody")  # one at a time: the room under the limit is shared


@pytest.fixture
def as_nobody():
    """Run a command of this checkout as nobody under ``ulimit -u LIMIT`` in a folder nobody
    may write, with a cache of its own there; returns (CompletedProcess, folder)."""
    uid = _nobody()
    folder = Path(tempfile.mkdtemp(prefix="fedprox-nobody-"))
    folder.chmod(0o777)

    def run(limit: int, name: str, *args: str, env: dict[str, str] | None = None):
        command = [sys.executable, "-c", f"from fedprox_cli.cli import commands; commands.{name}()"]
        nobody = f"setpriv --reuid={uid} --regid={uid} --clear-groups"
        script = f'{_reachable(folder)} && exec {nobody} "$@"'
        p = subprocess.run(
            ["unshare", "-m", "sh", "-c", script, "x", *command, *args],
            capture_output=True,
            text=True,
            cwd=folder,
            env=child_env(
                HOME=str(folder),
                **{k: str(folder / "cache" / k) for k in CACHES},
                **(env or {}),
            ),
            timeout=300,
            # root ignores the limit; it applies once setpriv has made the process nobody's
            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NPROC, (limit, limit)),
        )
        return p, folder

    yield run
    shutil.rmtree(folder, ignore_errors=True)


def _summary(folder: Path) -> dict:
    return json.loads((folder / "summary.json").read_text())


@NOBODY
def test_a_run_fits_a_limit_of_two(as_nobody):
    """``ulimit -u 2``: libgomp ended the process (``Thread creation failed``, exit 1), or
    OpenBLAS's SIGINT did (exit 2), as the drawing process took the one task left. The run
    fits: one thread, drawn in its own process, finished."""
    p, folder = as_nobody(2, "fedrun", *TINY, "hydra.run.dir=R", env=TWO)
    assert p.returncode == 0, p.stderr
    assert "libgomp" not in p.stderr and "OpenBLAS" not in p.stderr
    assert "fedrun: note: the limit on this user's processes and threads leaves room for 1 " in (
        p.stderr
    )
    summary = _summary(folder / "R")
    assert summary["status"] == "finished" and summary["numerics"]["threads"] == 1
    assert (folder / "R" / "metrics.png").is_file()


@NOBODY
def test_no_room_at_all_is_one_line(as_nobody):
    """``ulimit -u 1``: OpenBLAS printed four lines of its own before fedrun's. One line, exit
    2, nothing written -- and an analysis command, which starts nothing, runs."""
    p, folder = as_nobody(1, "fedrun", *TINY, "hydra.run.dir=R", env=TWO)
    assert p.returncode == 2, p.stderr
    (line,) = p.stderr.strip().splitlines()
    assert line.startswith("fedrun: error: the limit on this user's processes and threads ")
    assert not (folder / "R").exists()
    p, _ = as_nobody(64, "fedrun", *TINY, "hydra.run.dir=R")
    assert p.returncode == 0, p.stderr
    for name, shown in (("report", "finished"), ("table", "FedCanon")):
        p, _ = as_nobody(1, name, "R", env=TWO)
        assert p.returncode == 0 and p.stderr == "", p.stderr
        assert shown in p.stdout


@NOBODY
def test_a_joblib_sweep_without_room_is_one_line(as_nobody):
    """A joblib sweep whose workers do not fit: ``Resource temporarily unavailable``, an
    internal error with the workers' tracebacks, or a sweep that hangs. One line, exit 2,
    nothing written."""
    p, folder = as_nobody(
        6,
        "fedrun",
        "-m",
        "hydra/launcher=joblib",
        "hydra.launcher.n_jobs=2",
        *TINY,
        "n=3,4",
        "hydra.sweep.dir=S",
        env={"OMP_NUM_THREADS": "1"},
    )
    assert p.returncode == 2, p.stderr
    (line,) = p.stderr.strip().splitlines()
    assert "leaves no room for a joblib sweep of 2 workers" in line
    assert not (folder / "S").exists()


def test_the_limit_is_read_for_this_process():
    room = thread_room.read()
    soft = resource.getrlimit(resource.RLIMIT_NPROC)[0]
    if soft == resource.RLIM_INFINITY or os.getuid() == 0:
        assert room is None
    else:
        assert room is not None and room.limit == soft and room.running >= 1
