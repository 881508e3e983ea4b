"""One reader of a run folder (fedprox_cli/runs/view.py): a run's status is derived there and
nowhere else, run folders are found there and nowhere else, and the records of a run are made
from its view."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from fedprox_cli.analysis import results
from fedprox_cli.cli import status as report
from fedprox_cli.runs import recap, run_folder, view
from fedprox_cli.runs.lock import RunLock

PKG = Path(view.__file__).resolve().parent.parent


def summary(folder: Path, body) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "summary.json").write_text(body if isinstance(body, str) else json.dumps(body))
    return folder


@pytest.mark.parametrize(
    "body, status",
    [
        ({"status": "finished"}, "finished"),
        ({"status": "diverged", "error": "x"}, "diverged"),
        ({"status": "running"}, "dead"),  # no process holds its lock
        ({"round": 3}, "missing"),
        ('{"status": "fini', "unreadable"),  # cut short
        ({"status": 5}, "unreadable"),  # a status that is no word
    ],
)
def test_the_status_is_derived_from_the_summary_and_the_lock(tmp_path, body, status):
    run = summary(tmp_path / "r", body)
    v = view.read(run)
    assert v.status == status
    assert recap.record(run).status == ("not started" if status == "missing" else status)
    assert (v.fault is not None) == (status == "unreadable")
    assert recap.record(run).error == v.error


def test_a_run_whose_lock_is_held_is_running_and_its_start_reads_what_it_recorded(tmp_path):
    run = summary(tmp_path / "r", {"status": "running"})
    with RunLock(run):
        assert view.status(run) == "running"
    held = run_folder.read(run)
    assert isinstance(held, view.RunView)  # the start's record is a view of the folder
    assert (held.recorded, held.status, held.cut_short) == ("running", "dead", True)


def test_no_summary_and_no_folder_are_missing(tmp_path):
    assert view.status(tmp_path) == "missing"
    assert view.status(tmp_path / "gone") == "missing"
    assert view.runs_in(tmp_path / "gone") == []


def test_a_run_folder_holds_one_of_its_marks_and_a_job_its_seed_runs(tmp_path):
    for name in ("summary.json", "config.yaml", "metrics.csv"):
        (tmp_path / name.split(".")[0]).mkdir()
        (tmp_path / name.split(".")[0] / name).write_text("{}")
    job = tmp_path / "job"
    for s in (2, 10):
        summary(job / f"seed_{s}", {"status": "finished"})
    (job / "seed_3").mkdir()  # not started: no run yet
    (job / ".hydra").mkdir()
    summary(tmp_path / "kept" / ".kept", {"status": "finished"})  # a kept copy: no run
    (tmp_path / "sweep").mkdir()
    (tmp_path / "sweep" / "multirun.yaml").write_text("hydra: {}\n")
    found = [
        (d.relative_to(tmp_path).as_posix(), view.is_run(n))
        for d, n in view.find([tmp_path], print)
    ]
    assert found == [
        ("config", True),
        ("job/seed_10", True),
        ("job/seed_2", True),
        ("metrics", True),
        ("summary", True),
        ("sweep", False),
    ]
    assert view.runs_in(job) == [job / "seed_2", job / "seed_10"]
    assert view.seed_folders(job) == [job / "seed_2", job / "seed_3", job / "seed_10"]
    assert view.runs_in(tmp_path / "summary") == [tmp_path / "summary"]


def test_the_commands_find_the_same_run_folders(tmp_path):
    """fedrun-report and the analysis (fedrun-plot, -table, the claims) list the same folders."""
    for i in range(2):
        run = summary(tmp_path / f"r{i}", {"status": "finished", "round": 1, "T": 1})
        (run / "config.yaml").write_text("T: 1\n")
        (run / "metrics.csv").write_text("round,test_acc\n0,0.5\n")
    started = summary(tmp_path / "started", {"status": "interrupted"})
    skipped: list[results.Skipped] = []
    found = results.find_runs([tmp_path], skipped=skipped.append)
    assert found == [tmp_path / "r0", tmp_path / "r1"]
    assert [(s.path, s.status) for s in skipped] == [(started, "interrupted")]
    assert report.find([tmp_path]) == [tmp_path / "r0", tmp_path / "r1", started]


def _calls(name: str) -> set[str]:
    """The modules of the package that call a function named ``name`` (``scan.walk``: that
    module's function, called through its module's name)."""
    return {
        path.relative_to(PKG).as_posix()
        for path in PKG.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        and (ast.unparse(node.func) == name or ast.unparse(node.func).endswith(f".{name}"))
    }


def test_the_status_and_the_finder_are_in_the_view_only():
    """Only runs/view.py asks whether a run's lock is held to tell its status, and only it
    walks folders for runs (common/scan.py's walk)."""
    assert _calls("is_held") == {"runs/view.py"}
    assert _calls("scan.walk") == {"runs/view.py"}
    assert _calls("read_summary_checked") == {"runs/view.py"}
