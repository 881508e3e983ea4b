"""Start-up at the cost of the work: what a run imports (only what it uses), the decoded-data
cache (decoded once, read back bit-identical, decoded again when a source changes, rebuilt
when unreadable) and ``engine=auto`` sparing a short run vmap's start-up."""

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
from fedprox_cli.engine import choice

PROBE = """import json, sys
sys.argv = ["fedrun", *sys.argv[1:]]
from fedprox_cli.cli import main
plot_time = set(sys.modules)
try:
    main.main()
except SystemExit as e:
    code = e.code
json.dump({"code": code, "loaded": sorted(sys.modules), "at_import": sorted(plot_time)}, sys.stderr)
"""


def probe_run(tmp_path, name, *args) -> dict:
    """The modules a fedrun process loaded (at the end, and after importing the CLI)."""
    p = subprocess.run([sys.executable, "-c", PROBE, *args, f"hydra.run.dir={tmp_path / name}"],
                       cwd=tmp_path, env=child_env(XDG_CACHE_HOME=str(tmp_path / "xdg"), FEDPROX_CACHE=str(tmp_path / "decoded"),
                                     OMP_NUM_THREADS="1"),
                       capture_output=True, text=True, timeout=300)
    return json.loads(p.stderr[p.stderr.index('{"code"'):])


def test_a_tiny_run_imports_only_what_it_uses(tmp_path):
    tiny = ("dataset=digits", "model=linear", "T=1", "K=2", "n=4")
    first = probe_run(tmp_path, "first", *tiny)   # decodes digits (scikit-learn), measures the engines
    assert first["code"] == 0 and "sklearn" in first["loaded"]
    again = probe_run(tmp_path, "again", *tiny)
    assert again["code"] == 0
    loaded = set(again["loaded"])
    for unused in ("sklearn", "torchvision", "pandas", "scipy", "torch._dynamo"):
        assert unused not in loaded, f"a tiny run imported {unused}"
    assert "matplotlib" in loaded  # the plot is drawn ...
    assert not {m for m in again["at_import"] if m.split(".")[0] in ("matplotlib", "pandas", "torchvision", "sklearn")}


def test_loading_a_dataset_does_not_import_torchvision(tmp_path):
    mnist_files(tmp_path)
    code = (f"import sys; from fedprox_cli import data; data.load('mnist', {str(tmp_path)!r}); "
            f"print('torchvision' in sys.modules, 'sklearn' in sys.modules)")
    p = subprocess.run([sys.executable, "-c", code], env=child_env(FEDPROX_CACHE=str(tmp_path / "c")),
                       capture_output=True, text=True, timeout=120)
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
    assert entry.startswith("mnist-") and {p.name for p in (cache_dir / entry).iterdir()} == \
        {"train_x.npy", "train_y.npy", "test_x.npy", "test_y.npy"}
    assert np.load(cache_dir / entry / "train_x.npy").dtype == np.uint8
    again = data.load("mnist", tmp_path)
    for a, b in zip((first.train_x, first.train_y, first.test_x, first.test_y),
                    (again.train_x, again.train_y, again.test_x, again.test_y)):
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
    mean, std = torch.tensor([0.49, 0.48, 0.45]).view(1, 3, 1, 1), torch.tensor([0.25, 0.24, 0.26]).view(1, 3, 1, 1)

    def normalize(t):
        return (t / 255.0 - mean) / std
    assert torch.equal(cache.lookup(u8, normalize, channel_dim=1), normalize(torch.from_numpy(u8)))
    grey = u8[:, 0]
    assert torch.equal(cache.lookup(grey, lambda t: (t.double() / 255.0).float() * 3 - 1),
                       (torch.from_numpy(grey).double() / 255.0).float() * 3 - 1)


def test_a_short_run_is_spared_the_vmap_start_up(monkeypatch):
    record = {"engine": "vmap", "source": "cache", "vmap_import_s": 1.0,
              "s_per_client_step": {"loop": 3e-4, "vmap": 2e-4}}
    monkeypatch.setattr(choice, "_LOADED", {})  # this process has not imported torch._dynamo
    short = choice._short_run(record, client_steps=100)   # gains 0.01 s < 1 s
    assert short["engine"] == "loop" and short["short_run"]
    assert "too short to repay vmap's start-up of 1 s" in choice.line(short)
    assert choice._short_run(record, client_steps=100_000)["engine"] == "vmap"  # gains 10 s
    assert choice._short_run(record, client_steps=None)["engine"] == "vmap"
    assert choice._short_run({**record, "vmap_import_s": None}, 100)["engine"] == "vmap"  # not measured
    monkeypatch.setattr(choice, "_LOADED", {choice.DYNAMO: None})  # paid already
    assert choice._short_run(record, client_steps=100)["engine"] == "vmap"


def test_a_record_without_vmap_start_up_gets_it_from_the_next_run(tmp_path, monkeypatch):
    """Records written before the start-up was measured: the next run that uses vmap (and so
    imports torch._dynamo anyway) times the import and adds it, and a later short run skips vmap."""
    from fedprox_cli.engine.choice import cache_file, read_cache
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(choice, "_LOADED", {})
    monkeypatch.setattr(choice, "_vmap_start_up", lambda: 1.0)
    oracle = type("O", (), {"data": type("D", (), {"n": 4})(), "chunk": 4})()
    monkeypatch.setattr(choice, "cache_key", lambda oracle, clients: "k")
    old = {"engine": "vmap", "s_per_client_step": {"loop": 3e-4, "vmap": 2e-4}, "measured_at": "then"}
    cache_file().parent.mkdir(parents=True)
    cache_file().write_text(json.dumps({"k": old}))
    assert choice.choose(oracle, "auto", client_steps=100)["engine"] == "loop"
    assert read_cache(cache_file())["k"] == {**old, "vmap_import_s": 1.0}
