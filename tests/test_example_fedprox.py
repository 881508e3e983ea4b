"""The tutorial plugin of docs/extending.md, examples/fedprox_server/fedprox_server/fedprox.py
(FedProx, no YAML), as the source checkout has it: installed for these tests from the source
folder (a ``.dist-info`` with the entry points of the example's pyproject.toml), so that they
test the files the tutorial shows whether or not the package is pip-installed."""

import sys
import tomllib
from pathlib import Path

import pandas as pd
import pytest
from conftest import fedrun
from omegaconf import OmegaConf

import fedprox_cli
from fedprox_cli.common.errors import UserError

pytestmark = pytest.mark.usefixtures("one_torch_thread")

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "fedprox_server"
TINY = ["dataset=digits", "model=linear", "T=3", "K=2", "n=4", "eval_every=1", "regularizer=none"]


def install_from_source(site: Path) -> list[Path]:
    """The example's .dist-info in ``site``; returns the folders to put first on the path."""
    meta = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())["project"]
    info = site / f"{meta['name']}-{meta['version']}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {meta['name']}\nVersion: {meta['version']}\n"
    )
    (info / "entry_points.txt").write_text(
        "".join(
            f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()) + "\n"
            for group, eps in meta["entry-points"].items()
        )
    )
    return [site, EXAMPLE]


@pytest.fixture
def example(tmp_path, monkeypatch):
    """The example package from the source folder, first on sys.path (a pip-installed copy, if
    any, shadowed); the algorithm registry restored afterwards."""
    from fedprox_cli.algorithms import base

    path = install_from_source(tmp_path / "site")
    for p in reversed(path):
        monkeypatch.syspath_prepend(str(p))
    for name in [m for m in sys.modules if m.split(".")[0] == "fedprox_server"]:
        monkeypatch.delitem(sys.modules, name)
    saved = dict(base._REGISTRY)
    yield path
    base._REGISTRY.clear()
    base._REGISTRY.update(saved)


def test_fedprox_at_mu_0_is_fedavg_bit_for_bit(example, tmp_path):
    """The textbook check: FedProx at mu = 0 (a declared range mu >= 0) is FedAvg, every
    logged number equal (not close)."""
    a = fedprox_cli.run(["algorithm=fedprox", "algorithm.mu=0", *TINY], folder=tmp_path / "a")
    b = fedprox_cli.run(["algorithm=fedavg", *TINY], folder=tmp_path / "b")
    assert a.status == b.status == "finished"
    cols = [c for c in a.metrics.columns if c != "time_s"]
    pd.testing.assert_frame_equal(a.metrics[cols], b.metrics[cols], check_exact=True)
    c = fedprox_cli.run(["algorithm=fedprox", "algorithm.mu=0.5", *TINY], folder=tmp_path / "c")
    assert not c.metrics["objective"].equals(b.metrics["objective"])  # mu matters


def test_fedprox_config_from_its_defaults_without_a_yaml(example, tmp_path):
    run = fedprox_cli.run(["algorithm=fedprox", *TINY], folder=tmp_path / "run")
    assert run.status == "finished"
    assert OmegaConf.load(tmp_path / "run" / "config.yaml").algorithm == {
        "name": "fedprox",
        "beta": 0.02,
        "mu": 0.01,
    }
    with pytest.raises(
        UserError, match=r"algorithm.mu must be >= 0, got -0.1 \(as declared by algorithm fedprox\)"
    ):
        fedprox_cli.run(["algorithm=fedprox", "algorithm.mu=-0.1", *TINY], folder=tmp_path / "neg")


def test_fedprox_declares_h_0_only_and_is_refused_with_l1(example, tmp_path):
    r = fedrun(
        "algorithm=fedprox",
        "dataset=digits",
        "regularizer=l1",
        "T=1",
        f"hydra.run.dir={tmp_path / 'r'}",
        path=example,
    )
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "fedrun: error: algorithm fedprox is defined for h = 0 only; use regularizer=none"
    ]


def test_fedprox_keeps_every_contract_of_fedrun_check_algorithm(example, capsys):
    from fedprox_cli.cli.check_algorithm import CONTRACTS, main

    assert main(["fedprox"]) == 0
    out = capsys.readouterr().out
    assert [line.split()[0] for line in out.splitlines()[:-1]] == ["ok"] * len(CONTRACTS), out
    assert out.splitlines()[-1] == "fedprox: all contracts hold"
