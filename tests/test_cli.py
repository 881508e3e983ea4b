"""fedrun end to end through the command line."""

import json

import pandas as pd

from conftest import job_folders
from fedprox_cli.metrics import COLUMNS

TINY = ["dataset=digits", "T=3", "K=2", "n=4", "B=8", "eval_every=1"]


def test_run_writes_complete_folder(run_fedrun, tmp_path):
    out = tmp_path / "run"
    r = run_fedrun(*TINY, f"hydra.run.dir={out}")
    assert r.returncode == 0, r.stderr
    df = pd.read_csv(out / "metrics.csv")
    assert list(df.columns) == COLUMNS and list(df["round"]) == [0, 1, 2, 3]
    assert df[COLUMNS].notna().all().all()
    assert json.loads((out / "summary.json").read_text())["status"] == "finished"
    for f in ("config.yaml", "partition.npz", "metrics.png"):
        assert (out / f).stat().st_size > 0
    assert str(out / "metrics.csv") in r.stdout


def test_two_job_sweep(run_fedrun, tmp_path):
    r = run_fedrun("-m", *TINY, "algorithm=fedcanon", "seed=0,1", f"hydra.sweep.dir={tmp_path}")
    assert r.returncode == 0, r.stderr
    runs = sorted(p for p in tmp_path.iterdir() if (p / "metrics.csv").exists())
    assert len(runs) == 2
    a, b = (pd.read_csv(p / "metrics.csv") for p in runs)
    assert len(a) == len(b) == 4 and not a["train_loss"].equals(b["train_loss"])
    assert "2 of 2 jobs finished" in r.stdout


def test_train_samples_changes_only_the_train_metrics(run_fedrun, tmp_path):
    """metrics.train_samples estimates train_loss/objective/stationarity on a subset; training
    and the test metrics are the same as with exact evaluation."""
    r = run_fedrun("-m", *TINY, "metrics.train_samples=null,400", f"hydra.sweep.dir={tmp_path}")
    assert r.returncode == 0, r.stderr
    exact, sub = (pd.read_csv(j / "metrics.csv") for j in job_folders(tmp_path))
    for col in ("grad_evals", "test_loss", "test_acc", "hoyer"):
        pd.testing.assert_series_equal(exact[col], sub[col])
    assert not exact["train_loss"].equals(sub["train_loss"])
    assert ((sub["train_loss"] / exact["train_loss"] - 1).abs() < 0.1).all()


def _bad(run_fedrun, tmp_path, *args):
    out = tmp_path / "bad"
    r = run_fedrun(*TINY, *args, f"hydra.run.dir={out}")
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert r.returncode == 2, r.stderr
    assert len(lines) == 1 and lines[0].startswith("fedrun: error:"), r.stderr
    assert "Traceback" not in r.stderr
    summary = out / "summary.json"
    assert not summary.exists() or json.loads(summary.read_text())["status"] != "finished"
    return lines[0]


def test_bad_inputs_one_line(run_fedrun, tmp_path):
    assert "algorithm/nope" in _bad(run_fedrun, tmp_path, "algorithm=nope")
    assert "foo" in _bad(run_fedrun, tmp_path, "foo=1")
    assert "K must be a positive integer" in _bad(run_fedrun, tmp_path, "K=0")
    assert "algorithm.alpha" in _bad(run_fedrun, tmp_path, "algorithm.alpha=-1")
    assert "exceeds" in _bad(run_fedrun, tmp_path, "n=5000")
    assert "h = 0 only" in _bad(run_fedrun, tmp_path, "algorithm=fedavg")
