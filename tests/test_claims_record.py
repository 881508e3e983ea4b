"""What a reading records beside its numbers: an implementation check's own word, when each
test's bounds were declared relative to its runs, a timing read against its own noise, and
summary numbers that say what they pool."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

import yaml

from fedprox_cli.claims import declare, evidence, history, sources, units, verdict
from tests.test_claims import claim, run

Check = declare.Test  # not named Test*: pytest would try to collect it
RESULTS = Path(__file__).resolve().parents[1] / "results" / "reproduction"

BEST = Check(
    kind="order", metric="stationarity", says="a lowest", key="algorithm", values=("a", "b")
)


def _evidence(c, runs) -> evidence.Evidence:
    return evidence.Evidence(
        declare.RunSet(data="d", preset="p"),
        6,
        6,
        seeds=(0, 1, 2),
        T=20,
        outcomes=[units.Outcome(t, units.units(t, runs, c)) for t in c.tests],
    )


def test_an_implementation_check_is_checked_never_reproduced():
    lead = [r for s in range(3) for r in (run("a", s, [1, 0.1]), run("b", s, [1, 0.2]))]
    trail = [r for s in range(3) for r in (run("a", s, [1, 0.3]), run("b", s, [1, 0.2]))]
    plain = claim([BEST])
    check = dataclasses.replace(plain, implementation=True)
    assert verdict.of(plain, _evidence(plain, lead)).word == "reproduced"
    got = verdict.of(check, _evidence(check, lead))
    assert got.word == "checked" and "not counted as reproduced" in got.why
    failed = verdict.of(check, _evidence(check, trail))
    assert failed.word == "check failed" and failed.why.startswith("not reproduced by the rule")
    table3 = declare.select(sources.claims(), ["fedcanon-table3"])[0]
    assert table3.implementation and "checked" in verdict.WORDS


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def _commit(repo: Path, files: dict, message: str) -> str:
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", message)
    return _git(repo, "rev-parse", "HEAD")


def _claims(band: float, says: str = "within") -> str:
    test = {"kind": "ratio", "metric": "x", "key": "k", "values": [1], "base": 0}
    return yaml.safe_dump(
        [{"id": "c", "tests": [{**test, "holds": {"max": band}, "says": says}]}]
    )


def _order(repo: Path, band: float = 1.1) -> str:
    versions = history._versions(repo, "claims.yaml")
    t = Check(kind="ratio", metric="x", key="k", values=(1,), base=0, holds={"max": band}, says="")
    made = history.declared(repo, versions, "c", history.bounds(t))
    runs = history.first_runs(repo, [str(repo / "runs")])
    return history.order(repo, made[0], runs[0])


def test_bounds_set_after_the_runs_are_post_hoc_before_them_pre_registered(tmp_path):
    late, early = tmp_path / "late", tmp_path / "early"
    for repo in (late, early):
        repo.mkdir()
        _git(repo, "init", "-q")
    _commit(late, {"runs/a/metrics.csv": "round\n0\n"}, "runs first")
    _commit(late, {"claims.yaml": _claims(1.5)}, "a wide band")
    _commit(late, {"claims.yaml": _claims(1.1)}, "tightened after reading")
    assert _order(late) == "post hoc"
    _commit(early, {"claims.yaml": _claims(1.1)}, "declared first")
    _commit(early, {"runs/a/metrics.csv": "round\n0\n"}, "then the runs")
    _commit(early, {"claims.yaml": _claims(1.1, "reworded")}, "wording only")
    assert _order(early) == "pre-registered"  # a new wording is no new declaration
    _commit(early, {"claims.yaml": _claims(1.2)}, "a bound moved")
    assert _order(early, 1.2) == "post hoc"
    assert _order(early, 1.1) == "unknown"  # bounds the file no longer declares


def test_the_committed_record_marks_fig1s_band_post_hoc_and_check_names_a_moved_bound():
    records = history.read(RESULTS)
    fig1 = declare.select(sources.claims(), ["fedcanon-fig1"])[0]
    assert records[("fedcanon-fig1", 3)].order == "post hoc"
    assert history.of(records, fig1, 3, fig1.tests[2]).startswith("post hoc: bounds declared")
    assert "declared before the runs" not in fig1.note
    moved = dataclasses.replace(fig1.tests[2], holds={"min": 0.9, "max": 1.2})
    assert history.of(records, fig1, 3, moved).startswith("order not recorded")
    c = dataclasses.replace(fig1, tests=(*fig1.tests[:2], moved, *fig1.tests[3:]))
    assert history.stale(records, [c]) == [
        "fedcanon-fig1: test 3's bounds differ from those whose declaration DECLARED.tsv "
        "records (`fedrun-reproduce record fedcanon-fig1` reads their order from git)"
    ]
