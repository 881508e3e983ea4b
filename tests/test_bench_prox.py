"""scripts/bench_prox.py (FedCanon Table I): one row per model with its parameter count and each
prox's time as a multiple of the forward+backward pass; unknown models are one usage error."""

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import bench_prox  # noqa: E402


def test_row_for_a_fedprox_cli_model(capsys):
    r = bench_prox.bench("cnn", torch.device("cpu"), batch=2, reps=1, step=0.2)
    assert r["model"] == "cnn" and r["d"] == 83_466
    assert all(r[k] > 0 for k in ("fwd_bwd", *bench_prox.PROXES))
    row = bench_prox.table_row(r)
    assert row.split()[:2] == ["cnn", "83,466"]
    assert row.endswith(f"({r['SCAD'] / r['fwd_bwd']:.3f}x)")
    bench_prox.main(["--models", "cnn", "--device", "cpu", "--batch", "2", "--reps", "1"])
    out = capsys.readouterr().out.splitlines()
    assert out[1] == bench_prox.HEADER and out[2].startswith("cnn ")


def test_unknown_model_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as e:
        bench_prox.main(["--models", "resnet18,alexnet"])
    assert e.value.code == 2
    assert "unknown model(s) alexnet" in capsys.readouterr().err


def test_the_penalty_and_scads_shape_are_the_runs_own_when_given(capsys):
    bench_prox.main(
        ["--models", "cnn", "--device", "cpu", "--batch", "2", "--reps", "1"]
        + ["--lam", "1e-4", "--scad-a", "1000"]
    )
    first = capsys.readouterr().out.splitlines()[0]
    assert "SCAD(lam=0.0001, a=1000.0)" in first and "L1(lam=0.0001)" in first
    with pytest.raises(SystemExit) as e:
        bench_prox.main(["--models", "cnn", "--scad-a", "2"])
    assert e.value.code == 2
