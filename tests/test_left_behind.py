"""Nothing left behind: the drawing process is ended and waited for when fedrun lets it go (a
figure asked for before a stop signal is never written after), and no file is left open (``-X
dev`` reports no ResourceWarning for a run)."""

from __future__ import annotations

import subprocess
import sys

from conftest import child_env

from fedprox_cli.cli import drawer


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
