"""Plugins from outside the package (fedprox_cli.common.registry): one entry point per registry, a
``_target_`` in a user's YAML, a user's config dir (``--config-dir`` and ``hydra.searchpath``),
a broken plugin; and the example package examples/fedprox_server (its counts and descent).

The plugin distribution is written to a temporary folder: a module plus a ``.dist-info`` with
``entry_points.txt``, which ``importlib.metadata`` finds on ``sys.path`` as it finds an
installed package's."""

import math
import sys

import pandas as pd
import pytest
from conftest import fedrun, needs_example

from fedprox_cli import algorithms
from fedprox_cli.cli import plot as plot_cli
from fedprox_cli.cli import table as table_cli
from fedprox_cli.common import metric_table
from fedprox_cli.common.errors import UserError
from fedprox_cli.data import datasets
from fedprox_cli.engine import models
from fedprox_cli.operators import compressors, regularizers

pytestmark = pytest.mark.usefixtures("one_torch_thread")

MODULE = '''
"""Test plugins: one of each kind."""
import math
from dataclasses import dataclass, replace
from typing import ClassVar

from torch import nn

from fedprox_cli import data
from fedprox_cli.algorithms import Algorithm
from fedprox_cli.common.metric_table import Metric
from fedprox_cli.operators.compressors import Compressor
from fedprox_cli.operators.regularizers import Regularizer


@dataclass(kw_only=True)
class ProxGD(Algorithm):
    """z <- prox_{beta h}(z - beta mean_i g_i(z)): one gradient per client and round."""
    name: ClassVar[str] = "prox_gd"
    takes_compressor: ClassVar[bool] = True
    beta: float = 0.05

    def init(self, z0, n):
        return {"z": z0.clone()}

    def round(self, state, env, t):
        z = state["z"]
        g = env.up(env.grad(z.expand(len(env.clients), -1), t, 0)).mean(0)
        z = env.prox(z - self.beta * g, self.beta)
        env.down(z)
        return {"z": z}

    def stationarity_step(self, K):
        return self.beta


@dataclass(frozen=True)
class SquaredL2(Regularizer):
    """h(x) = lam/2 ||x||^2."""
    name: ClassVar[str] = "sql2"
    lam: float = 1e-3

    def _value(self, x):
        return 0.5 * self.lam * (x * x).sum(-1)

    def _prox(self, x, step):
        return x / (1 + step * self.lam)


@dataclass(frozen=True)
class ScaledSign(Compressor):
    """mean |v| sign(v) per row: 4 bytes of scale plus one bit per entry."""
    name: ClassVar[str] = "scaled_sign"

    def __call__(self, V, seed=0):
        return V.abs().mean(-1, keepdim=True) * V.sign(), len(V) * (4 + math.ceil(V.shape[-1] / 8))


NORM = Metric("l2norm", "model norm", "||x||_2", lower_is_better=True, log=True, fmt=".3e",
              help="the Euclidean norm of x", compute=lambda x, h: x.norm())


def tiny(input_shape, num_classes, hidden=8):
    return nn.Sequential(nn.Flatten(), nn.Linear(math.prod(input_shape), hidden), nn.ReLU(),
                         nn.Linear(hidden, num_classes))


def digits_small(root):
    ds = data.load("digits", root)
    return replace(ds, name="digits_small", train_x=ds.train_x[:600], train_y=ds.train_y[:600])
'''

ENTRY_POINTS = {
    "algorithms": "prox_gd = myplugins:ProxGD",
    "regularizers": "sql2 = myplugins:SquaredL2",
    "compressors": "scaled_sign = myplugins:ScaledSign",
    "models": "tiny = myplugins:tiny",
    "datasets": "digits_small = myplugins:digits_small",
    "metrics": "l2norm = myplugins:NORM",
}

CONFIGS = {  # the user's config dir: one option per group
    "algorithm/prox_gd.yaml": "name: prox_gd\nbeta: 0.05\n",
    "regularizer/sql2.yaml": "name: sql2\nlam: 0.001\n",
    "compressor/scaled_sign.yaml": "name: scaled_sign\n",
    "model/tiny.yaml": "name: tiny\ninit: default\nhidden: 8\n",
    "dataset/digits_small.yaml": "name: digits_small\n",
    # by _target_, no entry point: the same class under another name
    "regularizer/sql2_target.yaml": "name: sql2_target\n_target_: myplugins.SquaredL2\nlam: 0.002\n",
    "experiment/small_prox_gd.yaml": "# @package _global_\ndefaults:\n  - override /algorithm: prox_gd\n"
    "  - override /dataset: digits_small\nT: 2\n",
}
ALL = "algorithm=prox_gd regularizer=sql2 compressor=scaled_sign model=tiny dataset=digits_small".split()


def write_dist(where, name, module, entry_points):
    """A distribution ``name`` as pip would install it: the module and its .dist-info."""
    where.mkdir(parents=True, exist_ok=True)
    (where / f"{name}.py").write_text(module)
    info = where / f"{name}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "".join(f"[fedprox_cli.{g}]\n{line}\n\n" for g, line in entry_points.items())
    )


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """The plugin distribution on sys.path and its config dir; the registries restored after."""
    write_dist(tmp_path / "site", "myplugins", MODULE, ENTRY_POINTS)
    for rel, text in CONFIGS.items():
        (tmp_path / "conf" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "conf" / rel).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    registries = [
        algorithms.base._REGISTRY,
        regularizers._REGISTRY,
        compressors._REGISTRY,
        models._REGISTRY,
        datasets._REGISTRY,
        metric_table._REGISTRY,
    ]
    saved = [dict(r) for r in registries]
    yield tmp_path
    for registry, entries in zip(registries, saved):
        registry.clear()
        registry.update(entries)
        registry.broken.clear()


def test_entry_points_complete_every_registry(plugin):
    assert "prox_gd" in algorithms.names() and "fedcanon" in algorithms.names()
    for names, name in (
        (regularizers.names, "sql2"),
        (compressors.names, "scaled_sign"),
        (models.names, "tiny"),
        (datasets.names, "digits_small"),
    ):
        assert name in names()
    assert algorithms.build("prox_gd", beta=0.1).beta == 0.1
    assert regularizers.build("sql2", lam=0.5).lam == 0.5
    with pytest.raises(UserError, match=r"unknown compressor 'nope'; the options: .*scaled_sign"):
        compressors.build("nope")
    with pytest.raises(UserError, match="algorithm prox_gd has no parameter mu"):
        algorithms.build("prox_gd", mu=1.0)


def test_a_name_loads_only_its_own_entry_point(plugin):
    """A lookup imports the plugin it needs, not every installed one; a plugin that cannot be
    imported is one line when chosen, and hides nothing when all are listed (a suite that
    lists every model still collects)."""
    write_dist(
        plugin / "site",
        "brokenplugin",
        "raise RuntimeError('broken on import')\n",
        {"models": "broken = brokenplugin:model"},
    )
    assert models.build("tiny", (1, 8, 8), 10, hidden=4)[1].out_features == 4
    assert "tiny" in models.names() and "broken" not in models.names()
    with pytest.raises(
        UserError,
        match=r"model plugin 'broken' \(brokenplugin:model, entry point "
        r"group fedprox_cli.models\) cannot be loaded: RuntimeError",
    ):
        models.lookup("broken")
    with pytest.raises(
        UserError,
        match=r"unknown model 'tinny' \(did you mean tiny\?\); the options: .*tiny.*; "
        r"installed but not loadable: broken$",
    ):
        models.lookup("tinny")


def _per_round(run_dir, column):
    m = pd.read_csv(run_dir / "metrics.csv")
    return m[column].diff().dropna().unique().tolist()


def test_plugins_of_every_kind_from_the_command_line(plugin):
    out = plugin / "run"
    r = fedrun(
        "--config-dir",
        str(plugin / "conf"),
        *ALL,
        "T=2",
        "eval_every=1",
        f"hydra.run.dir={out}",
        path=[plugin / "site"],
    )
    assert r.returncode == 0, r.stderr
    d = (64 * 8 + 8) + (8 * 10 + 10)  # tiny on 8x8 digits
    n = 10
    assert _per_round(out, "bytes_up") == [n * (4 + math.ceil(d / 8))]
    assert _per_round(out, "bytes_down") == [n * d * 4]
    assert _per_round(out, "prox_calls") == [1]
    assert _per_round(out, "grad_evals") == [n]


def test_a_plugin_metric_is_one_entry_recorded_plotted_and_tabled(plugin, capsys):
    """A metric is one table entry plus its computation (docs/extending.md): an installed one is
    a column of every run's metrics.csv, and fedrun-plot and fedrun-table read it by name, with
    its label, direction, log scale and format from its entry."""
    out = plugin / "run"
    r = fedrun("dataset=digits", "model=linear", "n=4", "T=2", f"hydra.run.dir={out}",
               path=[plugin / "site"])
    assert r.returncode == 0, r.stderr
    m = pd.read_csv(out / "metrics.csv")
    assert list(m.columns) == [*metric_table.BUILT_IN, "l2norm"]
    assert (m["l2norm"] > 0).all() and m["l2norm"].iloc[0] != m["l2norm"].iloc[-1]
    entry = metric_table.metric("l2norm")
    assert (entry.label(), entry.direction.best, entry.log) == ("model norm ||x||_2", "lowest", True)
    with pytest.raises(SystemExit):
        plot_cli.main(["--help"])
    assert "l2norm (model norm ||x||_2)" in " ".join(capsys.readouterr().out.split())
    assert plot_cli.main([str(out), "--y", "l2norm", "--out", str(plugin / "norm.png")]) == 0
    assert (plugin / "norm.png").stat().st_size > 0
    assert table_cli.main([str(out), "--metric", "l2norm", "--column", "none"]) == 0
    assert f"{m['l2norm'].iloc[-1]:.3e}" in capsys.readouterr().out  # the entry's format


def test_target_in_a_yaml_of_a_searchpath_config_dir(plugin):
    """``_target_`` names the class; ``hydra.searchpath`` adds the user's groups and presets."""
    out = plugin / "run"
    r = fedrun(
        f"hydra.searchpath=[file://{plugin / 'conf'}]",
        "experiment=small_prox_gd",
        "regularizer=sql2_target",
        "model=linear",
        f"hydra.run.dir={out}",
        path=[plugin / "site"],
    )
    assert r.returncode == 0, r.stderr
    cfg = (out / "config.yaml").read_text()
    assert "_target_: myplugins.SquaredL2" in cfg and "name: prox_gd" in cfg and "T: 2" in cfg


def test_a_broken_plugin_is_one_line_and_exit_2(plugin):
    (plugin / "conf" / "regularizer" / "gone.yaml").write_text(
        "name: gone\n_target_: myplugins.Gone\n"
    )
    r = fedrun(
        "--config-dir",
        str(plugin / "conf"),
        "dataset=digits",
        "regularizer=gone",
        "T=1",
        f"hydra.run.dir={plugin / 'run'}",
        path=[plugin / "site"],
    )
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "fedrun: error: myplugins.Gone cannot be imported (AttributeError: module "
        "'myplugins' has no attribute 'Gone'); a plugin's class by dotted path is package.module.Class, "
        "importable from the current folder or PYTHONPATH"
    ]


# ----------------------------------------------------------- the example package (examples/)

@needs_example
def test_example_fedprox_server_counts_and_descent(tmp_path):
    out = tmp_path / "run"
    r = fedrun(
        "algorithm=fedprox_server",
        "dataset=digits",
        "T=3",
        "eval_every=1",
        "algorithm.beta=0.01",
        f"hydra.run.dir={out}",
    )
    assert r.returncode == 0, r.stderr
    d, n, K = 64 * 200 + 200 + 200 * 200 + 200 + 200 * 10 + 10, 10, 10  # mlp on digits
    assert _per_round(out, "bytes_up") == [n * d * 4] == _per_round(out, "bytes_down")
    assert _per_round(out, "prox_calls") == [1]
    assert _per_round(out, "grad_evals") == [n * K]
    objective = pd.read_csv(out / "metrics.csv")["objective"]
    assert (objective.diff().dropna() < 0).all(), objective.tolist()


@needs_example
def test_example_fedprox_server_with_mu_near_0_is_fedavg(tmp_path):
    """mu -> 0 (every float parameter must be > 0), alpha = 1, h = 0: the stated update rule
    is FedAvg's."""
    import fedprox_cli

    common = ["dataset=digits", "T=2", "regularizer=none", "algorithm.beta=0.01"]
    a = fedprox_cli.run(
        ["algorithm=fedprox_server", "algorithm.mu=1e-12", *common], folder=tmp_path / "a"
    )
    b = fedprox_cli.run(["algorithm=fedavg", *common], folder=tmp_path / "b")
    cols = ["objective", "test_acc", "bytes_up", "bytes_down"]
    pd.testing.assert_frame_equal(a.metrics[cols], b.metrics[cols], rtol=1e-5)


def test_help_lists_installed_plugins(plugin):
    r = fedrun("--help", path=[plugin / "site"])
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    for group, name in (
        ("algorithm", "prox_gd"),
        ("regularizer", "sql2"),
        ("compressor", "scaled_sign"),
        ("model", "tiny"),
        ("dataset", "digits_small"),
    ):
        start = lines.index(f"  {group}:") + 1
        end = next(i for i in range(start, len(lines)) if not lines[i].startswith("    "))
        assert any(
            line.split() == [name, "installed", "plugin", f"(myplugins:{ep})"]
            for line in lines[start:end]
            for ep in [ENTRY_POINTS[group + "s"].split(":")[1]]
        ), group


# ------------------------------------------------- contracts checked at the door (exit 2)

BROKEN = '''
from dataclasses import dataclass
from typing import ClassVar

from fedprox_cli.algorithms import Algorithm
from fedprox_cli.operators.compressors import Compressor
from fedprox_cli.operators.regularizers import Regularizer


@dataclass(kw_only=True)
class NoName(Algorithm):
    beta: float = 0.1

    def init(self, z0, n):
        return {"z": z0.clone()}

    def round(self, state, env, t):
        return state

    def stationarity_step(self, K):
        return self.beta


@dataclass(kw_only=True)
class ListSteps(NoName):
    name: ClassVar[str] = "list_steps"

    def prox_steps(self, K, T):
        return [self.beta]


@dataclass(kw_only=True)
class Raises(NoName):
    name: ClassVar[str] = "raises"

    def round(self, state, env, t):
        return state["w"]


@dataclass(kw_only=True)
class ListState(NoName):
    name: ClassVar[str] = "list_state"

    def round(self, state, env, t):
        return [state["z"]]


@dataclass(kw_only=True)
class NoDefault(NoName):
    name: ClassVar[str] = "no_default"
    mu: float


@dataclass(frozen=True)
class NoProx(Regularizer):
    name: ClassVar[str] = "no_prox"

    def _value(self, x):
        return x.abs().sum(-1)


@dataclass(frozen=True)
class BytesAsFloat(Compressor):
    name: ClassVar[str] = "bytes_as_float"

    def __call__(self, V, seed=0):
        return V, 4.0 * V.numel()


def model_not_a_module(input_shape, num_classes):
    return [input_shape]
'''

BROKEN_CASES = {  # group option -> the one line
    "algorithm=no_name": "algorithm plugin 'no_name' (_target_ broken.NoName) breaks the algorithm contract: it "
    "must define name: ClassVar[str] = \"<its config name>\" (docs/extending.md)",
    "algorithm=list_steps": "algorithm plugin 'list_steps' (broken.ListSteps) breaks its contract: prox_steps(K, T) "
    "must return a dict of str -> number > 0 (each prox parameter by name), got [0.1]",
    "algorithm=raises": "algorithm plugin 'raises' (broken.Raises) failed in round 1 (round(state, env, t=0)): KeyError: 'w' "
    "(at {site}/broken.py:37)",
    "algorithm=list_state": "algorithm plugin 'list_state' (broken.ListState) breaks its contract: round(state, env, "
    "t) must return the next state: a dict of str -> tensor (or number) with the keys of init's (z), got a list of a Tensor of shape (650,)",
    "regularizer=no_prox": "regularizer plugin 'no_prox' (_target_ broken.NoProx) breaks the regularizer contract: "
    "it must define the method _prox (docs/extending.md)",
    "compressor=bytes_as_float": "compressor plugin 'bytes_as_float' (broken.BytesAsFloat) breaks its contract: "
    "__call__(V, seed) must return (a tensor of V's shape (4, 650), bytes as an int >= 0)",
    "model=not_a_module": "model plugin 'not_a_module' (broken.model_not_a_module) breaks its contract: the builder "
    "must return a torch.nn.Module, got [(1, 8, 8)]",
}


@pytest.fixture
def broken(plugin, monkeypatch):
    (plugin / "site" / "broken.py").write_text(BROKEN)
    monkeypatch.delitem(sys.modules, "broken", raising=False)  # each test imports its own copy
    conf = plugin / "conf"
    for option, target in (
        ("algorithm/no_name", "NoName"),
        ("algorithm/list_steps", "ListSteps"),
        ("algorithm/raises", "Raises"),
        ("algorithm/list_state", "ListState"),
        ("regularizer/no_prox", "NoProx"),
        ("compressor/bytes_as_float", "BytesAsFloat"),
        ("model/not_a_module", "model_not_a_module"),
    ):
        group, name = option.split("/")
        extra = {"algorithm": "beta: 0.1\n", "model": "init: default\n"}.get(group, "")
        (conf / f"{option}.yaml").write_text(f"name: {name}\n_target_: broken.{target}\n{extra}")
    return plugin


@pytest.mark.parametrize("choice", BROKEN_CASES)
def test_a_plugin_that_breaks_its_contract_is_the_users_error(broken, choice):
    """Each broken contract is one UserError naming the plugin and the contract (fedrun:
    exit 2), from the Python API as from the command line."""
    import fedprox_cli
    from fedprox_cli.common.plugin_calls import PluginError

    group = choice.split("=")[0]
    args = [
        "dataset=digits",
        "T=1",
        "K=2",
        "n=4",
        "regularizer=none",
        "model=linear",
        choice,
        *(["algorithm=prox_gd"] if group == "compressor" else []),
    ]
    expected = BROKEN_CASES[choice].format(site=broken / "site")
    overrides = [f"hydra.searchpath=[file://{broken / 'conf'}]", *args]
    try:  # refused before the run, or the run's error (once the data and model are built)
        run = fedprox_cli.run(overrides, folder=broken / "run")
    except PluginError as e:
        message = str(e)
    else:
        assert run.status == "error"
        message = run.summary["error"]
    assert message.startswith(expected)


def test_a_broken_plugin_from_the_command_line_is_one_line_exit_2(broken):
    r = fedrun(
        "--config-dir",
        str(broken / "conf"),
        "dataset=digits",
        "model=linear",
        "algorithm=raises",
        "regularizer=none",
        "T=1",
        "K=2",
        "n=4",
        f"hydra.run.dir={broken / 'run'}",
        path=[broken / "site"],
    )
    assert r.returncode == 2, r.stderr
    errors = [line for line in r.stderr.splitlines() if "error:" in line]
    assert errors == [
        "fedrun: error: " + BROKEN_CASES["algorithm=raises"].format(site=broken / "site")
    ]


def test_a_plugin_without_yaml_or_default_says_what_to_add(plugin):
    (plugin / "site" / "broken.py").write_text(BROKEN)
    info = next((plugin / "site").glob("myplugins-*.dist-info"))
    (info / "entry_points.txt").write_text(
        (info / "entry_points.txt").read_text()
        + "[fedprox_cli.algorithms]\nno_default = broken:NoDefault\n"
    )
    r = fedrun("algorithm=no_default", "dataset=digits", "T=1", path=[plugin / "site"])
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "fedrun: error: algorithm plugin 'no_default' has no config algorithm/no_default.yaml and its "
        "parameter mu has no default: give it a default, or add algorithm/no_default.yaml (name: "
        "no_default and every parameter) to a config dir (--config-dir DIR)"
    ]
