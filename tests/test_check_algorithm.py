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


def test_a_failing_line_names_the_plugins_line_at_fault_and_why(
    tmp_path, monkeypatch, capsys, registry
):
    """A state-key typo names round's return statement, a shape error the line that raised it
    (not ``def round``); a seed batch's run says why it ended too."""
    from fedprox_cli.cli.check_algorithm import check

    monkeypatch.syspath_prepend(str(tmp_path))
    for name, shape, fault in (("faulty_key", 1, '"cc"'), ("faulty_shape", 3, "torch.ones(")):
        module = tmp_path / f"{name}.py"
        module.write_text(
            HEAD.replace('"broken"', f'"{name}"')
            + f"""
    def init(self, z0, n):
        return {{"z": z0.clone(), "c": torch.zeros_like(z0)}}

    def round(self, state, env, t):
        z = state["z"]
        X = env.sgd_steps(z.expand(len(env.clients), -1).clone(), t, self.beta)
        z = env.up(X).mean(0) * torch.ones({shape})
        env.down(z)
        return {{"z": z, "cc": state["c"]}}
"""
        )
        line = next(i for i, s in enumerate(module.read_text().splitlines(), 1) if fault in s)
        at = f"returned at {module}:{line}" if shape == 1 else f"(at {module}:{line})"
        assert check(f"{name}.Broken", only=("state", "seeds=R")) == 1
        out = capsys.readouterr().out.splitlines()
        assert len(out) == 3 and all(at in x and "ended error: " in x for x in out[:2]), out


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
    assert len(err) == 1 and err[0].startswith(
        "fedrun-check-algorithm: error: unknown algorithm 'no_such_method'"
    )


# ------------------------------------------- a plugin for each declaration it breaks (new ones)
HEAD = '''
from dataclasses import dataclass, field
from typing import ClassVar

import torch

from fedprox_cli.algorithms import Algorithm


@dataclass(kw_only=True)
class Broken(Algorithm):
    name: ClassVar[str] = "broken"
    beta: float = 0.05

    def stationarity_step(self, K):
        return self.beta
'''

BROKEN = {
    # control variates kept for the participating clients only: breaks partial participation
    "partial participation": '''
    partial_participation: ClassVar[bool] = True

    def init(self, z0, n):
        return {"z": z0.clone(), "c": z0.new_zeros(n, z0.numel())}

    def round(self, state, env, t):
        c = state["c"][env.clients]
        X = z = state["z"]
        X = env.sgd_steps(z.expand(len(env.clients), -1).clone(), t, self.beta, c)
        z = env.prox(env.up(X).mean(0), self.beta)
        env.down(z)
        return {"z": z, "c": c + 0.1 * (X - z)}
''',
    # error feedback that stores only the residual's non-zero entries: breaks under a compressor
    "compressor": '''
    takes_compressor: ClassVar[bool] = True

    def init(self, z0, n):
        return {"z": z0.clone(), "e": z0.new_zeros(n, z0.numel())}

    def round(self, state, env, t):
        z, e = state["z"], state["e"]
        X = env.sgd_steps(z.expand(len(env.clients), -1).clone(), t, self.beta)
        V = X - z + e
        sent = env.up(V)
        r = V - sent
        e = r[r != 0].reshape(len(env.clients), -1) if r.any() else e
        z = env.prox(z + sent.mean(0), self.beta)
        env.down(z)
        return {"z": z, "e": e}
''',
    # a buffer made in torch's default dtype, not z0's: breaks float64
    "float64": '''
    def init(self, z0, n):
        return {"z": z0.clone(), "m": torch.zeros(z0.numel())}

    def round(self, state, env, t):
        z, m = state["z"], state["m"]
        X = env.sgd_steps(z.expand(len(env.clients), -1).clone(), t, self.beta)
        m = 0.5 * m + env.up(X - z).mean(0)
        z = env.prox(z + m, self.beta)
        env.down(z)
        return {"z": z, "m": m}
''',
    # momentum kept on self, not in the state: a resumed run differs
    "state": '''
    m: object = field(default=None, init=False)

    def init(self, z0, n):
        return {"z": z0.clone()}

    def round(self, state, env, t):
        z = state["z"]
        X = env.sgd_steps(z.expand(len(env.clients), -1).clone(), t, self.beta)
        d = env.up(X - z).mean(0)
        self.m = d if self.m is None else 0.5 * self.m + d
        z = env.prox(z + self.m, self.beta)
        env.down(z)
        return {"z": z}
''',
}


@pytest.mark.parametrize("contract", sorted(BROKEN))
def test_a_plugin_breaking_a_declaration_fails_naming_its_line(
    contract, tmp_path, monkeypatch, capsys, registry
):
    """Each plugin breaks one thing it declares (or the state contract every run relies on):
    that contract fails, in one line naming the plugin's own file and line and the fix."""
    from fedprox_cli.cli.check_algorithm import check

    module = tmp_path / f"broken_{contract.replace(' ', '_')}.py"
    module.write_text(HEAD + BROKEN[contract])
    monkeypatch.syspath_prepend(str(tmp_path))
    assert check(f"{module.stem}.Broken", only=(contract,)) == 1
    line = capsys.readouterr().out.splitlines()[0]
    assert line.startswith(f"FAIL  {contract}: "), line
    assert f"{module}:" in line, line
    fix = {
        "partial participation": "a row per client",
        "compressor": "return every entry as init made it",
        "float64": "z0's dtype",
        "state": "not attributes set on self",
    }[contract]
    assert fix in line and "DataFrame" not in line, line


def test_a_plugin_in_a_deep_folder_is_named_at_its_own_line(
    tmp_path, monkeypatch, capsys, registry
):
    """However long the plugin's path, its failure line ends on the line at fault (init's
    return, which hands back the float32 buffer), not on another method's line added for want
    of the file."""
    folder = tmp_path.joinpath(*["a_folder_with_a_long_name_for_the_plugin"] * 5)
    folder.mkdir(parents=True)
    module = folder / "deep_float64.py"
    module.write_text(HEAD + BROKEN["float64"])
    monkeypatch.syspath_prepend(str(folder))
    from fedprox_cli.cli.check_algorithm import check

    assert check("deep_float64.Broken", only=("float64",)) == 1
    line = capsys.readouterr().out.splitlines()[0]
    lines = module.read_text().splitlines()
    init = next(i for i, s in enumerate(lines, 1) if "def init" in s)
    assert line.endswith(f"(returned at {module}:{init + 1})"), line  # init's return


def test_an_options_yaml_is_checked_and_a_typo_named_as_fedrun_names_it(tmp_path, capsys, registry):
    """The check takes the YAML a --config-dir holds; a key its class does not take, or an
    algorithm name close to one, gets fedrun's own line (did you mean, the file)."""
    from fedprox_cli.cli.check_algorithm import check

    yaml = tmp_path / "algorithm" / "myavg.yaml"
    yaml.parent.mkdir()
    yaml.write_text("name: fedavg\nbta: 0.05\n")
    assert main([str(yaml)]) == 2
    assert capsys.readouterr().err.strip() == (
        "fedrun-check-algorithm: error: algorithm fedavg has no parameter bta (it takes: alpha, "
        "beta; `fedrun algorithm=fedavg --help` describes them); did you mean algorithm.beta? "
        f"(set in {yaml})"
    )
    yaml.write_text("name: fedavg\nbeta: 0.05\n")
    assert check(str(yaml), only=("interface",)) == 0
    assert main(["fedcanno"]) == 2
    assert "unknown algorithm 'fedcanno' (did you mean fedcanon?); the options: " in (
        capsys.readouterr().err
    )


def test_the_check_and_a_run_name_a_plugin_by_one_rule(tmp_path, monkeypatch, capsys):
    """A spelling that is no dotted path is refused by both with the same words, exit 2."""
    from conftest import fedrun

    assert main(["my_mod:Thing"]) == 2
    said = capsys.readouterr().err.strip()
    r = fedrun("algorithm=my_mod:Thing", "dataset=digits", "T=1", cwd=tmp_path)
    assert r.returncode == 2
    assert said.split("error: ", 1)[1] == r.stderr.strip().split("error: ", 1)[1]
    assert "package.module.Class" in said
