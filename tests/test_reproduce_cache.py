"""fedrun-reproduce list/plan remember each claim's text (fedprox_cli.claims.cache): computed once,
said again with its warnings, recomputed when the claim's declaration, a file in its run folders,
a file at the results root or the package's code changes."""

import dataclasses

import pytest

from fedprox_cli.claims import cache, declare, sources


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    """Each test's remembered texts in its own folder (the file is the user's cache)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))


@pytest.fixture
def claim(tmp_path):
    c = next(c for c in sources.claims() if c.ran and c.ran[0].folders)
    rs = dataclasses.replace(c.ran[0], folders=("runs",), into="")
    (tmp_path / "root" / "runs" / "a").mkdir(parents=True)
    (tmp_path / "root" / "runs" / "a" / "metrics.csv").write_text("round\n0\n")
    return dataclasses.replace(c, ran=(rs,))


def said(root, claim, command="list"):
    """(text, warnings said, whether it was computed) of one command's claim."""
    calls, warned = [], []

    def make(warn):
        calls.append(1)
        warn("a note")
        return f"text {len(calls)}"

    memo = cache.Cache(root, command)
    text = memo.text(claim, make, warned.append)
    memo.save()
    return text, warned, bool(calls)


def test_a_claim_is_computed_once_and_recomputed_when_its_inputs_change(tmp_path, claim):
    root = tmp_path / "root"
    assert said(root, claim) == ("text 1", ["a note"], True)
    assert said(root, claim) == ("text 1", ["a note"], False)  # remembered, warning said again
    assert said(root, claim, "plan --device cpu")[2]  # another command: its own entry
    assert not said(root, claim)[2]  # ... the first one's kept
    f = root / "runs" / "a" / "metrics.csv"
    f.write_text("round\n0\n1\n")  # a run folder changed
    assert said(root, claim)[2] and not said(root, claim)[2]
    (root / "runs" / "b").mkdir()
    (root / "runs" / "b" / "summary.json").write_text("{}")  # a new run
    assert said(root, claim)[2]
    (root / "bench.txt").write_text("1")  # a file at the results root
    assert said(root, claim)[2]
    assert said(root, dataclasses.replace(claim, short="other words"))[2]  # the declaration changed


def test_a_code_change_recomputes_and_a_broken_cache_file_is_no_error(tmp_path, claim, monkeypatch):
    root = tmp_path / "root"
    said(root, claim)
    with monkeypatch.context() as m:
        m.setattr(cache.Cache, "__init__", _with_code("another digest"))
        assert said(root, claim)[2]
    cache.path().write_text("{not json")
    assert said(root, claim)[2]


def _with_code(code):
    plain = cache.Cache.__init__

    def init(self, root, command):
        plain(self, root, command)
        self.code = code

    return init


def test_a_copy_of_the_results_answers_from_the_remembered_file(tmp_path, claim):
    """Keys are contents, not paths or clocks: a fresh clone of the results (new paths, new
    modification times) is answered without recomputing; answering writes nothing, and no
    command writes into the results (a read leaves a repository's files as they were)."""
    import shutil
    import time

    root = tmp_path / "root"
    files = sorted(p for p in root.rglob("*"))
    said(root, claim)
    assert sorted(p for p in root.rglob("*")) == files and cache.path().is_file()
    time.sleep(0.01)
    copy = tmp_path / "clone"
    shutil.copytree(root, copy, copy_function=shutil.copy)  # new modification times
    before = cache.path().read_bytes()
    assert said(copy, claim) == ("text 1", ["a note"], False)
    assert cache.path().read_bytes() == before


def test_the_file_keeps_the_entries_computed_last(tmp_path, claim, monkeypatch):
    monkeypatch.setattr(cache, "KEEP", 2)
    root = tmp_path / "root"
    for n in range(3):
        said(root, dataclasses.replace(claim, short=f"words {n}"))
    import json

    assert len(json.loads(cache.path().read_text())) == 2
    assert not said(root, dataclasses.replace(claim, short="words 2"))[2]  # the last: kept
    assert said(root, dataclasses.replace(claim, short="words 0"))[2]  # the first: dropped


def test_a_text_naming_the_results_folder_names_the_asking_commands_own(tmp_path, claim):
    """plan's commands name the results folder (hydra.sweep.dir=...): a copy answered from the
    remembered file names the copy, never the folder the text was computed on."""
    import shutil

    root = tmp_path / "root"

    def make(warn):
        warn(f"{root}/runs/a: a finding")
        return f"fedrun -m hydra.sweep.dir={root}/runs"

    memo = cache.Cache(root, "plan")
    assert memo.text(claim, make, lambda m: None) == f"fedrun -m hydra.sweep.dir={root}/runs"
    memo.save()
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    warned = []
    memo = cache.Cache(copy, "plan")
    assert memo.text(claim, make, warned.append) == f"fedrun -m hydra.sweep.dir={copy}/runs"
    assert warned == [f"{copy}/runs/a: a finding"]
