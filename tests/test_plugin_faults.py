"""A run meets a plugin's fault in one line, exit 2, status error (fedprox_cli.algorithms.contract,
common.plugin_calls.calling): anything its call raises (BaseException included, but
KeyboardInterrupt), a state entry of the wrong shape, dtype or device, a result described by
its shape; the line names the plugin's deepest own frame; FEDRUN_DEBUG=1 adds the traceback."""

import json

import pytest
from conftest import fedrun

pytestmark = pytest.mark.usefixtures("one_torch_thread")

PLUGIN = '''
import sys
from dataclasses import dataclass
from typing import ClassVar

import torch

from fedprox_cli.algorithms.fedavg import FedAvg


def helper(z):
    return torch.split(z, [3, 4])


@dataclass(kw_only=True)
class P(FedAvg):
    name: ClassVar[str] = "p"

    def init(self, z0, n):
        return {"z": z0.clone(), **EXTRA(z0)}

    def round(self, state, env, t):
        if t == 1:
            RAISE
        new = super().round(state, env, t)
        return {**state, **new}
'''


@pytest.fixture(autouse=True)
def registry():
    from fedprox_cli.algorithms import base

    saved = dict(base._REGISTRY)
    yield
    base._REGISTRY.clear()
    base._REGISTRY.update(saved)


def run(tmp_path, extra="{}", raise_="pass", env=None):
    """fedrun on the plugin, written as tmp_path/plug.py (its own module: a run in this process
    imports it afresh)."""
    import sys

    sys.modules.pop("plug", None)
    (tmp_path / "plug.py").write_text(PLUGIN.replace("EXTRA(z0)", extra).replace("RAISE", raise_))
    out = tmp_path / "run"
    r = fedrun(
        "algorithm=plug.P",
        "dataset=digits",
        "model=linear",
        "regularizer=none",
        "n=4",
        "K=1",
        "T=3",
        f"hydra.run.dir={out}",
        cwd=tmp_path,
        env=env,
    )
    summary = (
        json.loads((out / "summary.json").read_text()) if (out / "summary.json").exists() else {}
    )
    return r, summary


@pytest.mark.parametrize(
    "raised", ["sys.exit(0)", "sys.exit(5)", "raise GeneratorExit", "raise SystemExit('bye')"]
)
def test_a_base_exception_in_a_plugin_is_its_fault(raised, tmp_path):
    r, summary = run(tmp_path, raise_=raised)
    assert r.returncode == 2, r.stderr
    errors = [x for x in r.stderr.splitlines() if "error:" in x]
    assert (
        len(errors) == 1
        and "algorithm plugin 'p' (plug.P) failed in round 2 (round(state, env, t=1))" in errors[0]
    )
    assert f"(at {tmp_path / 'plug.py'}:" in errors[0]
    assert summary["status"] == "error"
    # round 1 finished before round 2 failed: the record and the closing line count it
    assert summary["round"] == 1 and "error, 1/3 rounds" in r.stdout, r.stdout


@pytest.mark.parametrize(
    "extra, words",
    [
        (
            '{"count": torch.zeros((), dtype=torch.int64)}',
            "state['count'] is a tensor () int64 on cpu",
        ),
        ('{"h": torch.empty(z0.numel(), device="meta")}', "on meta"),
    ],
)
def test_state_of_another_dtype_or_device_is_the_contracts_line(extra, words, tmp_path):
    r, summary = run(tmp_path, extra=extra)
    assert r.returncode == 2, r.stderr
    line = next(x for x in r.stderr.splitlines() if "error:" in x)
    assert (
        "breaks the state contract" in line and words in line and f"{tmp_path / 'plug.py'}:" in line
    ), line
    assert summary["status"] == "error"


def test_an_error_inside_torch_names_the_plugins_line_and_debug_prints_the_traceback(tmp_path):
    from conftest import child_env

    r, _ = run(tmp_path, raise_="helper(state['z'])", env=child_env(FEDRUN_DEBUG="1"))
    assert r.returncode == 2
    line = next(x for x in r.stderr.splitlines() if x.startswith("fedrun: error:"))
    helper_line = PLUGIN.splitlines().index("    return torch.split(z, [3, 4])") + 1
    assert line.endswith(f"(at {tmp_path / 'plug.py'}:{helper_line})"), line
    assert "Traceback (most recent call last)" in r.stderr and "in helper" in r.stderr
