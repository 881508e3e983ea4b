"""Nothing left behind: the drawing process is ended and waited for when fedrun lets it go (a
figure asked for before a stop signal is never written after), and no file is left open (``-X
dev`` reports no ResourceWarning for a run)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from conftest import child_env

from fedprox_cli.cli import drawer
from fedprox_cli.common import files

TINY = ("dataset=digits", "model=linear", "n=4", "K=2", "T=2")


def test_the_drawing_process_is_ended_and_waited_for():
    drawer.start()
    (p,) = drawer._PROCESS
    drawer.stop()
    assert p.returncode is not None and p.stdin.closed and p.stdout.closed
    assert drawer._PROCESS == []


def test_a_run_leaves_no_file_open_and_no_process_running(tmp_path):
    p = subprocess.run(
        [
            sys.executable,
            "-X",
            "dev",
            "-m",
            "fedprox_cli",
            "dataset=digits",
            "model=linear",
            "n=4",
            "K=2",
            "T=2",
            f"hydra.run.dir={tmp_path / 'run'}",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=child_env(),
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    assert "ResourceWarning" not in p.stderr, p.stderr
    assert (tmp_path / "run" / "metrics.png").exists()


WRITER = """import sys, time
from fedprox_cli.common.files import atomic_write
def slow(f):
    f.write(b"half")
    f.flush()
    print("writing", flush=True)
    time.sleep(60)
atomic_write(sys.argv[1], slow)
"""


def _writing(path):
    """A process writing ``path`` through :func:`files.atomic_write`, stopped in its write
    (its temp file beside ``path``)."""
    p = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path)],
        stdout=subprocess.PIPE,
        text=True,
        env=child_env(),
    )
    assert p.stdout.readline() == "writing\n"
    return p


def _temps(folder):
    return sorted(f.name for f in folder.iterdir() if files.temp_of(f))


def test_a_killed_writers_temp_file_goes_with_the_next_write_of_its_file(tmp_path):
    """A writer killed (SIGKILL) while writing a file -- a report, a table, a figure outside a
    run folder -- leaves its temp file (``.NAME.<random>.tmp``); the next write of that file
    deletes it. Another file's temp file is not touched."""
    report = tmp_path / "REPRODUCTION.md"
    p = _writing(report)
    p.kill()
    p.wait()
    (left,) = _temps(tmp_path)
    assert files.temp_of(tmp_path / left) == "REPRODUCTION.md"
    other = tmp_path / ".other.md.abcdefgh.tmp"
    other.write_text("another file's")
    files.atomic_write_text(report, "the report\n")
    assert report.read_text() == "the report\n"
    assert _temps(tmp_path) == [other.name]


def test_a_live_writers_temp_file_is_kept(tmp_path):
    """A temp file its writer still holds (``flock``) is not taken for a killed writer's: two
    writers of one file (jobs writing the engine cache at once) never delete each other's."""
    target = tmp_path / "engine.json"
    p = _writing(target)
    try:
        (live,) = _temps(tmp_path)
        files.atomic_write_text(target, "{}\n")
        assert _temps(tmp_path) == [live] and target.read_text() == "{}\n"
    finally:
        p.kill()
        p.wait()


SLOW_DRAWING = """import os, sys, time
def hook(event, args, mark=os.environ.get("FEDRUN_TEST_DRAWING"), run=os.environ.get("RUN")):
    if event == "open" and mark and str(args[0]).startswith(f"{run}/.metrics.png."):
        open(mark, "w").close()
        time.sleep(6)
sys.addaudithook(hook)
"""


def _files(folder):
    return {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.iterdir()}


def test_sigterm_while_the_figure_is_drawn_writes_nothing_after_fedrun_exits(tmp_path):
    """Two SIGTERMs while the drawing process writes metrics.png (held 6 s in its write here):
    the drawer is ended and waited for before fedrun lets the folder go, so the folder fedrun
    left (``interrupted``, exit 130) is the folder 8 s later: no figure, no temp file of one."""
    shim, mark, run = tmp_path / "shim", tmp_path / "drawing", tmp_path / "run"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(SLOW_DRAWING)
    env = child_env(
        PYTHONPATH=os.pathsep.join([str(shim), child_env()["PYTHONPATH"]]),
        FEDRUN_TEST_DRAWING=str(mark),
        RUN=str(run),
    )
    p = subprocess.Popen(
        [sys.executable, "-m", "fedprox_cli", *TINY, f"hydra.run.dir={run}"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 240
    while not mark.exists() and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert mark.exists(), p.communicate()
    p.send_signal(signal.SIGTERM)  # the first: stop after the round (training is over)
    time.sleep(0.5)
    p.send_signal(signal.SIGTERM)  # the second: stop now
    out, err = p.communicate(timeout=60)
    left = _files(run)
    time.sleep(8)
    assert _files(run) == left, err
    assert p.returncode == 130, err
    assert "metrics.png" not in left and not [n for n in left if files.temp_of(run / n)], left
    assert json.loads((run / "summary.json").read_text())["status"] == "interrupted"
    assert "Traceback" not in err
