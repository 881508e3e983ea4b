"""Start-up at the cost of the work: what a run imports (only what it uses), the decoded-data
cache (decoded once, read back bit-identical, decoded again when a source changes, rebuilt
when unreadable) and ``engine=auto`` sparing a short run vmap's start-up."""

import contextlib
import importlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from conftest import child_env
from data_fixtures import mnist_files, write_idx

from fedprox_cli import data
from fedprox_cli.data import cache

PROBE = """import json, sys
sys.argv = ["fedrun", *sys.argv[1:]]
from fedprox_cli.cli import drawer, main
plot_time = set(sys.modules)
start, at_drawer = drawer.start, []
def started():
    at_drawer.extend(sys.modules)
    start()
drawer.start = started
try:
    main.main()
except SystemExit as e:
    code = e.code
json.dump({"code": code, "loaded": sorted(sys.modules), "at_import": sorted(plot_time),
           "at_drawer": sorted(at_drawer)}, sys.stderr)
"""


def probe_run(tmp_path, name, *args) -> dict:
    """The modules a fedrun process loaded (at the end, after importing the CLI, and as it
    started its drawing process)."""
    p = subprocess.run(
        [sys.executable, "-c", PROBE, *args, f"hydra.run.dir={tmp_path / name}"],
        cwd=tmp_path,
        env=child_env(
            XDG_CACHE_HOME=str(tmp_path / "xdg"),
            FEDPROX_CACHE=str(tmp_path / "decoded"),
            OMP_NUM_THREADS="1",
        ),
        capture_output=True,
        text=True,
        timeout=300,
    )
    return json.loads(p.stderr[p.stderr.index('{"code"') :])


def test_a_tiny_run_imports_only_what_it_uses(tmp_path):
    tiny = ("dataset=digits", "model=linear", "T=1", "K=2", "n=4")
    first = probe_run(
        tmp_path, "first", *tiny
    )  # decodes digits (scikit-learn), measures the engines
    assert first["code"] == 0 and "sklearn" in first["loaded"]
    again = probe_run(tmp_path, "again", *tiny)
    assert again["code"] == 0
    loaded = set(again["loaded"])
    for unused in ("sklearn", "torchvision", "pandas", "scipy", "torch._dynamo", "matplotlib"):
        assert unused not in loaded, f"a tiny run imported {unused}"
    assert (tmp_path / "again" / "metrics.png").is_file()  # drawn by the drawing process
    # the drawing process starts before torch loads: its imports and warm-up overlap torch's
    assert again["at_drawer"] and "torch" not in again["at_drawer"]
    assert not {
        m
        for m in again["at_import"]
        if m.split(".")[0] in ("matplotlib", "pandas", "torchvision", "sklearn")
    }


def test_a_runs_figure_is_drawn_without_pandas():
    """The drawing process (cli/drawer.py) draws metrics.png reading metrics.csv with numpy:
    pandas' import was most of its first figure's time."""
    code = (
        "import sys; from fedprox_cli.analysis import run_figures; run_figures.warm_up(); "
        "print('matplotlib' in sys.modules, 'pandas' in sys.modules)"
    )
    p = subprocess.run(
        [sys.executable, "-c", code], env=child_env(), capture_output=True, text=True, timeout=120
    )
    assert p.stdout.split() == ["True", "False"], p.stderr


def test_loading_a_dataset_does_not_import_torchvision(tmp_path):
    mnist_files(tmp_path)
    code = (
        f"import sys; from fedprox_cli import data; data.load('mnist', {str(tmp_path)!r}); "
        f"print('torchvision' in sys.modules, 'sklearn' in sys.modules)"
    )
    p = subprocess.run(
        [sys.executable, "-c", code],
        env=child_env(FEDPROX_CACHE=str(tmp_path / "c")),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.stdout.split() == ["False", "False"], p.stderr


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDPROX_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def entries(folder):
    return sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))


def test_a_dataset_is_decoded_once_and_read_back_identically(tmp_path, cache_dir):
    mnist_files(tmp_path)
    first = data.load("mnist", tmp_path)
    (entry,) = entries(cache_dir)
    assert entry.startswith("mnist-") and {p.name for p in (cache_dir / entry).iterdir()} == {
        "train_x.npy",
        "train_y.npy",
        "test_x.npy",
        "test_y.npy",
    }
    assert np.load(cache_dir / entry / "train_x.npy").dtype == np.uint8
    again = data.load("mnist", tmp_path)
    for a, b in zip(
        (first.train_x, first.train_y, first.test_x, first.test_y),
        (again.train_x, again.train_y, again.test_x, again.test_y),
    ):
        assert a.dtype == b.dtype and torch.equal(a, b)
    assert entries(cache_dir) == [entry]


def test_a_changed_source_is_decoded_again(tmp_path, cache_dir):
    f = mnist_files(tmp_path)
    data.load("mnist", tmp_path)
    labels = (f["train_y"] + 1) % 10
    write_idx(tmp_path / "MNIST" / "raw" / "train-labels-idx1-ubyte", labels)
    assert data.load("mnist", tmp_path).train_y.tolist() == labels.tolist()
    assert len(entries(cache_dir)) == 2


def test_an_unreadable_entry_is_decoded_again(tmp_path, cache_dir, capsys):
    mnist_files(tmp_path)
    first = data.load("mnist", tmp_path)
    (entry,) = entries(cache_dir)
    (cache_dir / entry / "train_x.npy").write_bytes(b"not an array")
    again = data.load("mnist", tmp_path)
    assert torch.equal(first.train_x, again.train_x)
    assert "cannot be read" in capsys.readouterr().err
    assert np.load(cache_dir / entry / "train_x.npy").shape == (20, 28, 28)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_an_unwritable_cache_only_costs_the_decoding(tmp_path, cache_dir):
    mnist_files(tmp_path)
    cache_dir.mkdir()
    cache_dir.chmod(0o500)
    try:
        assert data.load("mnist", tmp_path).train_x.shape == (20, 1, 28, 28)
        assert entries(cache_dir) == []
    finally:
        cache_dir.chmod(0o700)


def test_lookup_is_the_normalization_bit_for_bit():
    u8 = np.random.default_rng(0).integers(0, 256, (7, 3, 5, 4)).astype(np.uint8)
    mean, std = (
        torch.tensor([0.49, 0.48, 0.45]).view(1, 3, 1, 1),
        torch.tensor([0.25, 0.24, 0.26]).view(1, 3, 1, 1),
    )

    def normalize(t):
        return (t / 255.0 - mean) / std

    assert torch.equal(cache.lookup(u8, normalize, channel_dim=1), normalize(torch.from_numpy(u8)))
    grey = u8[:, 0]
    assert torch.equal(
        cache.lookup(grey, lambda t: (t.double() / 255.0).float() * 3 - 1),
        (torch.from_numpy(grey).double() / 255.0).float() * 3 - 1,
    )


def test_the_vmap_engine_does_not_import_dynamo_or_decompositions(tmp_path):
    """vmap's gradient transform imports torch._dynamo for a context that only matters once
    it is loaded (fedprox_cli.engine.batched), and nll_loss under vmap runs a Python
    decomposition that imports sympy (base.cross_entropy): a vmap run goes without either."""
    tiny = ("dataset=digits", "model=linear", "T=2", "K=2", "n=4", "engine=vmap")
    run = probe_run(tmp_path, "vmap", *tiny)
    assert run["code"] == 0
    assert not {"torch._dynamo", "sympy"} & set(run["loaded"])


def test_the_loss_is_torchs_cross_entropy_bit_for_bit():
    """base.cross_entropy (gather of log_softmax) gives F.cross_entropy's value and gradient."""
    import torch.nn.functional as F

    from fedprox_cli.engine.base import cross_entropy

    gen = torch.Generator().manual_seed(1)
    z, y, w = (
        torch.randn(33, 10, generator=gen),
        torch.randint(0, 10, (33,), generator=gen),
        torch.rand(33, generator=gen),
    )
    mine, theirs = z.clone().requires_grad_(), z.clone().requires_grad_()
    a, b = cross_entropy(mine, y, w), (w * F.cross_entropy(theirs, y, reduction="none")).sum()
    a.backward(), b.backward()
    assert torch.equal(a, b) and torch.equal(mine.grad, theirs.grad)


def test_batched_grad_is_torch_funcs_with_and_without_dynamo():
    """The same numbers as torch.func's own transform, bit for bit, before torch._dynamo is
    imported (autograd_grad's own path) and after (torch's function)."""
    from torch.func import grad_and_value, vmap

    from fedprox_cli.engine import batched

    gen = torch.Generator().manual_seed(0)
    W, x = torch.randn(5, 12, generator=gen), torch.randn(5, 7, 3, generator=gen)

    def loss(w, xs):  # a tiny model: rows of W are (3, 4) matrices; one unused input
        return torch.tanh(xs @ w.view(3, 4)).square().mean()

    got = batched.batched_grad(loss)(W, x)
    if batched.DYNAMO not in sys.modules:
        assert batched.eager_transforms._autograd_grad is batched.autograd_grad
    importlib.import_module("torch._dynamo")  # now torch's own function runs
    want = vmap(grad_and_value(loss))(W, x)
    assert all(torch.equal(a, b) for a, b in zip(got, want))
    assert all(torch.equal(a, b) for a, b in zip(batched.batched_grad(loss)(W, x), want))
    assert batched.autograd_grad([x.sum()], [W])[0].equal(
        torch.zeros_like(W)
    )  # not a function of W


def test_a_cached_datasets_fingerprint_is_computed_once(tmp_path, cache_dir, monkeypatch):
    """The data fingerprint of data read back from the decoded-data cache is kept beside it
    (fingerprints.json, under the entry and the loader's code) and read, not recomputed; other
    arrays in the entry (a file rewritten) make another origin, computed again."""
    from fedprox_cli.runs import provenance

    mnist_files(tmp_path)
    first = data.load("mnist", tmp_path)
    assert first.origin.startswith("mnist-")
    made = provenance.of_data(first)
    assert made == provenance._of_arrays(first)
    with monkeypatch.context() as m:
        m.setattr(provenance, "_of_arrays", pytest.fail)  # read, not computed
        assert provenance.of_data(data.load("mnist", tmp_path)) == made
    assert provenance.cache_file().parent == cache_dir
    (entry,) = [e for e in entries(cache_dir) if (cache_dir / e).is_dir()]
    y = np.load(cache_dir / entry / "test_y.npy")
    np.save(cache_dir / entry / "test_y.npy", (y + 1) % 10)  # the entry changed under the cache
    again = data.load("mnist", tmp_path)
    assert again.origin != first.origin
    changed = provenance.of_data(again)
    assert changed["test_y"] != made["test_y"] and changed["train_x"] == made["train_x"]


def composed(args, tmp_path, monkeypatch, once: bool):
    """What a Hydra run of fedrun's configs with ``args`` hands its task (the config and its
    Hydra node, as YAML) or the error it raises, and how many times it composed; with or
    without fedprox_cli.config.compose_once."""
    from hydra import main as hydra_main
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    from fedprox_cli.common.package import CONF_DIR
    from fedprox_cli.config import compose_once
    from fedprox_cli.config.compose import overrides, reference_for

    got, calls = {}, []
    impl = ConfigLoaderImpl._load_configuration_impl
    monkeypatch.setattr(
        ConfigLoaderImpl,
        "_load_configuration_impl",
        lambda self, **kw: calls.append(1) or impl(self, **kw),
    )
    monkeypatch.setenv("HYDRA_FULL_ERROR", "1")
    monkeypatch.setattr(sys, "argv", ["fedrun", *args, f"hydra.run.dir={tmp_path / 'run'}"])

    @hydra_main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")
    def task(cfg):
        got["config"] = OmegaConf.to_yaml(cfg) + OmegaConf.to_yaml(HydraConfig.get())
        got["compositions"] = len(calls)  # before the task's own below
        kept = compose_once.reference()  # the validation's reference, kept from the composition
        if kept is not None:
            hc = HydraConfig.get()
            choices, given = dict(hc.runtime.choices), overrides(hc)
            ours, anew = (reference_for(cfg, choices, given, r) for r in (kept, None))
            got["reference"] = OmegaConf.to_yaml(ours) == OmegaConf.to_yaml(anew)

    try:
        with compose_once.composed_once() if once else contextlib.nullcontext():
            task()
    except Exception as e:  # noqa: BLE001 -- the same error either way
        got["error"] = f"{type(e).__name__}: {e}"
    return got, got.pop("compositions", len(calls))


@pytest.mark.parametrize(
    "args",
    [
        ("dataset=digits", "model=linear", "n=4"),
        ("experiment=fedcanon_fig2_quick", "algorithm.beta=0.02", "hydra.job.name=other"),
        ("algorithm=fedavg", "algorithm.beta=0.5", "+extra=1", "T=7"),
        ("~algorithm", "regularizer.lam=0.1"),  # the reference keeps the deleted group
        ("algorithm=null", "regularizer.lam=0.1"),
        ("~metrics.per_client",),
        ("n=4,5",),  # a sweep's values without -m: refused the same way
    ],
)
def test_a_run_composes_once_the_config_hydra_composes_twice(args, tmp_path, monkeypatch):
    """The config (and the validation's reference config) of one composition are those of
    Hydra's two compositions (and of composing the reference anew)."""
    hydras, twice = composed(args, tmp_path, monkeypatch, once=False)
    ours, once = composed(args, tmp_path, monkeypatch, once=True)
    if "config" in ours:  # the validation's reference, kept from the one composition
        assert ours.pop("reference") is True
    assert ours == hydras and "mode: RUN" in hydras.get("config", "mode: RUN")
    assert (twice, once) == ((2, 3) if "error" in hydras else (2, 1))
