"""The end-of-run figures drawn by the fedrun command's drawing process (cli/drawer.py): drawn
there, a fault there raised here as the exception it was, and drawn here where the process does
not answer."""

import errno
import json
import os
import shutil
import subprocess
import sys

import pytest
from conftest import child_env, fedrun_process

from fedprox_cli.cli import drawer
from fedprox_cli.common.errors import UserError

TINY = ["dataset=digits", "model=linear", "n=4", "K=2", "T=2", "eval_every=1"]


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished tiny run of the fedrun command: its figure drawn by the drawing process."""
    out = tmp_path_factory.mktemp("drawer") / "run"
    p = fedrun_process(*TINY, f"hydra.run.dir={out}", cwd=out.parent)
    assert p.returncode == 0, p.stderr
    assert (out / "metrics.png").read_bytes()[:4] == b"\x89PNG"
    return out


@pytest.fixture
def process():
    drawer.start()
    yield drawer._PROCESS[0]
    drawer.stop()


def config(out):
    from omegaconf import OmegaConf

    return OmegaConf.to_container(OmegaConf.load(out / "config.yaml"))


def test_the_drawing_process_draws_and_its_faults_come_back(finished, tmp_path, process):
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(finished / "metrics.csv", run)
    drawer.figures(config(finished), run)
    assert (run / "metrics.png").read_bytes()[:4] == b"\x89PNG" and process.poll() is None
    (run / "metrics.png").unlink()
    (run / "metrics.png").mkdir()  # its figure cannot be written there
    with pytest.raises(UserError, match="metrics.png is a folder"):
        drawer.figures(config(finished), run)
    fault = {"errno": errno.ENOSPC, "strerror": "No space left on device", "filename": "x.png"}
    with pytest.raises(OSError) as e:
        drawer.raise_fault(fault)  # as the process replies an OSError
    assert (e.value.errno, e.value.strerror, e.value.filename) == tuple(fault.values())
    drawer.raise_fault({})


def test_without_an_answer_the_figures_are_drawn_here(finished, tmp_path, process):
    process.kill()
    process.wait()
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(finished / "metrics.csv", run)
    drawer.figures(config(finished), run)
    assert (run / "metrics.png").read_bytes()[:4] == b"\x89PNG" and not drawer._PROCESS


def test_a_summary_says_the_run_finished(finished):
    assert json.loads((finished / "summary.json").read_text())["status"] == "finished"


DRAW = """import json, sys
from pathlib import Path
from fedprox_cli.analysis import run_figures
if sys.argv[3] == "warm":
    run_figures.warm_up()
run_figures.draw(json.loads(Path(sys.argv[1]).read_text()), Path(sys.argv[2]))
"""


def test_a_warmed_up_process_draws_the_same_file(finished, tmp_path):
    """The drawing process draws a throwaway figure before the run's (run_figures.warm_up): the
    run's figure is the file a process that drew nothing before draws."""
    (tmp_path / "config.json").write_text(json.dumps(config(finished)))
    for how in ("warm", "cold"):
        (tmp_path / how).mkdir()
        shutil.copy(finished / "metrics.csv", tmp_path / how)
        subprocess.run(
            [sys.executable, "-c", DRAW, str(tmp_path / "config.json"), str(tmp_path / how), how],
            env=child_env(),
            check=True,
            timeout=300,
        )
    warm, cold = ((tmp_path / how / "metrics.png").read_bytes() for how in ("warm", "cold"))
    assert warm[:4] == b"\x89PNG" and warm == cold


def test_the_warm_up_is_skipped_where_a_request_waits(monkeypatch):
    """A run that ended before the drawing process was ready waits for its figure, not for a
    warm-up first (drawer._asked: a request, or the end of the input, is waiting)."""
    r, w = os.pipe()
    with os.fdopen(r) as stdin, os.fdopen(w, "w") as run:
        monkeypatch.setattr(sys, "stdin", stdin)
        assert not drawer._asked()
        run.write('{"config": {}, "out": "x"}\n')
        run.flush()
        assert drawer._asked()
