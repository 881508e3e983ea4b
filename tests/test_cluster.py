"""Sweeps beyond one process: submitit launchers (local, and a real SLURM when one runs here:
scripts/slurm_local.sh start), preemption and time limits, fedrun-report, trackers, Optuna.

The SLURM tests skip with a reason where no SLURM answers; CI starts one (.ci/run)."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import in_process
import pandas as pd
import pytest
from conftest import ROOT, child_env, fedrun, job_folders

TINY = ["dataset=digits", "model=linear", "n=4", "K=2", "B=16"]
SLURM = [
    "hydra/launcher=slurm",
    "hydra.launcher.gpus_per_node=0",
    "hydra.launcher.cpus_per_task=1",
    "hydra.launcher.mem_gb=1",
    "hydra.launcher.timeout_min=10",
]
LONG = ["dataset=digits", "model=linear", "eval_every=50", "checkpoint_every=25"]  # ~15 ms a round


def slurm_reason() -> str | None:
    if shutil.which("sbatch") is None:
        return "no SLURM here (sbatch not found; scripts/slurm_local.sh start installs one)"
    ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True)
    if "is UP" not in ping.stdout:
        return (
            "SLURM is installed but its controller does not answer (scripts/slurm_local.sh start)"
        )
    nodes = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True).stdout
    if not any(s.startswith(("idle", "mixed", "alloc", "completing")) for s in nodes.split()):
        return f"no SLURM node takes jobs (sinfo: {' '.join(nodes.split()) or 'no nodes'})"
    return None


_NO_SLURM = slurm_reason()


def needs_slurm(test):
    """Skipped where no SLURM answers; under ``pytest -n``, on one worker, one after another
    (the tests share the queue and the node's cores)."""
    return pytest.mark.xdist_group("slurm")(
        pytest.mark.skipif(_NO_SLURM is not None, reason=str(_NO_SLURM))(test)
    )


def report(*args: str) -> subprocess.CompletedProcess:
    """``python -m fedprox_cli.cli.status ARGS`` (fedrun-report): its ``__main__``, in this process."""
    from fedprox_cli.cli import status
    from fedprox_cli.common import streams

    def main(argv):
        streams.guard()
        sys.exit(status.main(argv))

    return in_process.run(main, status.__file__, list(args), Path.cwd(), child_env())


def summary(run: Path) -> dict:
    return json.loads((run / "summary.json").read_text())


def complete_run_folders(sweep: Path, n: int) -> None:
    jobs = job_folders(sweep)
    assert sorted(
        d for d in sweep.iterdir() if d.is_dir() and not d.name.startswith(".")
    ) == sorted(jobs)
    assert len(jobs) == n
    for d in jobs:
        for f in (
            "config.yaml",
            "metrics.csv",
            "summary.json",
            "metrics.png",
            ".hydra/overrides.yaml",
        ):
            assert (d / f).is_file(), f"{d / f} missing"
        assert summary(d)["status"] == "finished"


def submitit_logs(sweep: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in (sweep / ".submitit").rglob("*_log.*"))


def same_metrics(a: Path, b: Path) -> None:
    x = pd.read_csv(a / "metrics.csv").drop(columns="time_s")
    y = pd.read_csv(b / "metrics.csv").drop(columns="time_s")
    pd.testing.assert_frame_equal(x, y)


# ---- launchers ---------------------------------------------------------------------------


def test_local_launcher_sweep_and_report(tmp_path):
    sweep = tmp_path / "sweep"
    p = fedrun(
        "-m",
        "hydra/launcher=local",
        *TINY,
        "T=4",
        "eval_every=2",
        "seed=0,1",
        f"hydra.sweep.dir={sweep}",
        cwd=tmp_path,
    )
    assert p.returncode == 0, p.stderr
    assert f"sweep: 2 of 2 jobs finished in {sweep}" in p.stdout
    complete_run_folders(sweep, 2)
    r = report(str(sweep))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split()[:3] == ["run", "status", "rounds"] and "seed" in lines[0].split()
    assert [ln.split()[1:3] for ln in lines[1:3]] == [["finished", "4/4"]] * 2
    assert lines[-1] == "2 runs: 2 finished"
    c = report("--csv", str(sweep))
    table = pd.read_csv(pd.io.common.StringIO(c.stdout))
    assert list(table["seed"]) == [0, 1] and list(table["status"]) == ["finished"] * 2


@needs_slurm
def test_slurm_sweep_two_jobs(tmp_path):
    sweep = tmp_path / "sweep"
    p = fedrun(
        "-m",
        *SLURM,
        *TINY,
        "T=4",
        "eval_every=2",
        "seed=0,1",
        f"hydra.sweep.dir={sweep}",
        cwd=tmp_path,
    )
    assert p.returncode == 0, p.stderr
    assert f"sweep: 2 of 2 jobs finished in {sweep}" in p.stdout
    assert "Traceback" not in p.stderr
    complete_run_folders(sweep, 2)
    assert "#SBATCH --job-name=fedrun" in "".join(
        s.read_text() for s in (sweep / ".submitit").rglob("*_submission.sh")
    )


def _start_sweep(tmp_path: Path, *args: str) -> tuple[subprocess.Popen, Path]:
    sweep = tmp_path / "sweep"
    proc = subprocess.Popen(
        [sys.executable, "-m", "fedprox_cli", "-m", *args, f"hydra.sweep.dir={sweep}"],
        cwd=tmp_path,
        env=child_env(PYTHONUNBUFFERED="1"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return proc, sweep


def _wait_rows(sweep: Path, rows: int, timeout: float) -> None:
    """Wait until the first job of the sweep in ``sweep`` has ``rows`` metrics rows."""
    end = time.time() + timeout
    while time.time() < end:
        jobs = job_folders(sweep)
        csv = jobs[0] / "metrics.csv" if jobs else sweep / "none"
        if csv.exists() and len(csv.read_text().splitlines()) > rows:
            return
        time.sleep(0.5)
    raise AssertionError(f"the first job of {sweep} did not reach {rows} rows in {timeout}s")


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """An uninterrupted local run of the requeue test's config, and its training speed."""
    out = tmp_path_factory.mktemp("ref") / "run"
    p = fedrun(*LONG, "T=750", f"hydra.run.dir={out}", cwd=out.parent)
    assert p.returncode == 0, p.stderr
    last = pd.read_csv(out / "metrics.csv").iloc[-1]
    return out, last["round"] / last["time_s"]  # rounds per second of training


@needs_slurm
def test_scontrol_requeue_resumes_to_the_same_metrics(tmp_path, reference):
    ref, _ = reference
    proc, sweep = _start_sweep(tmp_path, *SLURM, *LONG, "T=750")
    try:
        _wait_rows(sweep, 4, timeout=240)  # round 150 done, checkpoints saved
        job = next(d.name for d in (sweep / ".submitit").iterdir() if d.name.isdigit())
        subprocess.run(["scontrol", "requeue", job], check=True)
        out, err = proc.communicate(timeout=420)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "sweep: 1 of 1 jobs finished" in out
    assert "Traceback" not in err
    logs = submitit_logs(sweep)
    assert "fedrun: job 0: stopped by SIGTERM" in logs and "interrupted after round" in logs
    assert summary(job_folders(sweep)[0])["status"] == "finished"
    same_metrics(job_folders(sweep)[0], ref)


@needs_slurm
def test_time_limit_requeues_and_resumes(tmp_path):
    # slurmctld looks for jobs near their limit every 30 s and signals one (SIGUSR2) once it is
    # within signal_delay_s + 30 s of its limit. The job is submitted with the shortest limit the
    # launcher accepts (2 min, which would signal it 60-90 s in: timeout_min=1 could signal a job
    # while Python starts, which kills it; refused, below). Once it trains (its handlers are set,
    # ~10 s in), scontrol cuts its limit to 1 min, so the next check signals it, 0-30 s later.
    # The job checkpoints where it is, submitit requeues it; its limit is back at 2 min before
    # the requeued attempt can start (a requeued job waits 10 s: cred_expire in
    # scripts/slurm_local.sh), which resumes from that round and prints a progress line at its
    # first evaluation (progress_every_s=0). T is out of reach, so nothing here depends on the
    # machine's speed: a T fitted to a measured speed failed both ways (a job faster than its
    # reference finished before its limit; one starved by other load needed 15 requeues and 22
    # minutes). Finishing after a requeue, with the metrics of an uninterrupted run, is
    # test_scontrol_requeue_resumes_to_the_same_metrics's.
    proc, sweep = _start_sweep(
        tmp_path,
        *SLURM,
        "hydra.launcher.timeout_min=2",
        "hydra.launcher.signal_delay_s=30",
        "hydra.launcher.max_num_timeout=30",
        *LONG,
        "T=1000000",
        "eval_every=100",
        "checkpoint_every=50",
        "progress_every_s=0",
    )
    resumed = re.compile(
        r"fedrun: job 0: resuming .* from round (\d+) .*\n(?:.*\n)*fedrun: job 0: round "
    )
    try:
        _wait_rows(sweep, 1, timeout=240)  # training, with its handlers
        job = next(d.name for d in (sweep / ".submitit").iterdir() if d.name.isdigit())
        subprocess.run(["scontrol", "update", f"JobId={job}", "TimeLimit=1"], check=True)
        end, restored = time.time() + 600, False
        while not resumed.search(logs := submitit_logs(sweep)) and time.time() < end:
            assert proc.poll() is None, proc.communicate()[1]
            if not restored and "Caught signal SIGUSR2" in logs:
                subprocess.run(["scontrol", "update", f"JobId={job}", "TimeLimit=2"], check=True)
                restored = True
            time.sleep(0.5)
        subprocess.run(["scancel", job], check=True)
        proc.communicate(timeout=180)
    finally:
        proc.kill()
    assert "Caught signal SIGUSR2" in logs and "Requeued job" in logs, logs[-3000:]
    m = resumed.search(logs)
    assert m, logs[-3000:]
    assert (
        f"fedrun: job 0: interrupted after round {m.group(1)};" in logs
    )  # no round lost to the requeue
    assert summary(job_folders(sweep)[0])["status"] == "interrupted"  # the scancel, after it


def test_time_limit_too_short_for_the_warning_is_refused(tmp_path):
    # no SLURM needed: the launcher's config is checked before anything is submitted or written
    sweep = tmp_path / "sweep"
    p = fedrun(
        "-m",
        *SLURM,
        "hydra.launcher.timeout_min=1",
        "hydra.launcher.signal_delay_s=30",
        *TINY,
        "T=4",
        "seed=0,1",
        f"hydra.sweep.dir={sweep}",
        cwd=tmp_path,
    )
    assert p.returncode == 2 and not sweep.exists()
    assert p.stderr.strip().splitlines() == [
        "fedrun: error: hydra.launcher.timeout_min=1 with signal_delay_s=30: SLURM may send its warning "
        "up to 60 s before signal_delay_s, while a job is still starting, which kills the job without a "
        "requeue; ask for timeout_min >= 2"
    ]
    ok = fedrun(
        "-m",
        *SLURM,
        "hydra.launcher.timeout_min=2",
        "hydra.launcher.signal_delay_s=30",
        *TINY,
        "T=4",
        "seed=0,1",
        f"hydra.sweep.dir={sweep}",
        "dry_run=true",
        cwd=tmp_path,
    )
    assert ok.returncode == 0, ok.stderr


def test_killed_job_is_reported_with_the_launchers_word(tmp_path):
    # a job killed outright (SIGKILL: no handler, no record of its end) is still in the report,
    # with its true status and where its log is, and the sweep's exit code says it failed
    proc, sweep = _start_sweep(tmp_path, "hydra/launcher=local", *LONG, "T=100000")
    try:
        _wait_rows(sweep, 2, timeout=240)
        os.kill(summary(job_folders(sweep)[0])["pid"], signal.SIGKILL)
        out, err = proc.communicate(timeout=180)
    finally:
        proc.kill()
    assert "Traceback" not in err, err
    assert "sweep: 0 of 1 jobs finished" in out and proc.returncode == 2
    name = job_folders(sweep)[0].name
    line = next(ln for ln in err.splitlines() if ln.strip().startswith(name))
    assert line.strip().startswith(f"{name}: dead (ended without a result (its log: .submitit/"), (
        line
    )
    assert line.endswith("_log.err))"), line


@needs_slurm
def test_cancelled_job_still_gets_a_report(tmp_path):
    proc, sweep = _start_sweep(tmp_path, *SLURM, *LONG, "T=100000")
    try:
        _wait_rows(sweep, 2, timeout=240)
        job = next(d.name for d in (sweep / ".submitit").iterdir() if d.name.isdigit())
        subprocess.run(["scancel", job], check=True)
        out, err = proc.communicate(timeout=180)
    finally:
        proc.kill()
    assert "Traceback" not in err, err
    assert "sweep: 0 of 1 jobs finished" in out
    assert "interrupted" in err and proc.returncode == 130
    assert summary(job_folders(sweep)[0])["status"] == "interrupted"
    assert (job_folders(sweep)[0] / "checkpoint.pt").exists()


# ---- the number a job hands to a sweeper; Optuna ----------------------------------------


def test_sweep_value(tmp_path):
    from omegaconf import OmegaConf

    from fedprox_cli.cluster.launchers import sweep_value

    (tmp_path / "summary.json").write_text(
        json.dumps({"status": "finished", "final": {"objective": 0.5, "test_acc": 0.9}})
    )
    cfg = OmegaConf.create({"sweep_metric": "objective"})
    assert sweep_value(cfg, tmp_path, 0) == 0.5
    assert sweep_value(OmegaConf.create({"sweep_metric": "test_acc"}), tmp_path, 0) == 0.9
    assert sweep_value(cfg, tmp_path, 1) == math.inf  # diverged, minimising
    assert sweep_value(OmegaConf.create({"sweep_metric": "test_acc"}), tmp_path, 1) == -math.inf
    assert sweep_value(cfg, tmp_path, 1, direction="maximize") == -math.inf
    assert math.isnan(sweep_value(cfg, tmp_path / "nothing", 130))
    # Optuna's own default is an enum (25.3: "'Direction' object is not iterable"), or a list of them
    from hydra_plugins.hydra_optuna_sweeper.config import Direction

    assert sweep_value(cfg, tmp_path, 1, direction=Direction.maximize) == -math.inf
    assert sweep_value(cfg, tmp_path, 1, direction=Direction.minimize) == math.inf
    assert (
        sweep_value(cfg, tmp_path, 1, direction=OmegaConf.create(["maximize", "minimize"]))
        == -math.inf
    )


def test_optuna_search_survives_a_diverged_trial(tmp_path):
    sweep = tmp_path / "sweep"
    p = fedrun(
        "-m",
        "hparams_search=fedcanon_digits",
        "model=mlp",
        "model.hidden=16",
        "T=6",
        "eval_every=3",
        "hydra.sweeper.n_trials=2",
        "hydra.sweeper.params={algorithm.beta:'choice(0.02,1e3)'}",
        f"hydra.sweep.dir={sweep}",
        cwd=tmp_path,
    )
    assert "Traceback" not in p.stderr, p.stderr
    statuses = sorted(
        summary(d)["status"] for d in sweep.iterdir() if (d / "summary.json").exists()
    )
    assert len(statuses) == 2 and "finished" in statuses
    from omegaconf import OmegaConf

    best = OmegaConf.load(sweep / "optimization_results.yaml")
    assert math.isfinite(best.best_value) and best.best_params["algorithm.beta"] == 0.02
    assert p.returncode == (1 if "diverged" in statuses else 0)


# ---- trackers ----------------------------------------------------------------------------


def scalars(logdir: Path, tag: str) -> list[tuple[int, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    ea = EventAccumulator(str(logdir))
    ea.Reload()
    return [(e.step, e.value) for e in ea.Scalars(tag)]


def test_tensorboard_logs_rows_and_resume_continues_without_duplicates(tmp_path):
    out = tmp_path / "run"
    common = [*TINY, "eval_every=2", "keep_checkpoint=true", f"hydra.run.dir={out}"]
    assert fedrun(*common, "T=4", "logger=tensorboard", cwd=tmp_path).returncode == 0
    assert [s for s, _ in scalars(out / "tensorboard", "test_acc")] == [0, 2, 4]
    # extend the run; the tracker choice is not a config change, so logger=none would resume too
    p = fedrun(*common, "T=8", "logger=tensorboard", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    m = pd.read_csv(out / "metrics.csv")
    got = scalars(out / "tensorboard", "train_loss")
    assert [s for s, _ in got] == list(m["round"]) == [0, 2, 4, 6, 8]
    assert [v for _, v in got] == pytest.approx(list(m["train_loss"]), rel=1e-6)
    p = fedrun(*common, "T=10", "logger=none", cwd=tmp_path)
    assert p.returncode == 0, p.stderr


def test_mlflow_offline(tmp_path):
    pytest.importorskip("mlflow", reason="mlflow is an optional extra (pip install -e '.[mlflow]')")
    out = tmp_path / "run"
    common = [
        *TINY,
        "eval_every=2",
        "logger=mlflow",
        "keep_checkpoint=true",
        f"hydra.run.dir={out}",
    ]
    assert fedrun(*common, "T=4", cwd=tmp_path).returncode == 0
    run_id = json.loads((out / "tracker.json").read_text())["run_id"]
    assert fedrun(*common, "T=6", cwd=tmp_path).returncode == 0  # resumed: the same MLflow run
    assert json.loads((out / "tracker.json").read_text())["run_id"] == run_id
    import mlflow

    os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    client = mlflow.tracking.MlflowClient((out / "mlruns").as_uri())
    assert [m.step for m in client.get_metric_history(run_id, "test_acc")] == [0, 2, 4, 6]
    assert client.get_run(run_id).data.params["algorithm.name"] == "fedcanon"


def test_wandb_offline(tmp_path):
    pytest.importorskip("wandb", reason="wandb is an optional extra (pip install -e '.[wandb]')")
    out = tmp_path / "run"
    common = [*TINY, "eval_every=2", "logger=wandb", "keep_checkpoint=true", f"hydra.run.dir={out}"]
    p = fedrun(*common, "T=4", cwd=tmp_path)
    assert p.returncode == 0 and "wandb:" not in p.stderr, p.stderr
    run_id = json.loads((out / "tracker.json").read_text())["run_id"]
    assert fedrun(*common, "T=6", cwd=tmp_path).returncode == 0  # resumed: the same W&B run
    assert json.loads((out / "tracker.json").read_text()) == {
        "target": "fedprox_cli.runs.trackers.WandB",
        "run_id": run_id,
        "last_round": 6,
    }
    assert len(list((out / "wandb").glob(f"offline-run-*-{run_id}"))) == 2


def test_missing_tracker_package_is_one_line(tmp_path, monkeypatch):
    from fedprox_cli.common.errors import UserError
    from fedprox_cli.config import extras
    from fedprox_cli.runs.trackers import _need

    monkeypatch.setitem(extras.NEEDS, "logger/nosuch", (("no_such_module",), "nosuch"))
    with pytest.raises(
        UserError,
        match=r"^logger=nosuch needs `pip install fedprox_cli\[nosuch\]` .*; "
        r"no_such_module is not installed$",
    ):
        _need("logger/nosuch", "no_such_module")


# ---- fedrun-report -----------------------------------------------------------------------


def test_report_on_a_sweep_whose_launcher_died(tmp_path):
    """A run killed with its launcher (SIGKILL: no chance to record anything) is not listed
    as running (its lock is free), and the job the launcher never started is listed."""
    sweep = tmp_path / "sweep"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fedprox_cli",
            "-m",
            *LONG,
            "T=100000",
            "seed=0,1",
            f"hydra.sweep.dir={sweep}",
        ],
        cwd=tmp_path,
        env=child_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        _wait_rows(sweep, 2, timeout=120)
        assert report(str(sweep)).stdout.splitlines()[1].split()[1] == "running"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    r = report(str(sweep))
    assert r.returncode == 0
    lines = r.stdout.splitlines()
    assert lines[1].split()[1] == "dead"
    assert (
        lines[2].split()[0] == str(sweep / job_folders(sweep)[1].name) and "not started" in lines[2]
    )
    assert lines[-1] == "2 runs: 1 dead, 1 not started"


def test_report_bad_input_is_one_line(tmp_path):
    r = report(str(tmp_path / "nothing"))
    assert r.returncode == 2 and r.stderr.startswith(
        "fedrun-report: error: no such run or sweep folder"
    )


def test_console_scripts_are_declared():
    import tomllib

    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert {"fedrun", "fedrun-report", "fedrun-plot", "fedrun-table"} <= set(scripts)
    for entry in ("fedprox_cli.cli.commands:plot", "fedprox_cli.cli.commands:table"):
        module, func = entry.split(":")
        p = subprocess.run(
            [
                sys.executable,
                "-c",
                f"import sys; sys.argv=['x', '--help']; from {module} import {func}; {func}()",
            ],
            env=child_env(),
            capture_output=True,
            text=True,
        )
        assert p.returncode == 0 and "usage:" in p.stdout


def test_rays_output_settings(monkeypatch):
    """Where fedrun configures Ray's output (fedprox_cli/cluster/ray_jobs.py; no Ray needed):
    plain, unfolded forwarded lines off a terminal, the user's own values kept; no token-auth
    notice for a Ray started here; conf/hydra/launcher/ray.yaml's workers' output kept in their
    folders and Ray's info notes off, for a Ray started here or a cluster."""
    import logging

    from omegaconf import OmegaConf

    from fedprox_cli.cluster import ray_jobs
    from fedprox_cli.common.package import CONF_DIR

    plain = {"RAY_COLOR_PREFIX": "0", "RAY_DEDUP_LOGS": "0"}
    assert ray_jobs.output_settings(terminal=False) == plain
    assert ray_jobs.output_settings(terminal=True) == {}
    monkeypatch.setenv("RAY_DEDUP_LOGS", "1")
    monkeypatch.delenv("RAY_COLOR_PREFIX", raising=False)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: False, raising=False)
    ray_jobs.plain_output()
    assert os.environ["RAY_COLOR_PREFIX"] == "0" and os.environ["RAY_DEDUP_LOGS"] == "1"
    notices = logging.getLogger(ray_jobs.AUTH_NOTICE)
    before = notices.level
    with ray_jobs.no_auth_notice(local=True):
        assert not notices.isEnabledFor(logging.WARNING) and notices.isEnabledFor(logging.ERROR)
    assert notices.level == before
    with ray_jobs.no_auth_notice(local=False):  # a cluster's authentication is its own to report
        assert notices.level == before
    init = OmegaConf.load(CONF_DIR / "hydra" / "launcher" / "ray.yaml").ray.init
    quiet = {"log_to_driver": False, "logging_level": "warning"}
    assert ray_jobs.init_args(init).items() >= quiet.items()
    assert ray_jobs.init_args({**init, "address": "auto"}) == {"address": "auto", **quiet}
