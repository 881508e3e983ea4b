"""Numbers (docs/robustness.md, "Divergence"): a finite step whose arithmetic overflows the run's
number type is divergence in the round it happened (exit 1), every interpolation that fails is
bad input (exit 2, nothing written), and a stationarity step that would make the metric
measure rounding is refused with its range. In-process, through the API and the runner."""

from __future__ import annotations

import json

import pytest
from omegaconf import OmegaConf

import fedprox_cli
from fedprox_cli.common.console import errors
from fedprox_cli.common.errors import UserError
from fedprox_cli.config.compose import compose
from fedprox_cli.runs import experiment, runner

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TINY = ["dataset=digits", "model=linear", "T=3", "K=2", "n=4", "checkpoint_every=0"]
FEDAVG = ["algorithm=fedavg", "regularizer=none"]


@pytest.mark.parametrize(
    "overrides, round, where",
    [
        (FEDAVG + ["algorithm.beta=1e300"], 1, "round 1"),  # a step that overflows at once
        (["algorithm.alpha=1e300", "metrics.stationarity_step=0.1"], 1, "round 1"),
        (["algorithm.alpha=1e300"], 0, "the evaluation of round 0"),  # its natural step s = alpha
        (
            [
                "algorithm=scaffold",
                "regularizer=none",
                "algorithm.beta=1e300",
                "metrics.stationarity_step=0.1",
            ],
            1,
            "round 1",
        ),
        (
            ["algorithm=fedcef", "algorithm.alpha=1e300", "metrics.stationarity_step=0.1"],
            1,
            "round 1",
        ),
        (FEDAVG + ["algorithm.beta=1e300", "seeds=2"], 1, "round 1"),  # a seed batch (vmap)
    ],
)
def test_an_overflowing_step_is_divergence(tmp_path, overrides, round, where):
    run = fedprox_cli.run(TINY + overrides, folder=tmp_path / "run")
    assert (run.status, run.exit_code) == ("diverged", 1)
    summaries = run.summary.values() if "seeds=2" in overrides else [run.summary]
    for s in summaries:
        assert s["status"] == "diverged" and s["round"] == round, s
        assert s["error"].startswith(
            f"a step overflowed float32 in {where} (value cannot be converted"
        )


def test_engine_auto_times_local_sgd_where_the_runs_own_round_overflows(tmp_path):
    """engine=auto times the run's own rounds (engine/choice.time_rounds); where they overflow
    at the run's steps, it times plain local SGD rounds instead, says so and keys its cache on
    them: the run itself then diverges in round 1."""
    run = fedprox_cli.run(TINY + FEDAVG + ["algorithm.beta=1e300"], folder=tmp_path / "run")
    assert run.status == "diverged"
    assert run.summary["engine"]["timed"].startswith("local sgd rounds"), run.summary["engine"]
    sane = fedprox_cli.run(TINY + FEDAVG, folder=tmp_path / "sane")
    assert sane.status == "finished"
    assert sane.summary["engine"]["timed"].startswith("fedavg"), sane.summary["engine"]


def test_a_diverged_run_records_the_round_it_says(tmp_path, capsys):
    """NaN found at the first evaluation, after round 2 (eval_every=2): summary, closing line
    and the divergence line all say round 2."""
    run = fedprox_cli.run(
        [
            "dataset=digits",
            "model=linear",
            "T=6",
            "K=2",
            "n=4",
            "eval_every=2",
            *FEDAVG,
            "algorithm.beta=3e38",
        ],
        folder=tmp_path / "run",
    )
    assert (run.status, run.summary["round"]) == ("diverged", 2)
    out = capsys.readouterr()
    assert "after round 2" in out.err and "diverged, 2/6 rounds" in out.out
    assert list(run.metrics["round"]) == [0, 2]


@pytest.mark.parametrize(
    "override, key",
    [
        ("T=${oc.env:FEDPROX_SURELY_UNSET}", "T"),
        ("seeds=${oc.env:FEDPROX_SURELY_UNSET}", "seeds"),  # read before the run is built
        ("algorithm.beta=${calc:1/0}", "algorithm.beta"),
    ],
)
def test_an_interpolation_that_fails_is_bad_input(tmp_path, override, key):
    cfg = compose(TINY + [override])
    errors.clear()
    assert runner.run(cfg, tmp_path / "run", progress=False) == 2
    assert not (tmp_path / "run").exists()
    assert errors[-1].startswith(f"cannot resolve {key}: ")


@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            ["metrics.stationarity_step=1e-300"],
            "(1e-300) must lie in [1.19e-07, 8.39e+06] for float32",
        ),
        (
            ["metrics.stationarity_step=1e-8"],
            "(1e-08) must lie in [1.19e-07, 8.39e+06] for float32",
        ),
        (["metrics.stationarity_step=1e300"], "(1e+300) must lie in"),
        (FEDAVG + ["algorithm.beta=1e-12"], "(the algorithm's natural step 2e-12) must lie in"),
        (["dtype=float64", "metrics.stationarity_step=1e-20"], "[2.22e-16, 4.5e+15] for float64"),
    ],
)
def test_a_meaningless_stationarity_step_is_refused(overrides, message):
    with pytest.raises(UserError, match=r"metrics\.stationarity_step") as e:
        experiment.validate(compose(TINY + overrides))
    assert message in str(e.value)


def test_a_small_stationarity_step_within_the_range_runs(tmp_path):
    experiment.validate(compose(TINY + ["dtype=float64", "metrics.stationarity_step=1e-8"]))
    run = fedprox_cli.run(TINY + ["metrics.stationarity_step=1e-5"], folder=tmp_path / "run")
    assert run.status == "finished" and run.metrics["stationarity"].notna().all()
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["status"] == "finished"
    assert OmegaConf.load(tmp_path / "run" / "config.yaml").metrics.stationarity_step == 1e-5
