"""The rules that turn runs into words, on small synthetic run sets: a level no run on a
stand-in reaches, a window ordering that sets in late, wins over diverged runs, a word that
changes with an open choice or between stand-ins, bold without a std, what the summary row and
the exemptions name."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fedprox_cli.analysis.run import Run
from fedprox_cli.claims import (
    claim_section,
    claim_table,
    declare,
    evidence,
    history,
    mean_curve,
    render,
    schema,
    sources,
    tables,
    units,
    verdict,
)
from fedprox_cli.common.errors import UserError
from tests.test_claims import claim, run

Check = declare.Test  # not named Test*: pytest would try to collect it

LEVEL = Check(
    kind="level",
    metric="test_acc",
    says="every method at least 98%",
    key="algorithm",
    values=("a", "b"),
    at="last",
    holds={"min": 0.98},
)


def _level(accs: tuple, stands_for: str) -> units.Outcome:
    runs = [run(m, s, [1, 0.5], acc=a) for s in range(3) for m, a in zip("ab", accs)]
    rs = declare.RunSet(data="d", preset="p", stands_for=stands_for)
    return evidence.outcomes(claim([LEVEL]), rs, runs)[0]


def test_a_level_no_run_on_a_stand_in_reaches_decides_nothing_there():
    out = _level((0.96, 0.97), "MNIST")  # no unreachable declared: the runs show it
    assert out.moot.startswith("test_acc 0.98 is out of reach on d: the best run here reaches 0.97")
    assert verdict.primary([out]) == [] and all(u.holds is None for u in out.units)
    assert not _level((0.96, 0.97), "").moot  # the paper's own data: it decides
    reached = _level((0.96, 0.99), "MNIST")  # one method reaches it: the others fail it
    assert not reached.moot and reached.held == 3 and len(reached.conclusive) == 6


def test_a_diverged_run_fails_a_level_out_of_reach_on_a_stand_in_and_decides():
    """The paper's "every method converges": on a stand-in where no finite run reaches the
    level, the finite runs decide nothing, but a run that diverged reaches it on no data: it
    decides (it does not hold), and the test is not moot."""
    runs = [run(m, s, [1, 0.5], acc=0.96) for s in range(3) for m in "ab"]
    for r in runs[1::2]:  # every run of b: non-finite from round 5
        r.metrics["test_acc"] = [0.5, float("nan")]
    rs = declare.RunSet(data="d", preset="p", stands_for="MNIST")
    (out,) = evidence.outcomes(claim([LEVEL]), rs, runs)
    assert not out.moot and "its 3 diverged runs reach the level on no data" in out.reach
    assert out.reach.startswith("test_acc 0.98 is out of reach on d: the best run here reaches")
    assert [u.holds for u in out.units] == [None, False] * 3
    assert verdict.primary([out]) == [out] and verdict.state(out)[0] == "none"


def _window(curves: dict, to_round) -> verdict.Verdict:
    t = Check(
        kind="order",
        metric="stationarity",
        says="a faster",
        key="algorithm",
        values=("a", "b"),
        at="every",
        from_round=5,
        to_round=to_round,
    )
    runs = [run(m, s, c) for s in range(3) for m, c in curves.items()]
    out = units.Outcome(t, units.units(t, runs, claim([t])))
    return verdict.word([out], "stand-in", 20, None, 3, 6, 6)


def test_an_ordering_that_sets_in_late_is_partly_to_the_end_and_fails_a_window():
    late = {"a": [1, 0.7, 0.3, 0.1], "b": [1, 0.6, 0.4, 0.2]}  # a lower from round 10 on
    assert _window(late, None).word == "partly"  # eventually lower
    assert _window(late, 15).word == "not reproduced"  # not faster over rounds 5-15
    early = {"a": [1, 0.5, 0.3, 0.1], "b": [1, 0.6, 0.4, 0.2]}
    assert _window(early, 15).word == "reproduced on a stand-in"


def _made(method: str, seed: int, curve, status: str) -> Run:
    m = pd.DataFrame({"round": np.arange(len(curve)) * 5, "stationarity": np.asarray(curve, float)})
    return Run(
        Path(f"/{method}/{seed}"), {"choice:algorithm": method, "seed": seed, "T": 20}, m, status
    )


def _lowest(*values: str) -> declare.Test:
    """The ordering "values[0] has the lowest last stationarity"."""
    return Check(
        kind="order",
        metric="stationarity",
        says="a lowest",
        key="algorithm",
        values=values,
        at="last",
    )


def test_a_one_point_ordering_names_the_runner_up_and_the_margin_with_deciding_digits():
    """A referee: thin wins (3-5 test images in 1,000) read only from the first value. Each
    unit names the best of the others and the first's margin (positive: the first is better),
    with the digits that tell the two apart, and a tie as a tie."""
    t = _lowest("a", "b")
    a = _made("a", 0, [1, 0.5, 0.7841], "finished")
    (u,) = units.units(t, [a, _made("b", 0, [1, 0.6, 0.7844], "finished")], claim([t]))
    assert u.holds and u.aside == "next b 0.7844 against 0.7841, margin +0.0003"
    (tie,) = units.units(t, [a, _made("b", 0, [1, 0.6, 0.7841], "finished")], claim([t]))
    assert not tie.holds and tie.aside == "tied with b 0.7841"
    (lost,) = units.units(t, [a, _made("b", 0, [1, 0.6, 0.7], "finished")], claim([t]))
    assert not lost.holds and lost.aside == "next b 0.7 against 0.784, margin -0.084"


def test_a_win_over_a_diverged_run_names_it():
    t = _lowest("a", "b", "c")
    runs = [
        _made("a", 0, [1, 0.5, 0.2], "finished"),
        _made("b", 0, [1, 0.6, 0.3], "finished"),
        _made("c", 0, [1, math.nan, math.nan], "diverged"),
    ]
    (u,) = units.units(t, runs, claim([t]))
    assert u.holds and u.aside == "next b 0.3 against 0.2, margin +0.1; over diverged c"
    o = units.Outcome(t, [u])
    assert (
        claim_table.beaten(u) == ["c"] and claim_table.over_diverged(o) == []
    )  # b finished: beaten
    runs[1] = _made("b", 0, [1, math.nan, math.nan], "diverged")
    (only,) = units.units(t, runs, claim([t]))
    assert claim_table.over_diverged(units.Outcome(t, [only])) == [only]  # every win over diverged
    runs[1] = _made("b", 0, [1, 0.6, 0.3], "finished")
    runs[0] = _made("a", 0, [1, 0.5, 0.4], "finished")  # b ahead: no win to qualify
    (u,) = units.units(t, runs, claim([t]))
    assert not u.holds and u.aside == "next b 0.3 against 0.4, margin -0.1"  # no "over diverged"


def _ev(data: str, holds: list, choices=()) -> evidence.Evidence:
    """Evidence of one ordering test whose seeds hold as ``holds`` says (a grid: ``choices``,
    one (values, holds) per combination)."""
    t = Check(kind="order", metric="m", says="s", key="k", values=("a", "b"))

    def outs(h):
        return [units.Outcome(t, [units.Unit(f"seed {i}", 0.0, x) for i, x in enumerate(h)])]

    rs = declare.RunSet(
        data=data,
        preset="p",
        stands_for="MNIST",
        folders=("f",),
        grid={"a.eta": [v for v, _ in choices]} if choices else {},
        choices=("a.eta",) if choices else (),
    )
    ev = evidence.Evidence(rs, 3, 3, seeds=(0, 1, 2), T=20, outcomes=outs(holds))
    ev.choices = [((("a.eta", v),), outs(h), 3, 3, 0) for v, h in choices]
    return ev


def test_a_word_that_changes_with_an_open_choice_or_the_stand_in_is_said_so():
    c = claim([])
    one = [_ev("d1", [False] * 3)]
    assert verdict.across(c, one).word == "not reproduced"
    two = [*one, _ev("d2", [True, True, False])]
    v = verdict.across(c, two)
    assert v.word == "not reproduced (d1); partly (d2)" and "depends on the dataset" in v.why
    grid = _ev("d1", [], choices=[(0.1, [True] * 3), (0.3, [False] * 3)])
    v = verdict.across(c, [*one, grid])
    assert v.word == "inconclusive"
    assert (
        "depends on what the paper leaves open (on d1: reproduced on a stand-in at (eta = 0.1); "
        "not reproduced at (eta = 0.3)); at the declared setting: not reproduced"
    ) in v.why
    same = _ev("d1", [], choices=[(0.1, [False] * 3), (0.3, [False] * 3)])
    assert verdict.across(c, [*one, same]).word == "not reproduced"


def test_one_run_per_cell_bolds_nothing():
    assert tables._best([(0.79, math.nan), (0.77, math.nan)], "test_acc") == [False, False]
    assert tables._best([(0.79, 0.001), (0.77, 0.002)], "test_acc") == [True, False]


def test_the_summary_row_names_its_test_and_an_exemption_its_tests():
    timed = Check(kind="ratio", metric="time_s", says="t", key="k", values=("a",), base="b")
    acc = Check(kind="order", metric="test_acc", says="s", key="k", values=("a", "b"), at="every")
    both = claim([acc, dataclasses.replace(timed, no_seeds=True, per_round=True)])
    text = render.exemptions([both])
    assert f"the same at every seed ({both.title} test 2)" in text
    ev = _ev("d1", [True] * 3)
    ev.outcomes[0].test = acc
    r = render.Rendered(both, [ev], verdict.Verdict("w", ""))
    assert (
        "| test 1, test_acc (last) at k=a: 0 ± 0 over 3 seeds; 3 of 3 seeds; bounds not recorded |"
        in claim_table.row(r)
    )


def test_a_summary_row_without_a_deciding_reading_still_says_when_its_bounds_were_set():
    acc = Check(kind="order", metric="test_acc", says="s", key="k", values=("a", "b"))
    c = claim([acc, dataclasses.replace(acc, role="supporting")])
    said = {1: "post hoc: bounds declared 2026-11-25 (b), with or after its runs (a)"}
    r = render.Rendered(c, [], verdict.Verdict("partly run (1 of 2 runs)", ""), declared=said)
    assert "| — (bounds post hoc) |" in claim_table.row(r)  # its primary test's order alone


def test_a_run_set_where_nothing_trained_says_the_stand_in_cannot_test_the_claim():
    c = dataclasses.replace(claim([], "test_acc"), trained_min=0.2)
    ev = _ev("digits", [])
    ev.trained = {"n=20, a": [0.1, 0.098], "n=50, a": [0.1, 0.1]}
    text = claim_section.trained(c, ev)
    assert "on digits for MNIST no run trains" in text and "no control run here says" in text
    ev.trained["n=50, a"] = [0.9, 0.91]
    text = claim_section.trained(c, ev)
    assert "no run trains" not in text and "in every run: n=20, a -- a result" in text


def test_every_stand_in_has_its_facts_declared_and_the_report_lists_them():
    facts = declare.stand_ins()
    used = {rs.data for c in sources.claims() for rs in c.ran if rs.stands_for}
    assert used <= set(facts)
    ev = _ev("mnist5k", [True] * 3)
    text = render.stand_ins([render.Rendered(claim([]), [ev], verdict.Verdict("w", ""))])
    assert text == f"- **mnist5k** (for MNIST): {facts['mnist5k']}."


def test_list_says_why_a_setting_diverged_where_its_run_set_declares_it():
    """FedCEF Figs. 3-4: `fedrun-reproduce list` names the named reason for each baseline that
    diverged (the run set's ``diverges``), and only for a setting whose runs did diverge."""
    rs = declare.RunSet(
        data="mnist5k",
        stands_for="MNIST",
        diverges={"za2": "its correction feeds on itself", "fedda": "never said"},
    )
    ev = evidence.Evidence(rs, 6, 6, diverged={"za2": (3, 3), "fedda": (0, 3)})
    r = claim_table.Rendered(claim([]), [ev], verdict.Verdict("inconclusive", ""))
    assert render.reasons(r) == [
        "on mnist5k for MNIST: za2 diverged in 3 of 3 runs: its correction feeds on itself"
    ]


def _swept(seed: int, k: int, tail: float, status: str = "finished") -> Run:
    """A run at K = ``k`` whose stationarity ends at ``tail`` (rounds 0-45, its tail the last)."""
    curve = np.r_[np.full(9, 2.0), tail]
    m = pd.DataFrame({"round": np.arange(10) * 5, "stationarity": curve})
    return Run(Path(f"/K{k}/{seed}"), {"K": k, "seed": seed, "T": 45}, m, status)


def _slope_test(curve: str) -> declare.Test:
    return Check(
        kind="slope",
        metric="stationarity",
        says="flat in K",
        key="K",
        at="tail",
        holds={"min": -0.1, "max": 0.1},
        curve=curve,
    )


def test_a_slope_on_the_seeds_mean_curve_is_fitted_to_the_mean_as_a_paper_fits_it():
    """A referee: FedNMap Fig. 4's slope passed in 2 of 10 seeds, while the paper fits one line
    to the mean of its trials and that slope (-0.676) is outside the band. Seeds whose slopes
    are -2 and +2 have a flat mean: per seed the band holds in no unit, on the mean curve in its
    one unit, and the word follows the reading declared."""
    runs = [_swept(0, 1, 1.0), _swept(0, 4, 1 / 16), _swept(1, 1, 1 / 16), _swept(1, 4, 1.0)]
    per_seed = units.units(_slope_test("seed"), runs, claim([]))
    assert [round(u.value, 6) for u in per_seed] == [-2.0, 2.0]
    assert not any(u.holds for u in per_seed)
    t = _slope_test("mean")
    (mean,) = units.units(t, runs, claim([t]))
    assert mean.label == "mean of 2 seeds" and mean.holds and abs(mean.value) < 1e-12
    out = units.Outcome(t, [mean])
    assert verdict.word([out], "stand-in", 45, None, 2, 4, 4).word == "reproduced on a stand-in"
    assert verdict.state(out) == ("all", "1 of 1 mean curves")
    assert claim_table.value_word(out).endswith("on the seeds' mean curve")
    seeds = units.Outcome(_slope_test("seed"), per_seed)
    assert verdict.word([seeds], "stand-in", 45, None, 2, 4, 4).word == "not reproduced"


def test_a_mean_curve_is_the_seeds_mean_at_each_evaluation_and_a_diverged_seed_ends_it():
    a, b = _swept(0, 1, 1.0), _swept(1, 1, 3.0)
    (m,) = mean_curve.mean_runs([a, b])
    assert m.config["seed"] == "mean of 2 seeds" and m.status == "finished"
    assert m.column("stationarity").tolist() == [2.0] * 9 + [2.0]
    gone = _made("a", 1, [2.0, math.nan], "diverged")  # ends at round 5
    (d,) = mean_curve.mean_runs([_made("a", 0, [2.0, 1.0, 0.5], "finished"), gone])
    assert d.status == "diverged" and d.column("round").tolist() == [0, 5, 10]
    assert d.column("stationarity")[0] == 2.0 and np.isnan(d.column("stationarity")[1:]).all()
    t = _slope_test("mean")  # the diverged seed's point makes the mean slope fail
    runs = [_swept(0, 1, 1.0), _swept(0, 4, 1.0), _swept(1, 1, 1.0)]
    runs.append(_made("x", 1, [2.0, math.nan], "diverged"))
    runs[-1].config.update({"K": 4, "seed": 1, "T": 45})
    del runs[-1].config["choice:algorithm"]
    (u,) = units.units(t, runs, claim([t]))
    assert u.holds is False and math.isnan(u.value)


def test_a_test_declares_which_curve_it_reads_and_its_fingerprint_keeps_the_default_out():
    with pytest.raises(UserError, match=r"curve: must be one of seed, mean, got 'means'"):
        schema.check(
            [
                {
                    "id": "x",
                    "paper": "P",
                    "where": "w",
                    "short": "s",
                    "quote": "q",
                    "numbers": "",
                    "setting": "",
                    "chosen": "",
                    "paper_T": None,
                    "paper_seeds": None,
                    "paper_runs": None,
                    "ran": [],
                    "tests": [
                        {
                            "kind": "slope",
                            "metric": "stationarity",
                            "says": "s",
                            "key": "K",
                            "curve": "means",
                        }
                    ],
                }
            ],
            None,
            "c.yaml",
        )
    seed, mean = _slope_test("seed"), _slope_test("mean")
    plain = {k: v for k, v in seed.__dict__.items() if k != "curve"}
    assert history.bounds(seed) == history.bounds(plain) != history.bounds(mean)


def test_partly_from_a_late_ordering_beside_a_failing_test_says_where_the_ordering_holds():
    late = {"a": [1, 0.7, 0.3, 0.1], "b": [1, 0.6, 0.4, 0.2]}  # a lower from round 10 on
    t = dataclasses.replace(_slope_test("seed"), kind="order", key="algorithm", values=("a", "b"))
    t = dataclasses.replace(t, at="every", from_round=5, holds={})
    runs = [run(m, s, c) for s in range(3) for m, c in late.items()]
    ordering = units.Outcome(t, units.units(t, runs, claim([t])))
    lowest = _lowest("b", "a")  # b lowest at the end: holds in no seed
    failing = units.Outcome(lowest, units.units(lowest, runs, claim([lowest])))
    v = verdict.word([ordering, failing], "stand-in", 20, None, 3, 6, 6)
    assert (v.word, v.why) == ("partly", "an ordering holds from round 10 on only")
