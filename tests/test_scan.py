"""What analysis reads is what the folder holds: a moved or copied sweep reports its own jobs
once and nothing outside it; every folder skipped is named with its reason and the rest shown;
no OSError while scanning is a traceback; a summary of wrong types is corrupt, not "not
started"; a metrics.csv too wide is refused before it is read."""

from __future__ import annotations

import errno
import json
import os
import shutil
from pathlib import Path

import pytest

from fedprox_cli.analysis import jobrecords, results
from fedprox_cli.analysis.jobrecords import JobRecord
from fedprox_cli.cli import status
from fedprox_cli.common import run_files


def run_folder(d: Path, n: int, summary: dict | None = None) -> Path:
    d.mkdir(parents=True)
    (d / "config.yaml").write_text(json.dumps({"n": n, "T": 5, "seed": 0}))
    (d / "metrics.csv").write_text(f"round,test_acc\n0,0.1\n5,0.{n}\n")
    body = summary if summary is not None else {"status": "finished", "round": 5, "T": 5}
    (d / "summary.json").write_text(json.dumps(body))
    return d


def sweep(root: Path) -> Path:
    """A sweep of two jobs in ``root``, recorded as fedrun records them."""
    root.mkdir(parents=True)
    (root / "multirun.yaml").write_text("hydra: {}\n")
    for num, n in enumerate((3, 4)):
        job = run_folder(root / f"n={n}", n)
        rec = JobRecord(num, [f"n={n}"], os.path.abspath(job), 0, "finished")
        jobrecords.write(root, rec)
    return root


def report(*paths) -> tuple[list[dict], list[str]]:
    lines: list[str] = []
    _, rows = status.rows(list(paths), lines)
    return rows, lines


def test_a_moved_sweep_reports_its_jobs_once(tmp_path):
    s = sweep(tmp_path / "S")
    moved = tmp_path / "elsewhere" / "M"
    moved.parent.mkdir()
    shutil.move(s, moved)
    rows, lines = report(moved)
    assert [(r["run"], r["status"]) for r in rows] == [
        (str(moved / "n=3"), "finished"),
        (str(moved / "n=4"), "finished"),
    ]
    assert lines == []


def test_a_copied_sweep_reports_its_own_folders_not_the_originals(tmp_path):
    s = sweep(tmp_path / "S")
    copy = tmp_path / "C"
    shutil.copytree(s, copy)
    (s / "n=4" / "summary.json").write_text(json.dumps({"status": "error", "error": "x"}))
    rows, _ = report(copy)
    assert [(r["run"], r["status"]) for r in rows] == [
        (str(copy / "n=3"), "finished"),
        (str(copy / "n=4"), "finished"),
    ]
    runs = results.load([copy])
    assert sorted(str(r.path) for r in runs) == [str(copy / "n=3"), str(copy / "n=4")]


def test_a_job_outside_a_moved_sweep_is_named_not_read(tmp_path):
    s = tmp_path / "S"
    s.mkdir()
    (s / "multirun.yaml").write_text("hydra: {}\n")
    outside = run_folder(tmp_path / "jobs" / "n=3", 3)
    jobrecords.write(s, JobRecord(0, ["n=3"], str(outside), 0, "finished"))
    run_folder(s / "n=4", 4)
    assert str(outside) in [r["run"] for r in report(s)[0]]  # where it ran: anywhere
    moved = tmp_path / "M"
    shutil.move(s, moved)
    rows, lines = report(moved)
    assert [r["run"] for r in rows] == [str(moved / "n=4")]
    assert lines == [
        f"skipped job 0 of {moved}: its record names {outside}, which lies outside this sweep "
        f"folder, moved or copied since it ran in {s}"
    ]


@pytest.fixture
def deny(monkeypatch):
    """``deny()``: from then on folders named ``DENY...`` (and every sweep's job records) cannot
    be listed or opened: another user's, as a root test process cannot make them."""
    return lambda: _deny(monkeypatch)


def _deny(monkeypatch) -> None:
    scandir, open_ = os.scandir, os.open

    def deny(p):
        if "DENY" in os.fsdecode(p) or os.fsdecode(p).endswith(str(jobrecords.RECORDS)):
            raise PermissionError(errno.EACCES, "Permission denied", os.fsdecode(p))

    monkeypatch.setattr(os, "scandir", lambda p=".": deny(p) or scandir(p))
    monkeypatch.setattr(os, "open", lambda p, *a, **k: deny(p) or open_(p, *a, **k))


def test_a_folder_that_cannot_be_listed_is_named_and_the_rest_shown(tmp_path, deny):
    s = sweep(tmp_path / "S")
    shutil.move(s / "n=4", s / "DENY")
    deny()
    rows, lines = report(s)
    assert [r["run"] for r in rows] == [str(s / "n=3")]
    assert lines == [
        f"the job records in {s / '.fedrun' / 'jobs'} cannot be read (Permission denied): the "
        f"sweep's jobs are listed from the folders it holds",
        f"skipped {s / 'DENY'}: it cannot be listed (Permission denied)",
    ]
    warned: list[str] = []
    runs = results.load([s / "DENY", s / "n=3"], warn=warned.append)  # one named run unreadable
    assert [r.path for r in runs] == [s / "n=3"]
    assert warned == [f"skipped {s / 'DENY'}: it cannot be listed (Permission denied)"]


@pytest.fixture
def deep(tmp_path, monkeypatch):
    """``tmp_path/S/a/a/...``, 1500 folders deep, removed from the bottom up afterwards (a
    recursive removal, pytest's own, would exhaust Python's recursion)."""
    monkeypatch.chdir(tmp_path)
    os.mkdir("S")
    os.chdir("S")
    for _ in range(1500):
        os.mkdir("a")
        os.chdir("a")
    os.chdir(tmp_path)
    yield tmp_path / "S"
    os.chdir(tmp_path / "S")
    for _ in range(1500):
        os.chdir("a")
    for _ in range(1500):
        os.chdir("..")
        os.rmdir("a")
    os.chdir(tmp_path)


def test_a_folder_1500_deep_is_scanned_without_a_traceback(deep):
    run_folder(deep / "n=3", 3)
    rows, lines = report(deep)
    assert [r["run"] for r in rows] == [str(deep / "n=3")] and lines == []
    assert [r.path for r in results.load([deep])] == [deep / "n=3"]


def test_a_summary_of_wrong_types_is_corrupt_not_a_run_not_started(tmp_path):
    d = run_folder(tmp_path / "r", 3, {"status": 5, "round": "five"})
    rows, lines = report(d)
    assert rows[0]["status"] == "unreadable"
    why = f"{d / 'summary.json'} is corrupt: its field 'status' is a int, not a str"
    assert lines == [why]
    warned: list[str] = []
    with pytest.raises(Exception, match="no readable run"):
        results.load([d], warn=warned.append)
    assert warned == [f"skipped {d}: {why}"]


def test_a_metrics_csv_too_wide_is_refused_before_it_is_read(tmp_path, monkeypatch):
    d = run_folder(tmp_path / "r", 3)
    (d / "metrics.csv").write_text("round," + ",".join(f"c{i}" for i in range(20_000)) + "\n")
    read = []
    monkeypatch.setattr(run_files.guarded, "read_bytes", lambda *a: read.append(a))
    with pytest.raises(run_files.RunFileError) as e:
        run_files.read_metrics(d)
    assert str(e.value) == (
        f"{d / 'metrics.csv'} is too wide: 20,001 columns, more than the 10,000 a metrics table "
        f"may have; not read"
    )
    (d / "metrics.csv").write_text("round," + "c," * 600_000 + "\n")  # a header of 1.2 MB
    with pytest.raises(run_files.RunFileError, match="its header is longer than 1,048,576 bytes"):
        run_files.read_metrics(d)
    assert read == []


def test_the_jobs_of_a_sweep_that_never_started_are_named_by_every_analysis_command(
    tmp_path, capsys
):
    """A job stopped before it started leaves a folder with a lock and a log but no
    summary.json, or no folder at all: fedrun-table and fedrun-plot skip it with a line naming
    it and why, fedrun-report shows it as a row ``not started``."""
    from fedprox_cli.cli import plot, table

    s = sweep(tmp_path / "S")
    (s / "n=5").mkdir()
    for name in (run_files.LOCK, run_files.LOG):
        (s / "n=5" / name).write_text("")
    jobrecords.write(s, JobRecord(2, ["n=5"], os.path.abspath(s / "n=5")))
    jobrecords.write(s, JobRecord(3, ["n=6"], os.path.abspath(s / "n=6")))
    skipped = [
        f"skipped {s / 'n=5'}: not started: no summary.json (its folder holds .fedrun.lock, "
        f"fedrun.log)",
        f"skipped {s / 'n=6'}: not started: no summary.json (no folder)",
    ]
    warned: list[str] = []
    assert [r.path for r in results.load([s], warn=warned.append)] == [s / "n=3", s / "n=4"]
    assert warned == skipped
    for command, main, args in (
        ("fedrun-table", table.main, ["--column", "n"]),
        ("fedrun-plot", plot.main, ["--out", str(tmp_path / "acc.png")]),
    ):
        assert main([str(s), *args]) == 0
        assert capsys.readouterr().err.splitlines() == [f"{command}: {line}" for line in skipped]
    rows, lines = report(s)
    assert [(r["run"], r["status"]) for r in rows] == [
        (str(s / "n=3"), "finished"),
        (str(s / "n=4"), "finished"),
        (str(s / "n=5"), "not started"),
        (str(s / "n=6"), "not started"),
    ]
    assert lines == []


def test_a_run_stopped_before_its_summary_is_named_outside_any_sweep(tmp_path, capsys):
    """A folder fedrun locked for a run that stopped before its summary.json (its lock and log
    only; no sweep records it) is skipped by fedrun-table and fedrun-plot with a line saying
    why, and is a row ``not started`` in fedrun-report (``running`` while a process holds its
    lock: a run starting); a seed batch's own folder (its log and Hydra's record, its runs
    below it) and a folder holding only a log are no runs, named nowhere."""
    from fedprox_cli.cli import plot, table
    from fedprox_cli.runs import view
    from fedprox_cli.runs.lock import RunLock

    root = tmp_path / "R"
    a, b = run_folder(root / "a", 3), run_folder(root / "b", 4)
    stopped = root / "stopped"
    stopped.mkdir()
    for name in (run_files.LOCK, run_files.LOG):
        (stopped / name).write_text("")
    batch = root / "batch"
    (batch / run_files.HYDRA).mkdir(parents=True)
    (batch / run_files.LOG).write_text("")
    seed = run_folder(batch / "seed_0", 5)
    (root / "notes").mkdir()
    (root / "notes" / run_files.LOG).write_text("")
    line = (
        f"skipped {stopped}: not started: no summary.json (its folder holds .fedrun.lock, "
        f"fedrun.log)"
    )
    warned: list[str] = []
    assert [r.path for r in results.load([root], warn=warned.append)] == [a, b, seed]
    assert warned == [line]
    for command, main, args in (
        ("fedrun-table", table.main, ["--column", "n"]),
        ("fedrun-plot", plot.main, ["--out", str(tmp_path / "acc.png")]),
    ):
        assert main([str(root), *args]) == 0
        assert capsys.readouterr().err.splitlines() == [f"{command}: {line}"]
    rows, lines = report(root)
    assert [(r["run"], r["status"]) for r in rows] == [
        (str(a), "finished"),
        (str(b), "finished"),
        (str(seed), "finished"),
        (str(stopped), "not started"),
    ]
    assert lines == []
    with RunLock(stopped):
        assert view.status(stopped) == view.RUNNING
        assert [r["status"] for r in report(stopped)[0]] == [view.RUNNING]
        warned.clear()
        results.load([root], warn=warned.append)
        assert warned == [f"skipped {stopped}: no metrics.csv (status: running)"]
