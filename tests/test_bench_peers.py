"""scripts/bench_peers.py's pure logic: the peers' client calls read back from their log, the
per-call table, and the goals against a made-up run; the peers' final outputs are fedrun's."""

import importlib.util
import math
from pathlib import Path

import pytest
import torch
from conftest import ROOT


def _load(path):
    """A script as a module of its own name, without putting its folder on sys.path."""
    spec = importlib.util.spec_from_file_location(f"_bench_peers_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench_peers = _load(ROOT / "scripts" / "bench_peers.py")
common = _load(ROOT / "scripts" / "peers" / "common.py")


def test_each_client_call_is_one_line_of_the_log_and_first_and_median_are_read_back(
    tmp_path, monkeypatch
):
    log = tmp_path / "calls.log"
    monkeypatch.setenv("PEER_CALL_LOG", str(log))
    for _ in range(3):
        with common.timed_call():
            pass
    assert len(log.read_text().split()) == 3
    log.write_text("2.5\n0.02\n0.03\n0.01\n")
    assert bench_peers.call_times(log) == {"calls": 4, "first_call_s": 2.5, "median_call_s": 0.025}
    missing = bench_peers.call_times(tmp_path / "none.log")
    assert missing["calls"] == 0 and math.isnan(missing["first_call_s"])


def _run(wall, train, steps, **calls):
    outputs = {"train_loss": 0.5, "stationarity": 0.25, "test_loss": 0.55, "test_acc": 0.8}
    return {"wall_s": wall, "train_s": train, "client_steps": steps, **outputs, **calls}


def test_goals_and_the_call_table():
    results = {
        "n10": {
            "fedrun": _run(10.0, 5.0, 4000),
            "pfl": _run(14.0, 8.0, 4000, calls=200, first_call_s=0.1, median_call_s=0.025),
            "flower": _run(40.0, 30.0, 4000, calls=200, first_call_s=2.0, median_call_s=0.02),
        }
    }
    lines, unmet = bench_peers.goals(results)
    assert "n10 vs pfl: wall 1.40x (goal 1.3x: met)" in lines
    assert "n10 vs pfl: client-steps/s 1.60x (goal 1.5x: met)" in lines
    assert "n10 vs flower: wall 4.00x (goal 5.0x: NOT met)" in lines
    assert (
        "  n10 vs flower: 5.0x needs fedrun's process in 8.0 s, 2.0 s (20%) less than its 10.0 s; "
        "with its training as it is (5.0 s), its fixed cost would have to fall from 5.0 s to 3.0 s"
    ) in lines
    slow = {"wall_s": 10.0, "train_s": 9.0, "client_steps": 4000}
    assert bench_peers.shortfall("x", 5.0, slow, 40.0).endswith(
        "its training alone takes 9.0 s: with no fixed cost at all it would need 500 "
        "client-steps/s, 1.1x its 444"
    )
    assert unmet == {"n10": {"wall"}}
    table = bench_peers.call_table(results, ["fedrun", "pfl", "flower"])
    assert table[2:] == [
        "| n10 | pfl | 200 | 0.1000 | 0.0250 | 800 steps/s |",
        "| n10 | flower | 200 | 2.0000 | 0.0200 | 1,000 steps/s |",
    ]

    rows = bench_peers.table(results, ["fedrun", "pfl"])
    assert rows[3] == (
        "| n10 | pfl | 14.0 | 8.00 | 6.0 | 500 | 0.5000 | 0.25 | 0.5500 | 0.8000 | 1.40x | 1.60x |"
    )


def test_every_system_computes_the_same_outputs_at_round_T_only():
    """fedrun evaluates round T alone, as the peers' scripts do (common.final_metrics), and the
    benchmark says so."""
    args = bench_peers.fedrun_args(10, 20, 100, 1.0, Path("out"))
    assert "eval_every=0" in args and "T=100" in args
    assert "computed at round T only and by every system" in bench_peers.SAME_JOB
    assert max(w[2] for w in bench_peers.WORKLOADS.values()) >= 100  # one of a paper's length
    common = (Path(bench_peers.PEER_SCRIPTS) / "common.py").read_text()
    assert all(f'"{k}"' in common for k in bench_peers.OUTPUTS)


@pytest.mark.skipif(not common.FMNIST.is_dir(), reason="Fashion-MNIST (Debian's files) not here")
def test_the_peers_final_outputs_are_fedruns_round_T_row():
    """On one model, ``common.final_metrics`` (what each peer computes at round T) equals the
    metrics row fedrun computes (engine/metrics.py) to float32 rounding."""
    from fedprox_cli.config.compose import compose
    from fedprox_cli.engine.metrics import evaluate
    from fedprox_cli.runs import experiment

    data = f"data.root={common.FMNIST}"
    exp = experiment.build(
        compose(["algorithm=fedavg", "regularizer=none", "partition=iid", "T=1", data])
    )
    x = exp.flat.flat()
    row = evaluate(
        x, exp.oracle, exp.h, exp.stationarity_step, exp.dataset.test_x, exp.dataset.test_y
    )
    net = common.mlp()
    with torch.no_grad():
        for p, q in zip(net.parameters(), exp.flat.module.parameters(), strict=True):
            p.copy_(q)
    got = common.final_metrics(net)
    for k in bench_peers.OUTPUTS:
        assert got[k] == pytest.approx(row[k], rel=1e-5), k
