"""The Python API (fedprox_cli.api): run() in its three forms, load_runs(), the example of
docs/api.md, and that importing the package stays light."""

import re
import subprocess
import sys

import pytest
from conftest import ROOT

import fedprox_cli
from fedprox_cli.common.errors import UserError
from fedprox_cli.config.compose import compose

pytestmark = pytest.mark.usefixtures("one_torch_thread")

HEAVY = (
    "torch",
    "hydra",
    "omegaconf",
    "pandas",
    "numpy",
    "hydra_plugins",
    "submitit",
    "joblib",
    "optuna",
    "mlflow",
    "wandb",
    "tensorboard",
    "matplotlib",
)


def test_import_is_light():
    code = "import sys, fedprox_cli; print(' '.join(sys.modules))"
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout.split()
    assert not sorted(m for m in loaded if m.split(".")[0] in HEAVY)
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        fedprox_cli.nope


def test_readme_example(tmp_path, monkeypatch, capsys):
    readme = (ROOT / "docs" / "api.md").read_text()
    block = re.search(
        r"<!-- tested: tests/test_api.py::test_readme_example -->\n```python\n(.*?)```",
        readme,
        re.S,
    ).group(1)
    monkeypatch.chdir(tmp_path)
    exec(compile(block, "docs/api.md", "exec"), {})
    printed = capsys.readouterr().out
    assert "\nfinished {'round': 4.0, 'objective': " in printed
    runs = fedprox_cli.load_runs(tmp_path / "results" / "api")
    assert sorted(runs["algorithm.name"]) == ["fedcanon", "fedmid"]
    assert set(runs["status"]) == {"finished"} and (runs["round"] == 4).all()
    assert runs.set_index("algorithm.name").loc["fedmid", "algorithm.beta"] == 0.01


def test_a_composed_config_runs_as_it_is_and_is_not_run_twice(tmp_path):
    cfg = compose(["dataset=digits", "T=2", "model=linear"])
    first = fedprox_cli.run(cfg, folder=tmp_path / "run")
    assert (
        first.status == "finished"
        and first.exit_code == 0
        and list(first.metrics["round"]) == [0, 2]
    )
    again = fedprox_cli.run(cfg, folder=tmp_path / "run")  # finished already: read, not re-run
    assert again.summary["started"] == first.summary["started"]
    assert again.metrics.equals(first.metrics)
    copy = fedprox_cli.run(cfg, folder=tmp_path / "copy")  # the same run in another folder
    # load_runs lists every folder (figures and tables count such runs once; see groups.once)
    assert sorted(fedprox_cli.load_runs(tmp_path)["folder"]) == [
        str(copy.folder),
        str(first.folder),
    ]


def test_seed_batched_run_and_a_folder_needing_quotes(tmp_path):
    folder = tmp_path / "a b" / "résultats"
    r = fedprox_cli.run({"dataset": "digits", "T": 2, "seeds": 2, "model": "linear"}, folder=folder)
    assert r.folder == folder and r.status == "finished"
    assert sorted(r.summary) == [0, 1] and list(r.metrics.columns[:2]) == ["seed", "round"]
    assert sorted(r.metrics["seed"].unique()) == [0, 1]
    runs = fedprox_cli.load_runs(tmp_path)
    assert sorted(runs["seed"]) == [0, 1] and sorted(runs["folder"]) == [
        str(folder / "seed_0"),
        str(folder / "seed_1"),
    ]


@pytest.mark.parametrize(
    "config, message",
    [
        (["dataset=digits", "T=0"], "T must be a positive integer, got 0"),
        ({"dataset": "digits", "+regularizer.lamda": 1.0}, "regularizer l1 has no parameter lamda"),
    ],
)
def test_bad_input_raises_before_anything_is_written(tmp_path, config, message):
    with pytest.raises(UserError, match=re.escape(message)):
        fedprox_cli.run(config, folder=tmp_path / "run")
    assert not (tmp_path / "run").exists()
