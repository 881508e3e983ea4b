"""scripts/plot.py and scripts/tables.py over fake run folders (config.yaml + metrics.csv)
whose numbers are known, plus one real tiny sweep on digits fed through both scripts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from fedprox_cli import plotting, report

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import plot as plot_script  # noqa: E402
import tables as tables_script  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n"


def fake_run(root: Path, name: str, config: dict, **columns) -> Path:
    d = root / name
    d.mkdir(parents=True)
    (d / "config.yaml").write_text(yaml.safe_dump(config))
    rounds = len(next(iter(columns.values())))
    base = {"round": np.arange(rounds) * 5, "time_s": np.arange(rounds, dtype=float),
            "bytes_up": np.arange(rounds) * 100, "bytes_down": np.arange(rounds) * 200}
    pd.DataFrame({**base, **columns}).to_csv(d / "metrics.csv", index=False)
    (d / "summary.json").write_text('{"status": "finished"}')
    return d


def cfg(alg="fedcanon", seed=0, K=10, alpha=0.1, part="iid", **top):
    p = {"name": part, "seed": seed} | ({"alpha": alpha} if part == "dirichlet" else {})
    return {"algorithm": {"name": alg, "alpha": 0.4 if alg == "fedcanon" else 1.0},
            "partition": p, "K": K, "seed": seed, **top}


@pytest.fixture
def sweep(tmp_path):
    """2 algorithms x 2 partitions x 3 seeds; test_acc = base + seed / 100 at every round."""
    base = {("fedcanon", "iid"): 0.8, ("fedavg", "iid"): 0.7,
            ("fedcanon", "dirichlet"): 0.6, ("fedavg", "dirichlet"): 0.5}
    for i, ((alg, part), b) in enumerate(base.items()):
        for seed in range(3):
            fake_run(tmp_path / "sweep", f"{i}_{seed}", cfg(alg, seed, part=part),
                     test_acc=[0.1, b + seed / 100], stationarity=[1.0, 0.1])
    return tmp_path / "sweep"


def test_groups_differ_only_in_seeds_and_are_labelled_by_what_tells_them_apart(sweep):
    groups = report.group(report.load([sweep]))
    assert sorted(g.label for g in groups) == [
        "algorithm=fedavg, partition=dirichlet", "algorithm=fedavg, partition=iid",
        "algorithm=fedcanon, partition=dirichlet", "algorithm=fedcanon, partition=iid"]
    assert all(len(g.runs) == 3 for g in groups)   # seed and partition.seed are replicates
    # algorithm.alpha differs too, but is fixed by algorithm.name; partition.alpha splits nothing
    # more than partition.name does: neither is in the labels


def test_a_key_joins_the_label_when_it_splits_groups(sweep, tmp_path):
    fake_run(sweep, "dir_0.5", cfg("fedavg", part="dirichlet", alpha=0.5), test_acc=[0.1, 0.2],
             stationarity=[1.0, 0.1])
    labels = {g.label for g in report.group(report.load([sweep]))}
    assert {"algorithm=fedavg, partition=dirichlet, partition.alpha=0.1",
            "algorithm=fedavg, partition=dirichlet, partition.alpha=0.5",
            "algorithm=fedavg, partition=iid"} <= labels


def test_band_is_mean_and_std_over_seeds(sweep):
    g = next(g for g in report.group(report.load([sweep])) if g.label == "algorithm=fedavg, partition=iid")
    b = report.band(g, "bytes", "test_acc")
    vals = [0.70, 0.71, 0.72]
    assert b["mean"].tolist() == pytest.approx([0.1, np.mean(vals)])
    assert b["std"].tolist() == pytest.approx([0.0, np.std(vals, ddof=1)])
    assert b["x"].tolist() == [0, 300]            # bytes = up + down


def test_accuracy_table_numbers_and_bold_best(sweep):
    text = report.accuracy_table(report.load([sweep]))
    lines = text.splitlines()
    assert lines[0] == "| partition | fedcanon | fedavg |"
    sd = np.std([0, 0.01, 0.02], ddof=1)
    assert f"| iid | **0.8100 ± {sd:.4f}** | 0.7100 ± {sd:.4f} |" in lines
    assert f"| dirichlet | **0.6100 ± {sd:.4f}** | 0.5100 ± {sd:.4f} |" in lines


def test_time_table_ratios(tmp_path):
    times = {("fedcanon", 10): [10, 12], ("fedmid", 10): [33, 33], ("fedcanon", 20): [22, 22],
             ("fedmid", 20): [88, 88]}
    for (alg, K), ts in times.items():
        for seed, t in enumerate(ts):
            fake_run(tmp_path, f"{alg}{K}_{seed}", cfg(alg, seed, K=K), test_acc=[0.1, 0.2],
                     time_s=[0.0, t])
    lines = report.time_table(report.load([tmp_path])).splitlines()
    assert lines[0] == "| K | fedcanon | fedmid |"
    assert lines[2] == f"| 10 | 11.0 ± {np.std([10, 12], ddof=1):.1f} | 33.0 ± 0.0 (3.00× fedcanon) |"
    assert lines[3] == "| 20 | 22.0 ± 0.0 (2.00× prev. K) | 88.0 ± 0.0 (4.00× fedcanon; 2.67× prev. K) |"


def test_slope_recovers_a_power_law(tmp_path):
    for n in (10, 20, 50, 100):
        for seed in range(2):
            fake_run(tmp_path, f"{n}_{seed}", cfg(seed=seed, n=n), test_acc=[0.1, 0.2],
                     stationarity=[1.0, 3.0 * n ** -1.436])
    (fit,) = report.slope(report.load([tmp_path]), "n")
    assert fit["slope"] == pytest.approx(-1.436)
    assert tables_script.main([str(tmp_path), "--slope", "n"]) == 0


def test_slope_over_K_ignores_steps_tied_to_K(tmp_path):
    """FedNMap Fig. 4 sweeps K with eta_a = 1/K: one fit over K, not one group per step."""
    for K in (5, 10, 20, 40):
        c = cfg(K=K)
        c["algorithm"]["eta_a"] = 1 / K
        fake_run(tmp_path, f"K{K}", c, test_acc=[0.1, 0.2], stationarity=[1.0, 2.0 * K ** -1.181])
    (fit,) = report.slope(report.load([tmp_path]), "K")
    assert fit["slope"] == pytest.approx(-1.181)


def test_where_filters_and_rejects(sweep, capsys):
    runs = report.load([sweep], ["algorithm.name=fedavg", "partition.alpha=0.1"])
    assert len(runs) == 3
    assert plot_script.main([str(sweep), "--where", "algorithm.name=nope"]) == 2
    assert "no run has algorithm.name=nope" in capsys.readouterr().err


def test_plot_script_writes_pngs(sweep, tmp_path, capsys):
    out = tmp_path / "acc.png"
    assert plot_script.main([str(sweep), "--x", "bytes", "--y", "test_acc", "--out", str(out)]) == 0
    assert out.read_bytes()[:8] == PNG
    assert plot_script.main([str(sweep), "--y", "stationarity"]) == 0
    assert (sweep / "plot_stationarity_vs_round.png").read_bytes()[:8] == PNG
    assert plot_script.main([str(sweep), "--y", "no_such_metric"]) == 2
    assert "no column 'no_such_metric'" in capsys.readouterr().err


def test_panels_split_runs_by_a_key(sweep, tmp_path):
    parts = report.split(report.load([sweep]), ["partition.name"])
    assert list(parts) == ["partition=dirichlet", "partition=iid"]
    assert all(len(rs) == 6 for rs in parts.values())
    out = tmp_path / "panels.png"
    assert plot_script.main([str(sweep), "--panels", "partition.name", "--out", str(out)]) == 0
    assert out.read_bytes()[:8] == PNG


def test_partition_plot_reports_a_missing_plotter(sweep, monkeypatch, capsys):
    monkeypatch.delattr(plotting, "plot_partition", raising=False)
    assert plot_script.main(["--partition", str(sweep / "0_0")]) == 2
    assert "needs fedprox_cli.plotting.plot_partition" in capsys.readouterr().err


def test_real_sweep_through_both_scripts(tmp_path):
    """A preset's sweep (FedCanon Fig. 2's quick variant, shrunk to digits and 2 rounds) lands in
    results/sweeps/<preset>/ and goes through plot.py and tables.py."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-m", "fedprox_cli", "-m", "experiment=fedcanon_fig2_quick",
                    "dataset=digits", "algorithm=fedcanon_fig2/fedcanon,fedcanon_fig2/fedavg",
                    "partition=iid", "seed=0,1", "T=2", "K=2", "n=3", "B=8", "eval_every=1",
                    "device=cpu"], check=True, env=env, cwd=tmp_path, capture_output=True)
    (sweep_dir,) = (tmp_path / "results" / "sweeps" / "fedcanon_fig2_quick").iterdir()
    assert len(report.find_runs([sweep_dir])) == 4
    out = tmp_path / "plot.png"
    for cmd, check in ((["scripts/plot.py", str(sweep_dir), "--out", str(out)], "algorithm=fedavg"),
                       (["scripts/plot.py", str(sweep_dir), "--panels", "algorithm", "--out", str(out)],
                        "algorithm=fedcanon_fig2/fedavg: all runs"),   # a Hydra choice as panel key
                       (["scripts/tables.py", str(sweep_dir)], "| fedcanon | fedavg |")):
        p = subprocess.run([sys.executable, str(ROOT / cmd[0]), *cmd[1:]], env=env, cwd=tmp_path,
                           capture_output=True, text=True, check=True)
        assert check in p.stdout
    assert out.read_bytes()[:8] == PNG
