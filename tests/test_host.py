"""What the host must give a command, each fault named as what it is (common/host.py): a clock
that advances, room below ARG_MAX to start fedrun's processes, and threads -- OpenBLAS's SIGINT
when it cannot start its threads is no Ctrl-C."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys

import pytest
from conftest import child_env

from fedprox_cli.common import host, signals

TINY = ("dataset=digits", "model=linear", "n=4", "K=2", "T=2")

FROZEN = """import time
for name in ("time", "monotonic", "perf_counter"):
    value = getattr(time, name)()
    setattr(time, name, lambda value=value: value)
"""


def command(args, tmp_path, name="fedrun", **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", f"from fedprox_cli.cli import commands; commands.{name}()", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=child_env(**env),
        timeout=300,
    )


def test_a_frozen_clock_is_named(tmp_path):
    """Hydra's sweeper divides by the time it took to check a sweep's jobs: under a clock that
    does not advance that was an internal error (ZeroDivisionError, exit 3)."""
    (tmp_path / "shim").mkdir()
    (tmp_path / "shim" / "sitecustomize.py").write_text(FROZEN)
    path = os.pathsep.join([str(tmp_path / "shim"), child_env()["PYTHONPATH"]])
    for args in (["-m", *TINY, "n=3,4", "hydra.sweep.dir=S"], [*TINY, "hydra.run.dir=R"]):
        p = command(args, tmp_path, PYTHONPATH=path)
        assert p.returncode == 2, p.stderr
        (line,) = p.stderr.strip().splitlines()
        assert line.startswith("fedrun: error: the system clock does not advance (time.time ")
    assert not (tmp_path / "S").exists() and not (tmp_path / "R").exists()


def test_a_running_clock_passes():
    assert host.clock_stopped() is None
    assert host.clock_stopped((("still", lambda: 1.0),)).startswith(
        "the system clock does not advance (still read 1.0 100,000 times running)"
    )


def test_an_environment_near_the_exec_limit_is_named(tmp_path):
    """Workers started with an environment that leaves no room for their command line fail to
    start (joblib said "segmentation fault or excessive memory", exit 3): refused first."""
    limit = os.sysconf("SC_ARG_MAX")
    base = child_env()
    left = limit - host._exec_size(base) - 2000  # room for this test's own command line
    pads = {f"PAD{i}": "x" * min(100_000, left - 100_020 * i) for i in range(left // 100_020 + 1)}
    pads = {k: v for k, v in pads.items() if v}
    assert host._exec_size({**base, **pads}) + host.EXEC_ROOM > limit
    p = command(
        [
            "-m",
            "hydra/launcher=joblib",
            "hydra.launcher.n_jobs=2",
            *TINY,
            "n=3,4",
            "hydra.sweep.dir=S",
        ],
        tmp_path,
        **pads,
    )
    assert p.returncode == 2, p.stderr
    (line,) = p.stderr.strip().splitlines()
    assert (
        line.startswith("fedrun: error: the environment takes ") and "PAD0: 100,000 bytes" in line
    )
    assert not (tmp_path / "S").exists()
    assert host.exec_room({"A": "x"}) is None


def test_a_sigint_while_no_thread_starts_is_named(monkeypatch):
    """The stop signals' handlers tell OpenBLAS's SIGINT (no thread could be started) from a
    Ctrl-C: the former is the one line of :class:`host.NoThread`, the latter an interrupt."""
    monkeypatch.setattr(host, "_can_start_thread", lambda: False)
    with pytest.raises(host.NoThread, match="this process cannot start a thread"):
        signals.note_and_interrupt(signal.SIGINT, None)
    with pytest.raises(KeyboardInterrupt):  # SIGTERM is never a library's
        signals.note_and_interrupt(signal.SIGTERM, None)
    monkeypatch.undo()
    with pytest.raises(KeyboardInterrupt):
        signals.note_and_interrupt(signal.SIGINT, None)


HUGE_STACK = 1 << 39  # each thread's stack is the stack limit: no thread can be mapped


@pytest.mark.parametrize("name", ["fedrun", "report"])
def test_openblas_that_cannot_start_its_threads_is_named(tmp_path, name):
    """OpenBLAS raises SIGINT on its process when it cannot start its threads (under ``ulimit
    -u`` as a user; here, for any user, a stack limit no thread stack can be mapped with): one
    line naming it, exit 2 -- not "interrupted", exit 130."""

    def huge_stack():
        resource.setrlimit(resource.RLIMIT_STACK, (HUGE_STACK, HUGE_STACK))

    args = [*TINY, "hydra.run.dir=R"] if name == "fedrun" else [str(tmp_path)]
    p = subprocess.run(
        [sys.executable, "-c", f"from fedprox_cli.cli import commands; commands.{name}()", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=child_env(OPENBLAS_NUM_THREADS="2", OMP_NUM_THREADS="2"),
        timeout=300,
        preexec_fn=huge_stack,
    )
    if "OpenBLAS" not in p.stderr:
        pytest.skip("this numpy's BLAS started its threads under the stack limit")
    assert p.returncode == 2, p.stderr
    last = p.stderr.strip().splitlines()[-1]
    prog = "fedrun" if name == "fedrun" else "fedrun-report"
    assert last.startswith(f"{prog}: error: this process cannot start a thread: "), p.stderr
    assert "interrupted" not in p.stderr


def test_a_matplotlib_cache_that_cannot_be_written_says_nothing(tmp_path):
    """matplotlib draws with a temporary folder where its own cannot be made, and logs it (two
    lines on stderr; three under fedrun's logging where a run draws its figures in its own
    process, with the font list it rebuilt): a command's output is its own lines."""
    (tmp_path / "a-file").write_text("")
    unwritable = str(tmp_path / "a-file" / "matplotlib")  # not a folder, even for root
    p = command([*TINY, "hydra.run.dir=R"], tmp_path, MPLCONFIGDIR=unwritable)
    assert p.returncode == 0, p.stderr
    p = command(["R", "--out", "r.png"], tmp_path, name="plot", MPLCONFIGDIR=unwritable)
    assert p.returncode == 0 and (tmp_path / "r.png").is_file(), p.stderr
    assert "atplotlib" not in p.stderr, p.stderr
