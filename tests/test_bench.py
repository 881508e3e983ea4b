"""The benchmark's accounting (fedprox_cli/runs/bench.py, roofline.py): the roofline replays
exactly the step's products, and the sweep estimate counts rounds and evaluations."""

import pytest
import torch

from fedprox_cli.common.errors import UserError
from fedprox_cli.runs import bench, roofline


def test_roofline_replays_the_steps_products():
    w = bench.custom_workload("mlp", ["fedcanon"], "digits", n=3, K=2, B=8)
    setup = bench.Setup(w, torch.device("cpu"))
    step = roofline.count_flops(setup.client_step)
    # forward 2*B*(64*200 + 200*200 + 200*10); backward: weight grads (same) + input grads of
    # the two upper layers
    assert step == 2 * 8 * (2 * (64 * 200 + 200 * 200 + 200 * 10) + 200 * 200 + 200 * 10)
    assert roofline.Roofline(setup.client_step, times=6).flops == 6 * step


def test_roofline_replays_on_the_steps_strides_or_contiguous_operands():
    W, h = torch.randn(5, 7), torch.randn(3, 7)
    step = lambda: torch.mm(h, W.t())  # noqa: E731  # a weight transposed as a view
    own = roofline.Roofline(step, layout="step")
    flat = roofline.Roofline(step, layout="contiguous")
    (_, (a, b), _), (_, (c, d), _) = own.calls[0], flat.calls[0]
    assert (a.stride(), b.stride()) == ((7, 1), (1, 7))
    assert (c.stride(), d.stride()) == ((7, 1), (5, 1))
    assert own.flops == flat.flops == 2 * 3 * 7 * 5
    with pytest.raises(ValueError, match="layout"):
        roofline.Roofline(step, layout="channels_last")


def test_fig2_estimate_counts_rounds_and_evaluations():
    # T=200, every 10 rounds: evaluations at 0, 10, ..., 200 = 21
    assert bench.fig2_estimate(1.0, 2.0, 10, runs=1, T=200) == (200 + 21 * 2) / 60
    # every 3: 0, 3, ..., 198, and the last round 200
    assert (
        bench.fig2_estimate(1.0, 2.0, 3, runs=12, T=200, parallel=2) == 12 * (200 + 68 * 2) / 2 / 60
    )


def test_peak_is_the_data_sheets_fp32_or_tf32_by_matmul_precision(monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H100 80GB HBM3")
    cuda = torch.device("cuda")
    before = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("highest")
        assert roofline.peak_flops(cuda) == 67e12
        torch.set_float32_matmul_precision("high")
        assert roofline.peak_flops(cuda) == 494.5e12
    finally:
        torch.set_float32_matmul_precision(before)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H100 PCIe")
    assert roofline.peak_flops(cuda) == 51e12
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Some Other GPU")
    assert roofline.peak_flops(cuda) is None
    assert (
        roofline.peak_flops(torch.device("cpu")) is None
        and roofline.peak_flops(torch.device("cpu"), 2e11) == 2e11
    )


def test_engine_names_take_a_compile_suffix_only():
    setup = bench.Setup(
        bench.custom_workload("linear", ["fedcanon"], "breast_cancer", n=3, K=2, B=8),
        torch.device("cpu"),
    )
    assert setup.oracle("vmap").compile_choice == {"compiled": False, "source": "forced"}
    with pytest.raises(UserError, match=r"the only suffix is \+compile"):
        setup.oracle("vmap+fast")


def test_profile_run_accounts_for_a_runs_whole_wall_time(tmp_path):
    """scripts/profile_run.py (bench_peers' "what bounds it"): one fedrun process's phases,
    none counted twice, summing to its wall time; the run itself is an ordinary one."""
    import json
    import subprocess
    import sys

    from conftest import ROOT, child_env

    p = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "profile_run.py"),
            "dataset=digits",
            "model=linear",
            "T=2",
            "K=2",
            "n=4",
            f"hydra.run.dir={tmp_path / 'run'}",
        ],
        cwd=tmp_path,
        env=child_env(OMP_NUM_THREADS="1"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    got = json.loads(p.stdout.splitlines()[-1])
    assert got["exit"] == 0 and (tmp_path / "run" / "metrics.png").exists(), p.stderr
    seconds = got["seconds"]
    assert {"import torch", "composition", "data", "evaluation", "rounds", "plot", "other"} <= set(
        seconds
    )
    assert all(v > 0 for k, v in seconds.items() if k != "other")
    assert sum(seconds.values()) == pytest.approx(got["total"])


def test_profile_accounts_a_step_op_by_op_products_apart(monkeypatch, capsys):
    """scripts/bench_engine.py --profile: per engine, each op's microseconds per client-step,
    the matrix products counted apart from everything else."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).parents[1] / "scripts" / "bench_engine.py"
    spec = importlib.util.spec_from_file_location("bench_engine", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.is_product("aten::addmm") and script.is_product("aten::mkldnn_convolution")
    assert not script.is_product("aten::index_select") and not script.is_product("aten::sum")
    monkeypatch.setattr(script, "PROFILED", {"tiny": ("mlp", "digits", "fedavg", 3, 2)})
    rows = script.profile(torch.device("cpu"), ["loop", "vmap"], None, top=5)
    assert [r["engine"] for r in rows] == ["loop", "vmap"]
    for r in rows:
        assert r["products us/step"] > 0 and r["other us/step"] > 0 and r["ops/step"] > 1
        assert r["products share"] == pytest.approx(
            r["products us/step"] / (r["products us/step"] + r["other us/step"])
        )
    out = capsys.readouterr().out
    assert "| aten::mm |" in out and "engine loop" in out and "engine vmap" in out
