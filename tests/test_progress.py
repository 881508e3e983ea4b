"""Progress while runs and sweeps' jobs run (fedprox_cli/runs/progress.py,
fedprox_cli/cli/watch.py): the lines' cadence, and a sweep's per-job lines under the basic and
joblib launchers with output to files (Ray's: tests/test_ray.py; submitit's:
tests/test_cluster.py)."""

import re
from pathlib import Path

import pytest
from conftest import fedrun, said

from fedprox_cli.analysis.jobrecords import JobRecord
from fedprox_cli.cli import watch
from fedprox_cli.common import streams
from fedprox_cli.runs import progress
from fedprox_cli.runs.outputs import Summary

TINY = ["dataset=digits", "model=linear", "n=4", "K=2", "B=16"]
ROW = {"train_loss": 0.5, "objective": 0.6, "test_acc": 0.9}
PROGRESS = (
    r"round (\d+)/(\d+), [\d.hms]+ elapsed, ~[\d.hms]+ left; loss \S+, objective \S+, acc \S+"
)


def test_lines_come_at_the_first_evaluation_then_at_doubling_intervals(monkeypatch):
    clock = [100.0]
    said: list[str] = []
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(progress, "say", said.append)
    monkeypatch.delenv(progress.WATCHED, raising=False)
    p = progress.Progress(T=1000, start=0, bar=False, every_s=30)
    rounds = {}
    for done in range(1, 1000):  # an evaluation a second
        clock[0] += 1.0
        p.evaluated(done, ROW)
        if said and said[-1] not in rounds:
            rounds[said[-1]] = done
    at = sorted(rounds.values())
    assert at[:6] == [1, 6, 16, 36, 66, 96]  # the first, then 5, 10, 20, 30, 30 s later
    assert all(b - a == 30 for a, b in zip(at[4:], at[5:]))
    assert p.latest.startswith(f"round {at[-1]}/1000, {progress.duration(at[-1])} elapsed, ~")
    every = progress.Progress(T=10, start=0, bar=False, every_s=0)
    said.clear()
    for done in range(1, 4):
        every.evaluated(done, ROW)  # no time passes: every evaluation still gets its line
    assert len(said) == 3
    every.evaluated(10, ROW)  # round T: the closing line follows and says it
    assert len(said) == 3 and every.latest.startswith("round 3/10")


def test_a_job_is_watched_only_where_its_stderr_is_the_watchers(monkeypatch, tmp_path):
    with open(tmp_path / "a", "w") as a, open(tmp_path / "b", "w") as b:
        monkeypatch.setattr(streams.sys, "stderr", a)
        monkeypatch.setenv(progress.WATCHED, streams.identity(a))
        assert progress.watched()
        monkeypatch.setenv(progress.WATCHED, streams.identity(b))
        assert not progress.watched()  # a SLURM log, a Ray worker's file: the job prints too
        monkeypatch.delenv(progress.WATCHED)
        assert not progress.watched()


def _sweep(tmp_path: Path, *args: str, T: int = 40):
    sweep = tmp_path / "sweep"
    p = fedrun(
        "-m",
        *TINY,
        f"T={T}",
        "eval_every=4",
        "checkpoint_every=4",
        "keep_checkpoint=true",
        "seed=0,1",
        *args,
        f"hydra.sweep.dir={sweep}",
        cwd=tmp_path,
    )
    assert p.returncode == 0, p.stderr
    return p, sweep


def _check_lines(p, T: int) -> None:
    """Each job: its start and a first progress line (its first evaluation, round 4) on stderr,
    its closing line on stdout, all before the report; every stderr line whole."""
    report = p.stdout.index("sweep: 2 of 2 jobs finished")
    for job in (0, 1):
        start = f"fedrun: job {job}: started, {T} rounds (seed={job})"
        assert start in p.stderr.splitlines(), p.stderr
        lines = re.findall(rf"^fedrun: job {job}: {PROGRESS}$", p.stderr, re.M)
        assert lines and lines[0][1] == str(T), p.stderr
        assert all(done != str(T) for done, _ in lines), p.stderr  # round T: the closing line
        closing = re.findall(
            rf"^fedrun: job {job}: summary: finished, {T}/{T} rounds", p.stdout, re.M
        )
        assert len(closing) == 1 and p.stdout.index(closing[0]) < report, p.stdout
    assert "fedrun: summary:" not in p.stdout  # the jobs leave their closing lines to the watcher
    jobs = [ln for ln in p.stderr.splitlines() if ln.startswith("fedrun: job")]
    assert len(jobs) == len(set(jobs)), p.stderr  # each line once: not by the job and the watcher
    known = re.compile(
        rf"^fedrun: job \d: ({PROGRESS}|started, .*|resumed at .*|engine: .*|compile: .*)$"
    )
    stray = [ln for ln in said(p.stderr) if not known.match(ln)]
    assert not stray, p.stderr


def test_a_basic_sweep_says_each_jobs_start_progress_and_end(tmp_path):
    p, sweep = _sweep(tmp_path)
    _check_lines(p, 40)
    first = re.search(rf"^fedrun: job 0: ({PROGRESS})$", p.stderr, re.M)
    assert first.group(2) == "4"  # at the first evaluation, not after progress_every_s
    log = next(sweep.glob("*seed=0_*/fedrun.log")).read_text()
    assert first.group(1) in log  # the job's own log has its lines


def test_joblib_jobs_lines_come_from_the_launching_process(tmp_path):
    pytest.importorskip("hydra_plugins.hydra_joblib_launcher", reason="the [cluster] extra")
    joblib = ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]
    p, _ = _sweep(tmp_path, *joblib)
    _check_lines(p, 40)


def test_the_watch_says_what_changed_in_the_sweep_and_nothing_else(tmp_path, capsys):
    """A job left finished by an earlier sweep is not announced; one resumed says from which
    round, then its progress line once, then its closing line once."""
    done, resumed = tmp_path / "done", tmp_path / "resumed"
    for folder in (done, resumed):
        folder.mkdir()
        Summary(folder, T=48).end("finished", started="earlier", round=40)
    jobs = [JobRecord(0, ["seed=0"], str(done)), JobRecord(1, ["seed=1"], str(resumed))]
    w = watch.Watch(tmp_path, jobs)
    w.poll()
    s = Summary(resumed, T=48)
    s.start(round=40, started_round=40)
    s.beat(force=True, round=44, progress="round 44/48, 1.0s elapsed, ~1.0s left; loss 1")
    w.poll()
    w.poll()
    s.end("finished", round=48)
    w.poll()
    w.poll()
    out, err = capsys.readouterr()
    assert err.splitlines() == [
        "fedrun: job 1: resumed at round 40 of 48 rounds (seed=1)",
        "fedrun: job 1: round 44/48, 1.0s elapsed, ~1.0s left; loss 1",
    ]
    assert re.fullmatch(rf"fedrun: job 1: summary: finished, 48/48 rounds: .*; {resumed}\n", out)


def test_a_seed_batched_jobs_runs_are_named_by_seed(tmp_path):
    p = fedrun(
        "-m",
        *TINY,
        "T=8",
        "eval_every=2,4",
        "seed=0",
        "seeds=2",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        cwd=tmp_path,
    )
    assert p.returncode == 0, p.stderr
    report = p.stdout.index("sweep: 2 of 2 jobs finished")
    for job, every in ((0, 2), (1, 4)):
        for seed in (0, 1):
            run = f"fedrun: job {job}: seed {seed}:"
            assert f"{run} started, 8 rounds (eval_every={every})" in p.stderr, p.stderr
            assert re.search(rf"^{run} round {every}/8, ", p.stderr, re.M), p.stderr
            closing = p.stdout.index(f"{run} summary: finished, 8/8 rounds")
            assert closing < report, p.stdout
