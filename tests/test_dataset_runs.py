"""fedrun end to end on fixture datasets, and the partition plot of its run folder."""

import json

import conftest
import numpy as np
from conftest import child_env, script
from data_fixtures import a9a_files, leaf_files
from hydra import compose, initialize_config_dir

from fedprox_cli.analysis.run_plots import partition_counts
from fedprox_cli.common.package import CONF_DIR
from fedprox_cli.data import load_partition
from fedprox_cli.runs import runner


def fedrun(out, *overrides):
    r = conftest.fedrun(
        "T=2",
        "K=2",
        "B=2",
        "eval_every=1",
        "device=cpu",
        f"hydra.run.dir={out}",
        *overrides,
        env=child_env(OMP_NUM_THREADS="1"),
    )
    assert r.returncode == 0, r.stderr
    assert json.loads((out / "summary.json").read_text())["status"] == "finished"
    return r


def test_femnist_writers_cnn_run_and_partition_plot(tmp_path):
    f = leaf_files(tmp_path / "data")
    out = tmp_path / "run"
    fedrun(
        out,
        "dataset=femnist",
        "partition=dirichlet_writers",
        "partition.alpha=0.5",
        "partition.min_size=1",
        "model=cnn",
        "n=3",
        f"data.root={tmp_path / 'data'}",
    )
    clients = load_partition(out / "partition.npz")
    counts = partition_counts(out)
    assert counts.shape == (3, 62)
    assert counts.sum(1).tolist() == [len(c) for c in clients]
    assert counts.sum(0).tolist() == np.bincount(f["train_y"], minlength=62).tolist()
    png = tmp_path / "p.png"
    r = script("plot_partition.py", out, "--out", png)
    assert r.returncode == 0, r.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a9a_logistic_regression_run(tmp_path):
    """In process (the CLI path is covered above): runner.run on a composed config."""
    a9a_files(tmp_path)
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(
            "config",
            overrides=[
                "dataset=a9a",
                "model=linear",
                "partition=iid",
                "n=2",
                "regularizer=none",
                "T=2",
                "K=2",
                "B=2",
                "device=cpu",
                f"data.root={tmp_path}",
            ],
        )
    out = tmp_path / "run"
    assert runner.run(cfg, out, progress=False) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "finished"
    assert summary["dimension"] == 123 * 2 + 2  # 2 logits: logistic regression as 2-class softmax


def test_missing_dataset_is_one_line(tmp_path):
    r = conftest.fedrun(
        "dataset=cinic10",
        f"data.root={tmp_path}",
        f"hydra.run.dir={tmp_path / 'run'}",
        env=child_env(OMP_NUM_THREADS="1"),
    )
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert r.returncode == 2 and len(lines) == 1
    assert (
        lines[0].startswith("fedrun: error: dataset cinic10 not found") and "CINIC-10" in lines[0]
    )
