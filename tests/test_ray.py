"""``hydra/launcher=ray`` for real: a Ray started by the launcher on this machine runs 4-job
sweeps (fedprox_cli/cluster/ray_jobs.py). Both sweeps declare the same Ray (2 CPUs and 2
logical GPUs, which Ray accepts without a GPU being there), so it starts once for the module.
Where no GPU is present the runs are on the CPU and their records say so; the same sweep on a
GPU is the last test, skipped without one."""

import importlib.util
import json
import os
import re
import signal
import time
from collections import Counter
from pathlib import Path

import pytest
import torch
from conftest import fedrun, fedrun_process

pytest.importorskip(
    "hydra_plugins.hydra_ray_launcher",
    reason="the [ray] extra (hydra-ray-launcher) is not installed",
)
ray = pytest.importorskip("ray", reason="ray is not installed")

from fedprox_cli.analysis.jobrecords import records  # noqa: E402
from fedprox_cli.cluster import ray_jobs  # noqa: E402
from fedprox_cli.common.errors import UserError  # noqa: E402

TINY = ["dataset=digits", "model=linear", "T=2"]
RAY = [
    "hydra/launcher=ray",
    "hydra.launcher.ray.init.num_cpus=2",
    "hydra.launcher.ray.init.num_gpus=2",
    "hydra.launcher.ray.init.log_to_driver=false",
]


def sweep(tmp: Path, *args: str):
    began = time.perf_counter()
    p = fedrun("-m", *RAY, *TINY, "seed=0,1,2,3", *args, f"hydra.sweep.dir={tmp}", cwd=tmp.parent)
    return (
        p,
        time.perf_counter() - began,
        [Path(r.folder) for r in sorted(records(tmp), key=lambda r: r.num)],
    )


def hardware(folder: Path) -> dict:
    return json.loads((folder / "summary.json").read_text())["hardware"]


@pytest.fixture(scope="module")
def cpu_sweep(tmp_path_factory):
    return sweep(tmp_path_factory.mktemp("ray") / "cpu", "hydra.launcher.ray.remote.num_gpus=0")


@pytest.fixture(scope="module")
def shared_gpus(cpu_sweep, tmp_path_factory):  # after cpu_sweep: the same Ray, started once
    return sweep(
        tmp_path_factory.mktemp("ray") / "gpus",
        "hydra.launcher.ray.remote.num_gpus=0.5",
        "hydra.launcher.ray.remote.num_cpus=0.5",
    )


def test_a_local_ray_runs_a_cpu_sweep(cpu_sweep):
    p, took, jobs = cpu_sweep
    assert p.returncode == 0, p.stderr
    assert "Ray started in" in p.stdout and "sweep: 4 of 4 jobs finished" in p.stdout, p.stderr
    assert len(jobs) == 4
    for job in jobs:
        summary = json.loads((job / "summary.json").read_text())
        assert summary["status"] == "finished" and summary["round"] == 2
        hw = summary["hardware"]
        assert hw["gpu"] == "cpu" and hw["placed_by"] == "ray" and not hw.get("note")
    head, *rows = p.stdout[p.stdout.index("sweep: 4 of 4") :].splitlines()[1:]
    assert [r.split()[head.split().index("gpu")] for r in rows] == ["cpu"] * 4
    print(f"cpu sweep through Ray: {took:.1f} s")


def test_ray_told_of_two_gpus_puts_two_jobs_on_each(shared_gpus):
    """num_gpus=0.5 per job on 2 logical GPUs: Ray gives each job a GPU (CUDA_VISIBLE_DEVICES),
    two jobs per GPU; without CUDA here every run is on the CPU and its record says both."""
    p, took, jobs = shared_gpus
    assert p.returncode == 0, p.stderr
    given = Counter(hardware(j)["cuda_visible_devices"] for j in jobs)
    assert given == {"0": 2, "1": 2}, given
    for job in jobs:
        hw = hardware(job)
        if torch.cuda.is_available():  # a real GPU (there the logical count should match it)
            assert hw["gpu"]["index"] == 0 and hw["gpu"]["name"]
        else:
            assert hw["gpu"] == "cpu" and hw["note"] == (
                f"given GPU {hw['cuda_visible_devices']} (CUDA_VISIBLE_"
                f"DEVICES by ray) but ran on the CPU: CUDA is not available here"
            )
    if not torch.cuda.is_available():
        assert (
            Counter(
                r.split("(given GPU ")[1][0] for r in p.stdout.splitlines() if "(given GPU" in r
            )
            == given
        )
    print(f"shared-GPU sweep through Ray (Ray already up): {took:.1f} s")


def test_a_killed_job_is_reported_and_a_stop_cancels_the_others(shared_gpus, tmp_path):
    """On the module's Ray: a job whose worker is killed is handed back as NaN and recorded with
    Ray's word for it; a job that stops (interrupted) cancels the others and ends the sweep."""

    @ray.remote(num_cpus=0, max_retries=0)
    def job(placed):
        return placed(None)

    def killed(_):
        os.kill(os.getpid(), signal.SIGKILL)

    def interrupted(_):
        raise KeyboardInterrupt  # what fedrun's job does after its run recorded "interrupted"

    def long(_):
        def stop(*_):
            raise KeyboardInterrupt  # as fedrun's job takes SIGTERM

        signal.signal(signal.SIGTERM, stop)
        time.sleep(120)

    (tmp_path / ".fedrun").mkdir()

    def placed(fn, num):
        stop, started = ray_jobs.marks(tmp_path, "test", num)
        return job.remote(ray_jobs.Placed(fn, {}, str(stop), str(started))), started

    stop = ray_jobs.marks(tmp_path, "test", 0)[0]
    folder = tmp_path / "job"
    ref, started = placed(killed, 1)
    (ret,) = ray_jobs.RaySide()._collect(
        [(ref, ["seed=1"], 1, folder, started)], tmp_path, time.time() - 1, stop
    )
    assert ret.return_value != ret.return_value  # NaN
    (rec,) = records(tmp_path)
    assert rec.folder == str(folder) and rec.reason.startswith(
        "ended without a result (Ray: WorkerCrashedError"
    )
    (long_ref, long_started), (stops, stops_started) = placed(long, 2), placed(interrupted, 3)
    while not long_started.exists():  # the long job runs (its worker may take seconds to start)
        time.sleep(0.2)
    began = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        ray_jobs.RaySide()._collect(
            [
                (long_ref, ["seed=2"], 2, None, long_started),
                (stops, ["seed=3"], 3, None, stops_started),
            ],
            tmp_path,
            time.time(),
            stop,
        )
    assert (
        time.perf_counter() - began < 30 and stop.exists()
    )  # the long job was stopped by the stop file


def test_the_launchers_ray_init_and_job_shares():
    assert ray_jobs.init_args({"address": None, "num_cpus": 2, "num_gpus": None}) == {
        "object_store_memory": ray_jobs.OBJECT_STORE_BYTES,
        "include_dashboard": False,
        "num_cpus": 2,
        "address": "local",
    }  # a Ray of its own, even where `ray start` left one running
    assert ray_jobs.init_args({"address": "auto", "num_cpus": None}) == {"address": "auto"}
    with pytest.raises(
        UserError,
        match=r"hydra.launcher.ray.init.num_gpus declares a resource of a Ray started "
        r"here; a running cluster \(address=auto\) has its own",
    ):
        ray_jobs.init_args({"address": "auto", "num_gpus": 2})
    remote = {"num_gpus": "auto", "num_cpus": 1, "max_retries": 0}
    assert ray_jobs.remote_options(remote, {"device": "auto"}, 2.0)["num_gpus"] == 1
    assert ray_jobs.remote_options(remote, {"device": "auto"}, 0.0)["num_gpus"] == 0
    assert (
        ray_jobs.remote_options({**remote, "num_gpus": 0.5}, {"device": "cpu"}, 2.0)["num_gpus"]
        == 0
    )


def test_a_sweeps_output_to_files_is_plain_whole_and_before_the_report(tmp_path):
    """As a user runs it (its own process, a Ray of its own, conf/hydra/launcher/ray.yaml's
    defaults), output to files: each job's start, progress and closing lines from fedrun, once,
    before the report; no colour codes, folded lines, Ray notices or forwarded worker output."""
    p = fedrun_process(
        "-m",
        "hydra/launcher=ray",
        "hydra.launcher.ray.init.num_cpus=2",
        "hydra.launcher.ray.remote.num_gpus=0",
        "dataset=digits",
        "model=linear",
        "T=8",
        "eval_every=2",
        "seed=0,1",
        f"hydra.sweep.dir={tmp_path / 's'}",
        cwd=tmp_path,
    )
    assert p.returncode == 0, p.stderr
    both = p.stdout + p.stderr
    for unwanted in ("\x1b[", "repeated", "Token authentication", "Started a local Ray", "pid="):
        assert unwanted not in both, both
    report = p.stdout.index("sweep: 2 of 2 jobs finished")
    for job in (0, 1):
        assert f"fedrun: job {job}: started, 8 rounds (seed={job})" in p.stderr, p.stderr
        assert re.search(rf"^fedrun: job {job}: round 2/8, ", p.stderr, re.M), p.stderr
        (closing,) = re.findall(rf"^fedrun: job {job}: summary: finished, 8/8 .*$", p.stdout, re.M)
        assert p.stdout.index(closing) < report, p.stdout
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("fedrun: job")]
    assert len(lines) == len(set(lines)), p.stderr  # each once


def test_rays_notice_logger_is_where_fedrun_silences_it():
    assert importlib.util.find_spec(ray_jobs.AUTH_NOTICE) is not None  # a Ray that moved it


@pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no GPU here: the sweep on a real GPU is not run"
)
def test_on_a_gpu_each_run_records_the_gpu_ray_gave_it(tmp_path):
    p = fedrun(
        "-m",
        "hydra/launcher=ray",
        "hydra.launcher.ray.init.log_to_driver=false",
        "hydra.launcher.ray.remote.num_gpus=0.5",
        *TINY,
        "seed=0,1,2,3",
        f"hydra.sweep.dir={tmp_path / 's'}",
        cwd=tmp_path,
    )
    assert p.returncode == 0, p.stderr
    for summary in (tmp_path / "s").glob("*/summary.json"):
        hw = json.loads(summary.read_text())["hardware"]
        assert (
            hw["gpu"]["index"] == 0 and hw["gpu"]["name"] == hw["name"] and hw["placed_by"] == "ray"
        )
