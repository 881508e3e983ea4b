"""The one guarded reader of files read back from run folders (fedprox_cli.common.guarded): size,
depth and YAML alias limits, one line naming the file, and every reader of the package going
through it -- fedrun (a re-run, the dry run), fedrun-report, -table, -plot and load_runs."""

from __future__ import annotations

import ast
import json
import time
from pathlib import Path

import pytest

import fedprox_cli
from fedprox_cli.cli import plot as plot_cli
from fedprox_cli.cli import status
from fedprox_cli.cli import table as table_cli
from fedprox_cli.common import guarded
from fedprox_cli.common.guarded import Unreadable
from fedprox_cli.config.compose import compose
from fedprox_cli.runs import runner

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "fedprox_cli"
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def laughs(levels: int = 9) -> str:
    """A "billion laughs" YAML document: 9 ** levels strings from a few hundred bytes."""
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels):
        p, c = chr(ord("a") + i - 1), chr(ord("a") + i)
        lines.append(f"{c}: &{c} [" + ",".join([f"*{p}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def test_billion_laughs_refused_in_milliseconds(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(laughs())
    assert path.stat().st_size < 600
    start = time.perf_counter()
    with pytest.raises(
        Unreadable, match="more than 1,000,000 values once its YAML aliases are expanded"
    ):
        guarded.read_config(path)
    assert time.perf_counter() - start < 1.0
    path.write_text(laughs(3) + "key: 1e-05\n")  # 729 values: read (as OmegaConf reads numbers)
    assert guarded.read_config(path).key == 1e-05


@pytest.mark.parametrize(
    "text, why",
    [
        ("[" * 200_000 + "]" * 200_000, "nested more than 100 levels deep"),
        ('{"a": ' * 150 + "1" + "}" * 150, "nested more than 100 levels deep"),  # parses, too deep
        ('{"status": "finished", "round"', "not JSON"),  # cut short
        ("", "not JSON"),
        (b"\xff\xfe{}", "not UTF-8 text"),
    ],
)
def test_json_refusals_name_the_file(tmp_path, text, why):
    path = tmp_path / "summary.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(Unreadable) as e:
        guarded.read_json(path)
    assert str(e.value).startswith(f"{path} is unreadable: {why}") and "\n" not in str(e.value)


@pytest.mark.parametrize(
    "text, why",
    [
        (
            "a:\n" + "".join("  " * i + "- \n" for i in range(1, 150)),
            "nested more than 100 levels deep",
        ),
        ("[" * 5000 + "]" * 5000, "nested more than 100 levels deep"),
        ("a: [1, 2\n", "not YAML"),
        ("- 1\n- 2\n", "not a YAML mapping"),
        ("a: *nowhere\n", "not YAML"),
    ],
)
def test_yaml_refusals(tmp_path, text, why):
    path = tmp_path / "config.yaml"
    path.write_text(text)
    with pytest.raises(Unreadable, match=why):
        guarded.read_config(path)


def test_a_part_of_a_yaml_reads_as_the_whole_reads_it(tmp_path):
    """A value inside a document (Hydra's record read for its choices) is what reading the
    whole gives there; a key on its way twice is refused as the whole is; a part that is not
    there is a KeyError; the limits hold for the part."""
    path = tmp_path / "hydra.yaml"
    path.write_text(
        "hydra:\n  run:\n    dir: x\n  runtime:\n    version: 1.3\n    choices:\n"
        "      algorithm: fedcanon\n      experiment: null\n      lr: 1e-05\n"
    )
    part = ("hydra", "runtime", "choices")
    whole = guarded.read_yaml(path)
    assert guarded.read_yaml(path, part) == whole["hydra"]["runtime"]["choices"]
    assert guarded.read_yaml(path, part)["lr"] == 1e-05
    with pytest.raises(KeyError):
        guarded.read_yaml(path, ("hydra", "job"))
    with pytest.raises(KeyError):
        guarded.read_yaml(path, ("hydra", "run", "dir", "x"))  # inside a value
    path.write_text("hydra:\n  runtime: {choices: {a: 1}}\n  runtime: {choices: {a: 2}}\n")
    with pytest.raises(Unreadable, match="duplicate key runtime"):
        guarded.read_yaml(path, part)
    with pytest.raises(Unreadable, match="duplicate key runtime"):
        guarded.read_yaml(path)
    path.write_text("hydra:\n  runtime:\n    choices: " + "[" * 150 + "]" * 150 + "\n")
    with pytest.raises(Unreadable, match="nested more than 100 levels deep"):
        guarded.read_yaml(path, part)


def test_size_limits(tmp_path, monkeypatch):
    path = tmp_path / "summary.json"
    path.write_text(json.dumps({"pad": "x" * 2000}))
    monkeypatch.setattr(guarded, "TEXT_BYTES", 1000)
    with pytest.raises(Unreadable, match="2,011 bytes, more than the 1,000"):
        guarded.read_json(path)
    monkeypatch.setattr(guarded, "TABLE_BYTES", 100)
    (tmp_path / "metrics.csv").write_text("round,x\n" + "1,2\n" * 100)
    with pytest.raises(Unreadable, match="metrics.csv is unreadable: 408 bytes"):
        guarded.read_csv(tmp_path / "metrics.csv")
    with pytest.raises(FileNotFoundError):  # a missing file stays what it is
        guarded.read_json(tmp_path / "none.json")


READERS = {
    "json.load",
    "json.loads",
    "yaml.load",
    "yaml.safe_load",
    "yaml.full_load",
    "yaml.compose",
    "OmegaConf.load",
    "pd.read_csv",
    "torch.load",
    "np.load",
}
# files that are not read back from a run folder: the package's own config, datasets' files
OUTSIDE = {
    ("api.py", "OmegaConf.load"),
    ("data/datasets.py", "torch.load"),
    ("data/tabular.py", "pd.read_csv"),
    ("data/leaf.py", "json.loads"),
    ("engine/compile.py", "json.loads"),
    ("cli/drawer.py", "json.loads"),  # the drawing process's one-line messages on its pipes
    ("claims/declare.py", "yaml.safe_load"),  # the package's own claims (package data)
    ("data/cache.py", "np.load"),
}  # fedrun's decoded-data cache (no pickles)


def test_every_reader_goes_through_the_gate():
    """json/yaml/OmegaConf/pandas/torch/numpy loaders are called in common/guarded.py only, or on
    a file opened by ``guarded.opened`` (a checkpoint, a partition), or on files of OUTSIDE."""
    bad = []
    for path in PKG.rglob("*.py"):
        rel = path.relative_to(PKG).as_posix()
        if rel == "common/guarded.py":
            continue
        tree = ast.parse(path.read_text())
        gated = {
            id(n)
            for w in ast.walk(tree)
            if isinstance(w, ast.With)
            and any("guarded.opened" in ast.unparse(i.context_expr) for i in w.items)
            for n in ast.walk(w)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                name = ast.unparse(node.func)
                if name in READERS and id(node) not in gated and (rel, name) not in OUTSIDE:
                    bad.append(f"{rel}:{node.lineno} {name}")
    assert not bad, bad


# run files opened by their own format's owner: the state a run resumes from (torch) and the
# clients' index arrays (numpy; fedprox_cli.data.load_partition), both through guarded.opened;
# the lock, opened to be held, never read
OWNED = {
    ("runs/run_folder.py", "checkpoint.load"),
    ("analysis/run_plots.py", "data.load_partition"),
    ("runs/lock.py", "open_regular"),
}


def test_a_run_file_is_read_in_run_files_only():
    """Outside common/run_files.py no call that reads, loads or opens names a run folder's file
    (``run_files.SUMMARY``, ``run_files.CONFIG``, ...): every read of a run file is one of
    run_files' readers (but for the files of OWNED)."""
    bad = []
    for path in PKG.rglob("*.py"):
        rel = path.relative_to(PKG).as_posix()
        if rel == "common/run_files.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            name = ast.unparse(node.func)
            verb = name.rsplit(".", 1)[-1]
            if name.startswith("run_files.") or not any(
                w in verb for w in ("read", "load", "open")
            ):
                continue
            inside = [*node.args, *(kw.value for kw in node.keywords)]
            if isinstance(node.func, ast.Attribute):
                inside.append(node.func.value)
            named = {
                ast.unparse(n)
                for arg in inside
                for n in ast.walk(arg)
                if isinstance(n, ast.Attribute)
                and ast.unparse(n.value) == "run_files"
                and n.attr.isupper()
            }
            if named and (rel, name) not in OWNED:
                bad.append(f"{rel}:{node.lineno} {name} {sorted(named)}")
    assert not bad, bad


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """A parent folder of four copies of one finished TINY run: one intact, one with a
    billion-laughs config.yaml, one with a summary.json nested 200,000 deep, one with a truncated
    summary.json."""
    root = tmp_path_factory.mktemp("hostile")
    run = fedprox_cli.run(
        ["dataset=digits", "model=linear", "T=3", "K=2", "n=4"], folder=root / "base"
    )
    assert run.status == "finished"
    import shutil

    for name in ("laughs", "deep", "cut"):
        shutil.copytree(root / "base", root / name)
    (root / "laughs" / "config.yaml").write_text(laughs())
    (root / "deep" / "summary.json").write_text("[" * 200_000 + "]" * 200_000)
    text = (root / "cut" / "summary.json").read_text()
    (root / "cut" / "summary.json").write_text(text[: len(text) // 2])
    return root


def _files(folder: Path) -> dict:
    return {
        p.name: p.read_bytes() for p in folder.iterdir() if p.is_file() and p.name != "fedrun.log"
    }


def test_readers_of_many_runs_skip_each_hostile_run_with_one_line(hostile, capsys):
    assert table_cli.main([str(hostile)]) == 0
    err = capsys.readouterr().err
    for name, why in (
        ("laughs", "config.yaml is unreadable: more than 1,000,000 values"),
        ("deep", "summary.json is unreadable: nested more than 100 levels deep"),
        ("cut", "summary.json is unreadable: not JSON"),
    ):
        assert f"skipped {hostile / name}: {hostile / name}/{why}" in err  # the file's full path
    assert plot_cli.main([str(hostile), "--out", str(hostile / "p.png")]) == 0
    assert "skipped" in capsys.readouterr().err
    with pytest.warns(UserWarning) as warned:
        runs = fedprox_cli.load_runs(hostile)
    assert sorted(str(w.message).split(":")[0] for w in warned) == [
        f"skipped {hostile / n}" for n in ("cut", "deep", "laughs")
    ]
    assert list(runs["folder"]) == [str(hostile / "base")]


def test_report_names_the_unreadable_files(hostile, capsys):
    assert status.main([str(hostile)]) == 0
    out, err = capsys.readouterr()
    assert f"{hostile / 'deep' / 'summary.json'} is unreadable: nested" in err
    assert f"{hostile / 'laughs' / 'config.yaml'} is unreadable: more than" in err
    statuses = {Path(line.split()[0]).name: line.split()[1] for line in out.splitlines()[1:5]}
    assert statuses == {
        "base": "finished",
        "cut": "unreadable",
        "deep": "unreadable",
        "laughs": "finished",
    }


@pytest.mark.parametrize(
    "name, line",
    [
        ("laughs", "holds a run whose config.yaml cannot be read (more than 1,000,000 values"),
        (
            "deep",
            "summary.json is unreadable: nested more than 100 levels deep; choose another run folder",
        ),
        ("cut", "summary.json is unreadable: not JSON"),
    ],
)
def test_a_rerun_into_a_hostile_folder_is_refused(hostile, name, line, capsys):
    before = _files(hostile / name)
    cfg = compose(["dataset=digits", "model=linear", "T=3", "K=2", "n=4"])
    assert runner.run(cfg, hostile / name, progress=False) == 2
    assert line in capsys.readouterr().err
    assert _files(hostile / name) == before


def test_a_huge_metrics_file_is_read_in_the_memory_of_its_numbers(tmp_path):
    """200,000 rows (about 20 MB): read with at most a few times the file's size allocated
    (a list of the rows' strings would take ten times more)."""
    import tracemalloc

    from fedprox_cli.common.run_files import read_metrics

    path = tmp_path / "metrics.csv"
    header = "round,time_s,train_loss,objective,stationarity,test_acc,grad_evals,bytes_up"
    row = ",0.125,0.5123456,0.6123456,0.0123456,0.9123,1000000,2000000\n"
    path.write_text(header + "\n" + "".join(f"{r}{row}" for r in range(200_000)))
    size = path.stat().st_size
    tracemalloc.start()
    try:
        df = read_metrics(tmp_path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(df) == 200_000 and df["round"].iloc[-1] == 199_999
    assert peak < 4 * size, (peak, size)
