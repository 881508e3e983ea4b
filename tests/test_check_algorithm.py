"""fedrun-check-algorithm (fedprox_cli.cli.check_algorithm): every contract holds for a
built-in; a deliberately broken algorithm (noise from torch's global generator) fails the
contracts it breaks and exits 1; an unknown name is one line, exit 2. (The tutorial plugin's
check is in test_example_fedprox.py.)"""

import pytest

from fedprox_cli.algorithms import base
from fedprox_cli.cli.check_algorithm import CONTRACTS, main

pytestmark = pytest.mark.usefixtures("one_torch_thread")

NOISY = '''
from dataclasses import dataclass
from typing import ClassVar

import torch

from fedprox_cli.algorithms.fedavg import FedAvg


@dataclass(kw_only=True)
class NoisyAvg(FedAvg):
    """FedAvg whose server adds noise drawn from torch's global generator."""
    name: ClassVar[str] = "noisy_avg"

    def round(self, state, env, t):
        z = super().round(state, env, t)["z"]
        return {"z": z + 1e-3 * torch.randn_like(z)}
'''


@pytest.fixture
def registry():
    saved = dict(base._REGISTRY)
    yield
    base._REGISTRY.clear()
    base._REGISTRY.update(saved)


def verdicts(text: str) -> dict[str, str]:
    lines = text.splitlines()
    assert len(lines) == len(CONTRACTS) + 1, text
    return {line[6:].split(":")[0]: line[:4].strip() for line in lines[:-1]}


def test_a_builtin_keeps_every_contract(capsys):
    assert main(["fedmid"]) == 0
    out = capsys.readouterr().out
    assert set(verdicts(out).values()) == {"ok"}, out
    assert "h = 0 only: not declared; with regularizer=l1 it calls env.prox (" in out
    assert out.splitlines()[-1] == "fedmid: all contracts hold"


def test_global_randomness_fails_the_contracts_it_breaks(tmp_path, monkeypatch, capsys, registry):
    (tmp_path / "noisy.py").write_text(NOISY)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["noisy.NoisyAvg"]) == 1
    out = capsys.readouterr().out
    v = verdicts(out)
    assert v["no global randomness"] == v["state"] == v["seeds=R"] == "FAIL", out
    assert v["interface"] == v["messages"] == v["h = 0 only"] == "ok", out
    assert out.splitlines()[-1] == "noisy_avg: fails state, no global randomness, seeds=R"


def test_an_unknown_algorithm_is_one_line_exit_2(capsys):
    assert main(["no_such_method"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("fedrun-check-algorithm: error: unknown algorithm 'no_such_method'")
