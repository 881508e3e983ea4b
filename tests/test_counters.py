"""scripts/counters.py: per-round prox calls and per-client floats from real runs' counters
(FedCanon Table III's formulas)."""

from __future__ import annotations

import subprocess

from conftest import fedrun, script


def counters(*args) -> subprocess.CompletedProcess:
    return script("counters.py", *args)


def test_counts_per_round_match_table_iii(tmp_path):
    n, K = 4, 3
    p = fedrun(
        "-m",
        "algorithm=fedcanon,fedmid,za1",
        "dataset=digits",
        "model=linear",
        "regularizer=l1",
        f"n={n}",
        f"K={K}",
        "T=2",
        "eval_every=2",
        f"hydra.sweep.dir={tmp_path}",
    )
    assert p.returncode == 0, p.stderr
    out = counters(tmp_path)
    assert out.returncode == 0, out.stderr
    rows = {
        r[0]: r
        for r in (
            [c.strip() for c in line.strip("|").split("|")] for line in out.stdout.splitlines()[2:]
        )
    }
    # columns: algorithm, n, K, participation, compressor, ratio, d, rounds, prox, up, down, total
    assert rows["fedcanon"][8:] == ["1", "1 d", "2 d", "3 d"]
    assert rows["fedmid"][8:] == [str(n * K + 1), "1 d", "1 d", "2 d"]
    assert rows["za1"][8:] == [str(n * (K + 1) + 1), "1 d", "1 d", "2 d"]
    assert rows["fedcanon"][6:8] == ["650", "2"]  # digits: 64 x 10 weights + 10 biases; 2 rounds


def test_no_runs_is_one_line_and_exit_2(tmp_path):
    p = counters(tmp_path)
    assert (
        p.returncode == 2
        and len(p.stderr.strip().splitlines()) == 1
        and "Traceback" not in p.stderr
    )
