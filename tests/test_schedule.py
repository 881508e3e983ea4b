"""Which rounds a run evaluates (config/schedule.py): round 0, every ``eval_every``-th and T;
``eval_every=0`` round T alone, end to end (one metrics row, no initial evaluation)."""

import json

import pytest

from fedprox_cli.config import schedule
from tests.conftest import fedrun

TINY = ["dataset=digits", "model=linear", "n=4", "K=2", "T=5"]


@pytest.mark.parametrize(
    "T, every, rounds",
    [(5, 1, [0, 1, 2, 3, 4, 5]), (5, 2, [0, 2, 4, 5]), (5, 5, [0, 5]), (5, 9, [0, 5]), (5, 0, [5])],
)
def test_the_schedule(T, every, rounds):
    assert schedule.schedule(T, every) == rounds
    assert [t for t in range(T + 1) if schedule.evaluates(t, T, every)] == rounds
    assert schedule.count(0, T, every) == len(rounds)
    assert schedule.count(2, T, every) == len([t for t in rounds if t > 2])


def test_eval_every_0_evaluates_the_final_model_alone(tmp_path):
    out = tmp_path / "run"
    p = fedrun(*TINY, "eval_every=0", f"hydra.run.dir={out}", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    lines = (out / "metrics.csv").read_text().splitlines()
    assert len(lines) == 2 and lines[1].startswith("5,")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "finished" and summary["final"]["round"] == 5
    assert (out / "metrics.png").is_file()
