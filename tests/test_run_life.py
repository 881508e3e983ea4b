"""One run life for ``seeds=1`` and ``seeds=R`` (fedprox_cli/runs/runner.py): a start that
fails, a resume, an extension and a finished run behave the same for one run and for each run
of a seed batch."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from fedprox_cli import data
from fedprox_cli.common.errors import UserError
from fedprox_cli.common.run_files import read_summary
from fedprox_cli.config.compose import compose
from fedprox_cli.runs import experiment, runner

BASE = [
    "dataset=digits",
    "model=linear",
    "n=4",
    "K=2",
    "B=8",
    "T=2",
    "eval_every=1",
    "device=cpu",
    "checkpoint_every=1",
    "keep_checkpoint=true",
    "progress_every_s=0",
]

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def folders(out: Path, seeds: int) -> list[Path]:
    """The run folders of ``seeds`` runs into ``out`` (seed 0 on)."""
    return [out] if seeds == 1 else [out / f"seed_{s}" for s in range(seeds)]


def life(out: Path, seeds: int, *more: str) -> int:
    return runner.run(compose([*BASE, f"seeds={seeds}", *more]), out, progress=False)


@pytest.mark.parametrize("seeds", [1, 2])
def test_a_start_that_fails_is_recorded_in_each_fresh_folder(seeds, tmp_path, monkeypatch):
    """The data cannot be loaded: one line, exit code 2, and each new folder's summary says
    why it holds no run."""

    def gone(cfg):
        raise UserError("the data are gone")

    monkeypatch.setattr(data, "load_config", gone)
    assert life(tmp_path / "r", seeds) == 2
    for folder in folders(tmp_path / "r", seeds):
        s = read_summary(folder)
        assert (s["status"], s["error"], s["exit_code"]) == ("error", "the data are gone", 2)


@pytest.mark.parametrize("seeds", [1, 2])
def test_a_bug_at_the_start_is_recorded_with_its_traceback(seeds, tmp_path, monkeypatch):
    def bug(cfg):
        raise RuntimeError("a bug")

    monkeypatch.setattr(data, "load_config", bug)
    out = tmp_path / "r"
    assert life(out, seeds) == 3
    assert "RuntimeError: a bug" in (out / "error.log").read_text()
    for folder in folders(out, seeds):
        s = read_summary(folder)
        assert (s["status"], s["exit_code"]) == ("error", 3) and "a bug" in s["error"]


@pytest.mark.parametrize("seeds", [1, 2])
def test_a_resume_builds_with_the_engine_and_compile_choice_it_started_with(
    seeds, tmp_path, monkeypatch
):
    """``engine=auto``, ``compile=auto``: the extension is built with the engine and the compile
    choice its checkpoint recorded, not chosen again."""
    out = tmp_path / "r"
    assert life(out, seeds, "engine=auto", "compile=auto") == 0
    recorded = read_summary(folders(out, seeds)[0])["numerics"]
    built, build = [], experiment.build

    def spy(run, **kw):
        built.append((kw.get("engine"), kw.get("compiled")))
        return build(run, **kw)

    monkeypatch.setattr(experiment, "build", spy)
    assert life(out, seeds, "engine=auto", "compile=auto", "T=3") == 0
    assert built == [(recorded["engine"], recorded["compiled"])] * seeds
    for folder in folders(out, seeds):
        s = read_summary(folder)
        assert s["status"] == "finished" and s["round"] == 3


@pytest.mark.parametrize("seeds", [1, 2])
def test_an_extension_gives_the_numbers_of_a_straight_run_and_a_finished_run_is_said(
    seeds, tmp_path, capsys
):
    out, straight = tmp_path / "r", tmp_path / "straight"
    assert life(out, seeds) == 0
    assert life(out, seeds, "T=4") == 0
    assert life(straight, seeds, "T=4") == 0
    for a, b in zip(folders(out, seeds), folders(straight, seeds)):
        pd.testing.assert_frame_equal(
            pd.read_csv(a / "metrics.csv").drop(columns="time_s"),
            pd.read_csv(b / "metrics.csv").drop(columns="time_s"),
            check_exact=True,
        )
    capsys.readouterr()
    before = {f: (f / "summary.json").read_bytes() for f in folders(out, seeds)}
    assert life(out, seeds, "T=4") == 0  # finished: left alone, said so, with its closing line
    said = capsys.readouterr().out
    for folder in folders(out, seeds):
        assert f"the run in {folder} has already finished its 4 rounds; nothing to do" in said
        assert (folder / "summary.json").read_bytes() == before[folder]
    assert said.count("summary: ") == seeds
