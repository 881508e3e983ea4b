"""What a reading records beside its numbers: an implementation check's own word, when each
test's bounds were declared relative to its runs, a timing read against its own noise, and
summary numbers that say what they pool."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from fedprox_cli.analysis.run import Run
from fedprox_cli.claims import (
    claim_section,
    claim_table,
    declare,
    evidence,
    history,
    run_reading,
    sources,
    units,
    verdict,
)
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
    return yaml.safe_dump([{"id": "c", "tests": [{**test, "holds": {"max": band}, "says": says}]}])


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


def test_a_protocol_declared_post_hoc_is_marked_so_whatever_the_commit_order(tmp_path):
    """A tuning run started, and read, before the commit declaring its protocol: the commit
    order says pre-registered; the claim's ``post_hoc`` says why it is not, and the record and
    the report's words follow it (the fingerprint is the protocol's, not its history's)."""
    tuning = {"seed": 3, "grid": [0.1, 0.02], "steps": {"b": "alpha"}}
    rs = {"data": "d", "into": "tuned", "points": [{"k": "a"}, {"k": "b"}], "seeds": [0]}
    _git(tmp_path, "init", "-q")
    _commit(
        tmp_path,
        {"claims.yaml": yaml.safe_dump([{"id": "c", "ran": [{**rs, "tuning": tuning}]}])},
        "declared",
    )
    _commit(tmp_path, {"runs/tuned/metrics.csv": "round\n0\n"}, "then the tuning runs")

    def claim_of(t: dict) -> declare.Claim:
        made = declare.RunSet(**{**rs, "points": tuple(rs["points"]), "seeds": (0,), "tuning": t})
        return declare.Claim(
            "c", "p", "w", "s", "q", ran=(made,), file=str(tmp_path / "claims.yaml")
        )

    plain, late = claim_of(tuning), claim_of({**tuning, "post_hoc": "its first run was read"})
    assert history.protocol(plain.ran[0]) == history.protocol(late.ran[0])
    (first,) = history.read_from_git([plain], tmp_path / "runs")
    assert (first.test, first.order) == (0, "pre-registered")
    (marked,) = history.read_from_git([late], tmp_path / "runs")
    assert marked.order == "post hoc" and marked.declared == first.declared
    said = history.protocol_of({("c", 0): marked}, late)
    assert said.startswith("post hoc, declared so: its first run was read")
    assert history.protocol_of({("c", 0): first}, plain).startswith("pre-registered")


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


def _timed(method: str, partition: str, total: float) -> Run:
    m = pd.DataFrame({"round": [0, 10], "time_s": [0.0, total]})
    config = {"choice:algorithm": method, "choice:partition": partition, "seed": 0, "T": 10}
    return Run(Path(f"/{method}/{partition}"), config, m, "finished")


TIMED = Check(
    kind="ratio",
    metric="time_s",
    says="the others slower",
    key="algorithm",
    values=("b",),
    base="a",
    where={"partition": "iid"},
    holds={"min": 1.0},
    repeats=("partition",),
    no_seeds=True,
    per_round=True,
)


def test_a_timing_inside_its_base_s_own_spread_decides_nothing():
    runs = [_timed("a", "iid", 100.0), _timed("a", "dir", 107.0), _timed("a", "dir2", 103.0)]
    c = claim([TIMED])
    spread = units.noise(TIMED, runs)
    assert spread is not None and (spread.low, spread.high, spread.n) == (100.0, 107.0, 3)
    near = units.units(TIMED, [*runs, _timed("b", "iid", 99.0)], c, spread)  # 1% below: noise
    assert near[0].holds is None and near[0].undecided == "noise" and near[0].raw is False
    out = units.Outcome(TIMED, near, noise=spread)
    v = verdict.word([out], "", 10, 200, 1, 1, 1, True, True)
    assert v.word == "inconclusive" and "inside the noise" in v.why
    assert verdict.state(out)[1] == "inside the noise in 1 pairs"
    assert "spans 100-107 over its 3 runs (7.0%)" in claim_section.noise(out)
    far = units.units(TIMED, [*runs, _timed("b", "iid", 80.0)], c, spread)  # 20% below: decides
    assert far[0].holds is False
    one = units.noise(TIMED, runs[:1])  # no repeats measured: 20% below decides nothing
    alone = units.units(TIMED, [runs[0], _timed("b", "iid", 80.0)], c, one)
    alone = units.read_noise(TIMED, alone, one)
    assert alone[0].holds is None and alone[0].undecided == "unmeasured"
    assert alone[0].raw is False and alone[0].aside == "noise not measured"
    out = units.Outcome(TIMED, alone)
    said = claim_section.noise(out)
    assert said == " Noise: not measured here (one of the base), so no ratio of it decides."
    assert verdict.state(out)[1] == "noise not measured in 1 pairs"
    v = verdict.word([out], "", 10, 200, 1, 1, 1, True, True)
    assert v.word == "inconclusive" and v.why == "every ratio has no measured noise"
    bench = dataclasses.replace(TIMED, repeats=(), source="bench", file="prox_bench.txt")
    assert units.read_noise(bench, [units.Unit("resnet18", 1.46, True)], None)[0].holds is None
    plain = dataclasses.replace(TIMED, repeats=())  # not a timing: its units stay as they are
    assert units.read_noise(plain, far, None) == far


def test_a_same_as_claim_reads_every_device_its_source_reads():
    claims = {c.id: c for c in sources.claims()}
    fig3, table5 = claims["fedcanon-fig3"], claims["fedcanon-table5"]
    h200 = [rs for rs in table5.ran if rs.device == "NVIDIA H200"]
    assert h200 and all(rs in fig3.ran for rs in h200)
    ev = evidence.gather(fig3, h200[0], RESULTS, lambda _: None)
    unmeasured = [o.unmeasured for o in ev.outcomes]
    assert unmeasured[0] == "test_acc is not measured in table5_time_per_round_h200.txt"
    timed = ev.outcomes[1]  # the H200's FedMiD over FedCanon: read, one timing per K
    assert not unmeasured[1] and [u.raw for u in timed.units] == [True, True]
    assert {u.undecided for u in timed.units} == {"unmeasured"}  # no noise: decides nothing
    v = verdict.of(fig3, ev)  # the accuracy is not measured there
    assert v.word == "inconclusive" and "not measured in" in v.why


def test_a_divergence_says_where_it_left_the_scale_and_where_it_became_non_finite():
    m = pd.DataFrame(
        {
            "round": [0, 5, 10, 15, 20],
            "train_loss": [2.0, 1.0, 5e3, 1e9, float("nan")],
            "test_acc": [0.1, 0.5, 0.1, 0.1, float("nan")],
        }
    )
    gone = Run(Path("/b/0"), {"choice:algorithm": "b", "seed": 0, "T": 20}, m, "diverged")
    assert run_reading.note(gone, "test_acc") == (
        "first non-finite at round 20; above 1e3 x its start from round 10"
    )
    sudden = Run(gone.path, gone.config, m.assign(train_loss=[2, 1, 1, 1, np.nan]), "diverged")
    assert run_reading.note(sudden, "test_acc") == "first non-finite at round 20"


def test_a_curve_ordering_reads_the_whole_curve_not_its_tail():
    area = dataclasses.replace(BEST, at="area", from_round=5)
    late = [r for s in range(3) for r in (run("a", s, [1, 0.9, 0.1]), run("b", s, [1, 0.2, 0.2]))]
    assert verdict.of(claim([BEST]), _evidence(claim([BEST]), late)).word == "reproduced"
    assert verdict.of(claim([area]), _evidence(claim([area]), late)).word == "not reproduced"
    assert run_reading.area(area, late[0]) == pytest.approx(0.3)  # sqrt(0.9 x 0.1)


def test_a_summary_number_pools_seeds_only_and_names_what_else_it_spans():
    seeds = units.Outcome(BEST, [units.Unit(f"seed {s}", v, True) for s, v in enumerate([1, 3])])
    assert claim_table.over_seeds(seeds) == "2 ± 1.41 over 2 seeds"
    panels = [units.Unit(f"partition={p}, seed 0", v, True) for p, v in (("iid", 1), ("dir", 3))]
    assert claim_table.over_seeds(units.Outcome(BEST, panels)) == "1-3 over 2 partition values"
    pairs = [units.Unit(f"{m}, seed 0", v, True) for m, v in (("fedmid", 0.9), ("za1", 0.95))]
    assert claim_table.over_seeds(units.Outcome(BEST, pairs)) == "0.9-0.95 over 2 methods"
    grid = [  # 2 methods x 3 partitions: each key counted by its own values
        units.Unit(f"{m}, partition={p}, seed 0", 401, True)
        for m in ("fedmid", "fedda")
        for p in ("iid", "dir/1", "dir/0.2")
    ]
    assert (
        claim_table.over_seeds(units.Outcome(BEST, grid))
        == "401 over 2 methods x 3 partition values"
    )
