"""Code provenance (fedprox_cli.runs.code_record): summary.json records the code of every plugin
a run used; a finished run made by other code is `stale` (dry run, re-run, seeds), kept until
resume=false; analysis warns when runs of different code are put side by side; the recorded
command re-runs as recorded (search path included); a refused run and a dry run leave no
folder."""

import json

import pytest
from conftest import fedrun
from omegaconf import OmegaConf

from fedprox_cli.analysis import results
from fedprox_cli.runs import code_record as provenance

pytestmark = pytest.mark.usefixtures("one_torch_thread")

MINE = '''
from dataclasses import dataclass
from typing import ClassVar

from fedprox_cli.algorithms.fedavg import FedAvg


@dataclass(kw_only=True)
class Mine(FedAvg):
    """FedAvg under another name: a user's algorithm by _target_."""
    name: ClassVar[str] = "mine"
'''
TINY = ["dataset=digits", "model=linear", "regularizer=none", "T=2", "K=2", "n=4", "algorithm=mine"]


@pytest.fixture
def mine(tmp_path):
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "mine.py").write_text(MINE)
    (tmp_path / "conf" / "algorithm").mkdir(parents=True)
    (tmp_path / "conf" / "algorithm" / "mine.yaml").write_text(
        "name: mine\n_target_: mine.Mine\nalpha: 1.0\nbeta: 0.02\n"
    )
    return tmp_path


def summary(run) -> dict:
    return json.loads((run / "summary.json").read_text())


def test_a_changed_plugin_makes_its_finished_run_stale(mine):
    searchpath = f"hydra.searchpath=[file://{mine / 'conf'}]"
    run, path = mine / "run", [mine / "site"]
    first = fedrun(searchpath, *TINY, f"hydra.run.dir={run}", path=path)
    assert first.returncode == 0, first.stderr
    s = summary(run)
    code = s["code"]["algorithm"]
    assert code["object"] == "mine.Mine" and code["name"] == "mine" and len(code["digest"]) == 16
    assert s["code"]["model"]["package"] == "fedprox_cli"
    assert s["command"] == f"fedrun '{searchpath}' {' '.join(TINY)}"  # re-runs as recorded

    (mine / "site" / "mine.py").write_text(MINE + "# a change\n")
    again = fedrun(searchpath, *TINY, f"hydra.run.dir={run}", path=path)
    assert again.returncode == 0, again.stderr
    line = next(x for x in again.stdout.splitlines() if "stale" in x)
    assert line.startswith(
        f"fedrun: the run in {run} is stale: it was made by other code (algorithm mine: "
        f"code {code['digest']} -> "
    ) and line.endswith("to re-run it, add resume=false")
    assert summary(run) == s  # kept as it was
    rerun = fedrun(searchpath, *TINY, "resume=false", f"hydra.run.dir={run}", path=path)
    assert rerun.returncode == 0, rerun.stderr
    assert summary(run)["code"]["algorithm"]["digest"] != code["digest"]


def test_a_stale_run_in_a_dry_run_table(mine):
    searchpath = f"hydra.searchpath=[file://{mine / 'conf'}]"
    sweep, path = mine / "sweep", [mine / "site"]
    assert fedrun("-m", searchpath, *TINY, f"hydra.sweep.dir={sweep}", path=path).returncode == 0
    (mine / "site" / "mine.py").write_text(MINE + "# a change\n")
    dry = fedrun("-m", searchpath, *TINY, "dry_run=true", f"hydra.sweep.dir={sweep}", path=path)
    assert dry.returncode == 0, dry.stderr
    assert (
        "stale: made by other code (algorithm mine: code " in dry.stdout
        and "resume=false re-runs it" in dry.stdout
    )
    assert "finished already" not in dry.stdout


def test_runs_of_different_code_side_by_side_are_named(tmp_path):
    for name, digest in (("a", "1111"), ("b", "2222")):
        d = tmp_path / name
        d.mkdir()
        (d / "config.yaml").write_text(
            OmegaConf.to_yaml({"algorithm": {"name": "mine"}, "seed": 0 if name == "a" else 1})
        )
        (d / "metrics.csv").write_text("round,test_acc\n0,0.1\n1,0.5\n")
        (d / "summary.json").write_text(
            json.dumps(
                {
                    "status": "finished",
                    "versions": {"fedprox_cli": "0.1.0"},
                    "code": {"algorithm": {"name": "mine", "digest": digest}},
                }
            )
        )
    said = []
    results.load([tmp_path], warn=said.append)
    assert said == [
        "note: runs made by different code side by side: algorithm mine: 2 versions of its code "
        "(1111, 2222)"
    ]


def test_changed_compares_recorded_digests_only():
    a = {"algorithm": {"name": "x", "digest": "1"}, "model": {"name": "linear", "digest": "2"}}
    assert (
        provenance.changed(a, a) == []
        and provenance.changed(None, a) == []
        and provenance.changed(a, {}) == []
    )
    b = {**a, "model": {"name": "linear", "digest": "3"}}
    assert provenance.changed(a, b) == ["model linear: code 2 -> 3"]


def test_a_refused_run_and_a_dry_run_leave_no_folder(tmp_path, mine):
    refused = fedrun("algorithm=fedavg", "dataset=digits", f"hydra.run.dir={tmp_path / 'refused'}")
    assert refused.returncode == 2 and not (tmp_path / "refused").exists()
    dry = fedrun(
        "--config-dir",
        str(mine / "conf"),
        *TINY,
        "dry_run=true",
        f"hydra.run.dir={tmp_path / 'dry'}",
        path=[mine / "site"],
    )
    assert dry.returncode == 0, dry.stderr
    assert "nothing written" in dry.stdout and not (tmp_path / "dry").exists()
    assert "metrics:" not in dry.stdout


@pytest.mark.parametrize("how", ["interrupted", "finished, extended"])
def test_a_run_continued_under_changed_code_is_refused_or_recorded_mixed(mine, how):
    """A checkpoint made by one code, continued by another (the plugin's file edited): refused
    with the two options; with mixed_code=true it goes on, its summary keeps both codes and
    the round, and fedrun-report, fedrun-table and the closing line say it is mixed."""
    searchpath = f"hydra.searchpath=[file://{mine / 'conf'}]"
    run, path = mine / "run", [mine / "site"]
    args = [searchpath, *TINY, "checkpoint_every=1", "keep_checkpoint=true", f"hydra.run.dir={run}"]
    first = fedrun(*args, path=path)
    assert first.returncode == 0, first.stderr
    old = summary(run)["code"]["algorithm"]["digest"]
    if how == "interrupted":  # as a run stopped after round 2 of 4 leaves it
        s = summary(run)
        (run / "summary.json").write_text(json.dumps({**s, "status": "interrupted", "T": 4}))
    (mine / "site" / "mine.py").write_text(MINE + "# a change of one step\n")
    before = (run / "summary.json").read_bytes()
    refused = fedrun(*args, "T=4", path=path)
    assert refused.returncode == 2, refused.stderr
    line = refused.stderr.splitlines()[-1]
    assert line.startswith(
        f"fedrun: error: the run in {run} was made by other code than this (algorithm mine: "
        f"code {old} -> "
    ) and line.endswith(
        "to start it over with this code, set resume=false; to continue it from round 2 with "
        "this code, set mixed_code=true (its record then keeps both codes and the round they "
        "changed)"
    ), line
    assert (run / "summary.json").read_bytes() == before
    mixed = fedrun(*args, "T=4", "mixed_code=true", path=path)
    assert mixed.returncode == 0, mixed.stderr
    s = summary(run)
    new = s["code"]["algorithm"]["digest"]
    assert new != old and s["status"] == "finished"
    assert [(h["from_round"], h["code"]["algorithm"]["digest"]) for h in s["code_history"]] == [
        (0, old),
        (2, new),
    ]
    said = f"mixed code: algorithm mine: code {old} -> {new} after round 2"
    assert mixed.stdout.splitlines()[-3].endswith(f"{run} ({said})"), mixed.stdout
    again = fedrun(*args, "T=4", path=path)  # the same command: finished, and still mixed
    assert again.returncode == 0 and "already finished" in again.stdout
    notes = []
    results.load([run], warn=notes.append)
    assert f"note: {run} was continued with other code ({said})" in notes
    from fedprox_cli.cli import status

    _, rows = status.rows([run])
    assert rows[0]["code"] == said
