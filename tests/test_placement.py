"""Where a job runs without Ray: fedrun's rule (fedprox_cli/engine/device.py) -- ``auto`` and
``cuda`` take visible GPU ``job mod G``, ``cuda:K`` and ``cpu`` as given -- tried with a
made-up count of visible GPUs (torch.cuda's answers stood in for: no GPU is used), and what a
run records of the GPU it ran on, the closing table and a dry run show."""

import json
from types import SimpleNamespace

import pytest
import torch
from conftest import fedrun
from hydra.conf import HydraConf
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import OmegaConf

from fedprox_cli.cli import jobtable
from fedprox_cli.common.errors import UserError
from fedprox_cli.config.schema import sweep_job
from fedprox_cli.engine.device import gpu_record, placement, resolve_device

TINY = ["dataset=digits", "model=linear", "T=2"]


@pytest.fixture
def gpus(monkeypatch):
    """``gpus(G)``: this process sees G GPUs (0: no CUDA), as torch.cuda would say."""

    def see(count: int):
        monkeypatch.setattr(torch.cuda, "is_available", lambda: count > 0)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
        monkeypatch.setattr(
            torch.cuda,
            "get_device_properties",
            lambda d: SimpleNamespace(name="NVIDIA H100 80GB HBM3", total_memory=85_045_477_376),
        )

    return see


def test_auto_and_cuda_spread_jobs_over_the_visible_gpus(gpus):
    gpus(4)
    assert [resolve_device("auto", job) for job in range(6)] == [
        torch.device("cuda", k) for k in (0, 1, 2, 3, 0, 1)
    ]
    assert [resolve_device("cuda", job).index for job in (2, 7)] == [2, 3]
    assert (
        resolve_device("auto") == resolve_device("cuda") == torch.device("cuda", 0)
    )  # a single run
    assert placement("auto", 6) == "device=auto, job 6 mod 4 visible GPUs: cuda:2"


def test_a_job_ray_placed_sees_one_gpu_and_takes_it(gpus):
    gpus(1)  # Ray set CUDA_VISIBLE_DEVICES to the job's GPU
    assert [resolve_device("auto", job) for job in range(3)] == [torch.device("cuda", 0)] * 3


def test_cuda_k_and_cpu_are_taken_as_given(gpus):
    gpus(4)
    assert [resolve_device("cuda:3", job) for job in (0, 1, 2)] == [torch.device("cuda", 3)] * 3
    assert resolve_device("cpu", 1) == torch.device("cpu")
    assert (
        placement("cuda:3", 1) == "device=cuda:3 as given"
        and placement("cpu", 1) == "device=cpu as given"
    )
    with pytest.raises(
        UserError, match=r"device=cuda:4 requested but this process sees 4 GPUs \(cuda:0..cuda:3"
    ):
        resolve_device("cuda:4", 0)
    with pytest.raises(UserError, match="device must be auto, cpu, cuda or cuda:K"):
        resolve_device("cuda:x", 0)


def test_without_cuda_auto_is_the_cpu_and_cuda_is_refused(gpus):
    gpus(0)
    assert resolve_device("auto", 3) == torch.device("cpu")
    assert placement("auto", 3) == "no CUDA here: cpu"
    for name in ("cuda", "cuda:0"):
        with pytest.raises(
            UserError, match=f"device={name} requested but CUDA is not available here"
        ):
            resolve_device(name, 1)


def test_the_job_number_is_hydras_in_a_sweep_only():
    saved = HydraConfig.instance().cfg
    try:
        for mode, num, expected in ((RunMode.MULTIRUN, 5, 5), (RunMode.RUN, 0, None)):
            hc = OmegaConf.structured(HydraConf)
            hc.mode, hc.job.num = mode, num
            HydraConfig.instance().set_config(OmegaConf.create({"hydra": hc}))
            assert sweep_job() == expected
    finally:
        HydraConfig.instance().cfg = saved


def test_the_record_names_the_gpu_and_a_gpu_given_but_not_usable(gpus, monkeypatch):
    gpus(2)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,6")
    monkeypatch.delenv("FEDRUN_PLACED_BY", raising=False)
    assert gpu_record(torch.device("cuda", 1), "NVIDIA H100 80GB HBM3") == {
        "gpu": {"index": 1, "name": "NVIDIA H100 80GB HBM3"},
        "cuda_visible_devices": "4,6",
        "placed_by": None,
    }
    gpus(
        0
    )  # Ray told of GPUs that are not here: it assigns one, the run is on the CPU, and says so
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    monkeypatch.setenv("FEDRUN_PLACED_BY", "ray")
    assert gpu_record(torch.device("cpu")) == {
        "gpu": "cpu",
        "cuda_visible_devices": "1",
        "placed_by": "ray",
        "note": "given GPU 1 (CUDA_VISIBLE_DEVICES by ray) but ran on the CPU: CUDA is not available here",
    }


@pytest.mark.parametrize(
    "hardware, shown",
    [
        (
            {"gpu": {"index": 1, "name": "NVIDIA H100 80GB HBM3"}, "cuda_visible_devices": None},
            "1 (H100 80GB HBM3)",
        ),
        (
            {"gpu": {"index": 1, "name": "NVIDIA A100-SXM4-40GB"}, "cuda_visible_devices": "4,6"},
            "6 (A100-SXM4-40GB)",
        ),
        (
            {"gpu": "cpu", "cuda_visible_devices": "1", "note": "given GPU 1 ..."},
            "cpu (given GPU 1)",
        ),
        ({"gpu": "cpu", "cuda_visible_devices": None}, "cpu"),
        ({"name": "an older run's record"}, "-"),
    ],
)
def test_the_closing_table_shows_the_gpu(tmp_path, hardware, shown):
    (tmp_path / "summary.json").write_text(json.dumps({"status": "finished", "hardware": hardware}))
    assert jobtable.gpu(tmp_path) == shown


def test_a_sweep_records_and_shows_where_each_job_ran_and_a_dry_run_says_where_it_would(
    tmp_path, gpus
):
    """A real 2-job sweep (seeds=2 batches, on the CPU here) records cpu and shows it; the dry
    run of the same sweep on a machine that sees 2 GPUs lists job k on cuda:(k mod 2)."""
    sweep = tmp_path / "s"
    p = fedrun(
        "-m", *TINY, "device=cpu", "seeds=2", "n=5,6", f"hydra.sweep.dir={sweep}", cwd=tmp_path
    )
    assert p.returncode == 0, p.stderr
    head, *rows = p.stdout[p.stdout.index("sweep: 2 of 2 jobs finished") :].splitlines()[1:]
    gpu = head.split().index("gpu")
    assert len(rows) == 4 and all(r.split()[gpu] == "cpu" for r in rows), (
        p.stdout
    )  # a row per seed run
    for summary in sweep.glob("*/seed_*/summary.json"):
        assert json.loads(summary.read_text())["hardware"]["gpu"] == "cpu"
    gpus(2)
    p = fedrun(
        "-m", *TINY, "seed=0,1,2", "dry_run=true", f"hydra.sweep.dir={tmp_path / 'd'}", cwd=tmp_path
    )
    assert p.returncode == 0, p.stderr
    said = [f"device=auto, job {k} mod 2 visible GPUs: cuda:{k % 2}" for k in range(3)]
    assert all(s in p.stdout for s in said), p.stdout
    p = fedrun(
        "-m",
        *TINY,
        "seed=0,1",
        "device=cpu",
        "dry_run=true",
        f"hydra.sweep.dir={tmp_path / 'd'}",
        cwd=tmp_path,
    )
    assert p.stdout.count("device=cpu as given") == 2, p.stdout
