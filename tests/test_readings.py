"""The rules that turn runs into words, on small hand-made run sets: the equal-bytes budget
(a diverged run never cuts it), a level a stand-in cannot reach, an untrained run left out per
compared pair, one measurement with one gate in two claims, a word per device, and a value near
its threshold printed with the digits that decide it."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fedprox_cli.analysis.run import Run
from fedprox_cli.claims import declare, evidence, run_reading, sources, text, units, verdict
from fedprox_cli.claims.declare import Claim, RunSet
from fedprox_cli.common.errors import UserError

Check = declare.Test  # not named Test*: pytest would try to collect it


def claim(tests, trained_metric="", **kw) -> Claim:
    return Claim(
        "x", "Paper", "Sec. 1, Fig. 1", "short", "quote", "", "", "", None, None, None, (),
        tuple(tests), trained_metric=trained_metric, trained_min=0.2, **kw,
    )  # fmt: skip


def sent(method, seed, per_round, acc, status="finished", **config) -> Run:
    """A run evaluated every 5 rounds, sending ``per_round`` bytes a round, with ``acc``."""
    rounds = np.arange(len(acc)) * 5
    m = pd.DataFrame(
        {
            "round": rounds,
            "bytes_up": rounds * per_round,
            "bytes_down": 0 * rounds,
            "test_acc": np.asarray(acc, float),
        }
    )
    cfg = {"choice:algorithm": method, "seed": seed, "T": 20, **config}
    return Run(Path(f"/{method}/{seed}"), cfg, m, status)


BYTES = Check(
    kind="order", metric="test_acc", says="a best", key="algorithm", values=("a", "b", "c"),
    at="bytes",
)  # fmt: skip


def test_a_diverged_baseline_never_cuts_the_bytes_budget():
    a = sent("a", 0, 2, [0.1, 0.3, 0.5, 0.8, 0.9])  # finishes at 40 bytes, slow start
    b = sent("b", 0, 2, [0.1, 0.4, 0.6, 0.7, 0.75])  # finishes at 40 bytes
    c = sent("c", 0, 2, [0.1, 0.5, float("nan")], status="diverged")  # diverged by 20 bytes
    assert run_reading.budget(BYTES, [a, b, c]) == 40  # over the runs that reached T
    got = units.units(BYTES, [a, b, c], claim([BYTES]))
    assert [u.holds for u in got] == [True] and got[0].value == pytest.approx(0.9)
    # the smallest total any run sent (c's 20 bytes) would read a at 0.5 below b's 0.6
    early = Check(**{**BYTES.__dict__, "budget": 20})
    assert [u.holds for u in units.units(early, [a, b, c], claim([early]))] == [False]


def test_a_level_the_stand_in_cannot_reach_decides_nothing_there():
    level = Check(
        kind="level", metric="test_acc", says="all above 98%", key="algorithm",
        values=("a", "b"), holds={"min": 0.98},
    )  # fmt: skip
    best = Check(**{**BYTES.__dict__, "values": ("a", "b")})
    c = claim([best, level])
    runs = [r for s in range(3) for r in (sent("a", s, 2, [0.1, 0.9]), sent("b", s, 2, [0.1, 0.8]))]
    paper = RunSet(data="MNIST", preset="p")
    ev = evidence.Evidence(paper, 6, 6, seeds=(0, 1, 2), T=20)
    ev.outcomes = evidence.outcomes(c, paper, runs)
    assert not ev.outcomes[1].moot  # on the paper's own data a level no run reaches decides
    assert verdict.of(c, ev).word == "partly"  # the level fails in every run
    rs = RunSet(data="FMNIST", preset="p", stands_for="MNIST")
    ev = evidence.Evidence(rs, 6, 6, seeds=(0, 1, 2), T=20)
    ev.outcomes = evidence.outcomes(c, rs, runs)
    moot = ev.outcomes[
        1
    ].moot  # no run on the stand-in reaches it: out of reach, said from the runs
    assert (
        moot == "test_acc 0.98 is out of reach on FMNIST: the best run here reaches 0.9 (a, seed 0)"
    )
    assert verdict.of(c, ev).word == "reproduced on a stand-in"
    far = RunSet(**{**rs.__dict__, "unreachable": {"test_acc": "a harder task"}})
    ev = evidence.Evidence(far, 6, 6, seeds=(0, 1, 2), T=20)
    ev.outcomes = evidence.outcomes(c, far, runs)
    moot = ev.outcomes[1].moot
    assert moot.endswith("the best run here reaches 0.9 (a, seed 0); a harder task")  # and why
    assert verdict.of(c, ev).word == "reproduced on a stand-in"  # the ordering decides alone


def stat(q, seed, tail, acc) -> Run:
    m = pd.DataFrame(
        {"round": [0, 5, 10], "stationarity": [1.0, tail * 2, tail], "test_acc": [0.1, acc, acc]}
    )
    return Run(Path(f"/{q}/{seed}"), {"K": q, "seed": seed, "T": 10}, m, "finished")


def test_an_untrained_run_is_left_out_of_its_pairs_not_its_seed():
    runs = [stat(5, 0, 0.1, 0.8), stat(10, 0, 0.03, 0.77), stat(20, 0, 0.15, 0.1)]  # 20: chance
    ratio = Check(
        kind="ratio", metric="stationarity", says="within 2x", key="K", values=(10, 20), base=5,
        at="tail", holds={"min": 0.5, "max": 2},
    )  # fmt: skip
    c = claim([ratio], trained_metric="test_acc")
    got = units.units(ratio, runs, c)
    assert [(u.holds, u.raw) for u in got] == [(False, None), (None, True)]  # 10: evidence
    chain = Check(
        kind="order", metric="stationarity", says="larger higher", key="K", values=(5, 10, 20),
        mode="chain", at="tail",
    )  # fmt: skip
    got = units.units(chain, runs, claim([chain], trained_metric="test_acc"))
    assert got[0].holds is False
    assert got[0].aside == "K=20 untrained: left out; next K=10 0.03 against 0.1, margin -0.07"
    alone = [stat(5, 0, 0.1, 0.8), stat(10, 0, 0.3, 0.1)]  # one trained run: nothing to compare
    assert units.units(chain, alone, claim([chain], trained_metric="test_acc")) == []
    pair = Check(**{**chain.__dict__, "values": (5, 10)})
    got = units.units(pair, alone, claim([pair], trained_metric="test_acc"))
    assert got[0].holds is None and got[0].raw is True


def _claims(*tests_of) -> list:
    runs = {"data": "d", "preset": "p", "folders": ["f"], "seeds": [0]}
    return [
        {"id": f"c{i}", "where": "Sec. 1, Fig. 1", "short": "s", "quote": "q", "numbers": "",
         "setting": "", "chosen": "", "paper_T": None, "paper_seeds": None, "ran": [runs],
         "tests": tests, **extra}
        for i, (tests, extra) in enumerate(tests_of)
    ]  # fmt: skip


def test_one_measurement_in_two_claims_gets_one_gate_and_must_say_so():
    time = {"kind": "ratio", "metric": "time_s", "key": "algorithm", "values": ["b"],
            "base": "a", "holds": {"min": 2.87}, "says": "b slower"}  # fmt: skip
    table = ([time], {"no_seeds": True, "per_round": True})
    with pytest.raises(UserError, match="same measurement as claim c0's; declare it same_as"):
        declare.shared([declare.claim({**d, "paper": "FedCanon"}) for d in _claims(table, ([time], {}))])
    linked = {**time, "holds": {"min": 1.0}, "same_as": "c0"}
    shared = declare.shared(
        [declare.claim({**d, "paper": "FedCanon"}) for d in _claims(table, ([linked], {}))]
    )
    assert shared[1].tests[0].no_seeds and shared[1].tests[0].per_round
    fig3 = declare.select(sources.claims(), ["fedcanon-fig3"])[0]  # its time half is Table V's
    assert [t.no_seeds for t in fig3.tests if t.role == "primary"] == [False, True]


def test_a_test_that_cannot_decide_leaves_the_word_to_the_others():
    slower = Check(kind="ratio", metric="x", says="s", key="algorithm", values=("b",), base="a",
                   holds={"min": 2}, no_seeds=True)  # fmt: skip
    seeds = Check(kind="order", metric="x", says="o", key="algorithm", values=("a", "b"))
    fails = units.Outcome(slower, [units.Unit("b", 0.99, False)])
    holds = units.Outcome(slower, [units.Unit("b", 3.0, True)])
    gated = units.Outcome(seeds, [units.Unit("seed 0", 1.0, True)])
    one_seed = {"stand_in": "", "T": 10, "paper_T": None, "seeds": 1, "present": 4, "declared": 4}
    v = verdict.word([gated, fails], **one_seed)
    assert v.word == "not reproduced" and "one seed cannot order the runs" in v.why
    assert verdict.word([gated, holds], **one_seed).word == "inconclusive"
    assert verdict.word([gated], **one_seed).word == "inconclusive"


def test_a_claim_on_two_devices_says_each_word():
    t = Check(kind="ratio", metric="l1", says="s", values=("m",), holds={"min": 0.77}, no_seeds=True,
              per_round=True)  # fmt: skip
    c = claim([t])
    cpu = evidence.Evidence(RunSet(data="d", preset="", device="cpu"), 1, 1)
    gpu = evidence.Evidence(RunSet(data="d", preset="", device="NVIDIA H200"), 1, 1)
    cpu.outcomes = [units.Outcome(t, [units.Unit("m", 0.9, True)])]
    gpu.outcomes = [units.Outcome(t, [units.Unit("m", 0.01, False)])]
    v = verdict.across(c, [cpu, gpu])
    assert v.word == "reproduced (cpu); not reproduced (NVIDIA H200)"
    assert v.why == "the word depends on the device (cpu: reproduced; NVIDIA H200: not reproduced)"
    gpu.outcomes = [units.Outcome(t, [units.Unit("m", 0.8, True)])]
    assert verdict.across(c, [cpu, gpu]).word == "reproduced"


@pytest.mark.parametrize(
    "value, holds, shown",
    [
        (1.1012, {"max": 1.1}, "1.101 (max 1.1)"),
        (1.0999, {"max": 1.1}, "1.0999 (max 1.1)"),
        (1.1059, {"max": 1.1}, "1.106 (max 1.1)"),  # not "1.11": its margin, not 2x it
        (1.1052, {"max": 1.1}, "1.105 (max 1.1)"),
        (0.9904, {"min": 1.0}, "0.99 (min 1)"),
        (1.05, {"max": 1.1}, "1.05"),
        (401.0, {"min": 401, "max": 401}, "401"),
    ],
)
def test_a_value_near_its_threshold_shows_the_digits_that_decide_it(value, holds, shown):
    assert text.against(value, holds) == shown
