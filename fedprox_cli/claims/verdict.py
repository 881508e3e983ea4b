"""The word of a claim, from its evidence, by one rule for every claim (:func:`word`), applied
to its primary tests alone (a supporting test is shown, never deciding: :func:`of`).

- nothing of the claim ran here: **not run**; some declared runs missing: **partly run (k of m
  runs)** (never a number from fewer runs than declared);
- one seed (where a test's numbers differ by seed), or fewer rounds than the paper's T (where
  they depend on T): that test cannot decide; none can: **inconclusive**; the others hold in no
  unit: **not reproduced** (a claim is the conjunction of its tests); in every unit:
  **inconclusive**; else **partly** (the gate is a property of the test, so one measurement that
  two claims test gets one word);
- no unit of any test is evidence (nothing trained; a timing inside its base's noise, or whose
  noise is not measured): **inconclusive**;
- every test holds in every unit: **reproduced** on the paper's data, **reproduced on a
  stand-in** on another dataset; every test in no unit: **not reproduced**; anything between,
  and an ordering read to the end that holds only from some round on in every unit ("holds from
  round r on only"; where some unit never holds, a late unit counts as not holding): **partly**
  (over a window that ends, a speed test, it does not hold: :func:`eventual`);
- an implementation check (``implementation: true``: the code's own counters against the formulas
  it implements, not a measurement of the paper's claim) is **checked** where every test holds in
  every unit and **check failed** where one does not; it is never counted as reproduced
  (:func:`as_check`).
"""

from __future__ import annotations

import re
from collections.abc import Container
from dataclasses import dataclass

from .declare import Claim, Test
from .evidence import Evidence
from .sensitivity import Choice, label, supporting
from .units import Outcome

WORDS = (
    "reproduced",
    "reproduced on a stand-in",
    "partly",
    "not reproduced",
    "inconclusive",
    "not run",
    "checked",
    "check failed",
)


@dataclass(frozen=True)
class Verdict:
    word: str
    why: str


def units_noun(o: Outcome) -> str:
    if o.test.source == "bench":
        return "models"
    if o.test.kind == "ratio":
        return "pairs"
    if o.test.kind == "level":
        return "runs"
    if o.test.curve == "mean":
        return "panels' mean curves" if o.test.panels else "mean curves"
    return "panel-seeds" if o.test.panels else "seeds"


def state(o: Outcome) -> tuple[str, str]:
    """A test's state (all, late, some, none, undecided) and its count in words."""
    c = o.conclusive
    n, held = len(c), o.held
    count = f"{held} of {n} {units_noun(o)}" + (f" ({_blind(o)})" if len(o.units) > n else "")
    if not c:
        return "undecided", f"{_blind(o)} in {len(o.units)} {units_noun(o)}"
    if held == n:
        return "all", count
    onsets = [u.onset for u in c if u.onset is not None]
    if eventual(o.test) and len(onsets) == n:  # the count that holds first
        return "late", (
            f"{n} of {n} {units_noun(o)} from round {max(onsets)} on "
            f"({held} of {n} from round {o.test.from_round})"
        )
    return ("none" if held == 0 else "some"), count


WHY = {"noise": "inside the noise", "unmeasured": "noise not measured"}  # Unit.undecided


def _blind(o: Outcome) -> str:
    """How many units are no evidence, and why: untrained ("no evidence"), a ratio inside its
    base's noise ("inside the noise"), or a timing whose noise is not measured ("noise not
    measured")."""
    blind = [u for u in o.units if u.holds is None]
    why = {k: sum(u.undecided == k for u in blind) for k in WHY}
    other = len(blind) - sum(why.values())
    said = [f"{other} no evidence" if other else ""]
    said += [f"{n} {WHY[k]}" if n else "" for k, n in why.items()]
    if not o.conclusive:  # "no evidence in 3 pairs", "inside the noise in 3 pairs"
        return "; ".join(x for x in said if x).removeprefix(f"{len(o.units)} ")  # one reason
    return "; ".join(x for x in said if x)


def eventual(t: Test) -> bool:
    """Whether an ordering that holds from some round on only is a partial result of ``t``: it
    is read at every evaluation to the end (an eventual ordering). Over a window that ends
    (``to_round``: a speed test, "faster in rounds 5-50") an ordering that sets in late did not
    hold early, which is what the window tests: it does not hold."""
    return t.at == "every" and t.to_round is None


def _gate(
    o: Outcome, T: int | None, paper_T: int | None, seeds: int, per_round: bool, no_seeds: bool
) -> str:
    """Why a test cannot decide on this evidence ("" where it can): one seed where its numbers
    differ by seed, fewer rounds than the paper's T where they depend on T; a test the run set
    does not measure (a benchmark file of another number)."""
    if o.unmeasured:
        return o.unmeasured
    if not (no_seeds or o.test.no_seeds) and seeds < 2:
        return "one seed cannot order the runs"
    if not (per_round or o.test.per_round) and paper_T and T is not None and T < paper_T:
        return f"T = {T} of the paper's {paper_T}"
    return ""


def _decided(outcomes: list[Outcome], stand_in: str) -> Verdict:
    """The word of tests that can decide, from their units."""
    states = [state(o) for o in outcomes]
    kinds = {s for s, _ in states}
    blind = sum(len(o.units) - len(o.conclusive) for o in outcomes)
    if kinds == {"undecided"}:
        why = {u.undecided for o in outcomes for u in o.units}
        said = {
            "noise": "lies inside the noise of its base's own measurement",
            "unmeasured": "has no measured noise",
        }
        return Verdict(
            "inconclusive",
            f"every ratio {' or '.join(said[k] for k in said if k in why)}"
            if why <= set(said)
            else "no unit is evidence: in every seed a compared run ends untrained",
        )
    if kinds == {"all"} and not blind:
        return Verdict("reproduced on a stand-in" if stand_in else "reproduced", "")
    if kinds == {"none"}:
        return Verdict("not reproduced", "")
    late = [
        u.onset
        for o, (s, _) in zip(outcomes, states)
        if s == "late"
        for u in o.conclusive
        if u.onset is not None  # (all of them: a late state's units all have an onset)
    ]
    if kinds <= {"all", "late"} and late:
        return Verdict("partly", f"holds from round {max(late)} on only")
    only_blind = kinds <= {"all", "undecided"}  # it holds wherever there is evidence
    if late:  # an ordering that sets in late beside a test that fails: say where it holds
        return Verdict("partly", f"an ordering holds from round {max(late)} on only")
    return Verdict(
        "partly", f"{blind} unit{'s' * (blind > 1)} without evidence" if only_blind else ""
    )


def word(
    outcomes: list[Outcome],
    stand_in: str,
    T: int | None,
    paper_T: int | None,
    seeds: int,
    present: int,
    declared: int,
    per_round: bool = False,
    no_seeds: bool = False,
) -> Verdict:
    """The word from the per-unit test results, the data (``stand_in``: "" for the paper's own),
    T and seeds against the paper's, and the runs present against those declared. A test that
    cannot decide (:func:`_gate`) leaves the word to the others: they hold in no unit, **not
    reproduced** (the claim joins its tests); they hold everywhere, **inconclusive**."""
    if not declared or not present:
        return Verdict("not run", "nothing of it ran here")
    if present < declared:
        return Verdict(
            f"partly run ({present} of {declared} runs)",
            "the missing runs are in `fedrun-reproduce plan`",
        )
    gates = [_gate(o, T, paper_T, seeds, per_round, no_seeds) for o in outcomes]
    reasons = "; ".join(dict.fromkeys(g for g in gates if g))
    able = [o for o, g in zip(outcomes, gates) if not g]
    if not outcomes:
        return Verdict("inconclusive", "no test decides on this data")
    if not able:
        return Verdict("inconclusive", reasons)
    v = _decided(able, stand_in)
    if not reasons:
        return v
    if v.word == "not reproduced":
        return Verdict(
            v.word, f"{_tests(outcomes, able)} in no unit; {_tests(outcomes, None)}: {reasons}"
        )
    if v.word.startswith("reproduced"):
        return Verdict(
            "inconclusive", f"{_tests(outcomes, able)}; {_tests(outcomes, None)}: {reasons}"
        )
    return Verdict(v.word, "; ".join(x for x in (v.why, reasons) if x))


def _tests(outcomes: list[Outcome], able: Container[Outcome] | None) -> str:
    """ "test 2 holds" for the tests in ``able``; "test 1" for the others (``able`` None)."""
    if able is None:
        return "the others"
    names = [f"test {i}" for i, o in enumerate(outcomes, 1) if o in able]
    return f"{' and '.join(names)} hold{'s' * (len(names) == 1)}"


def choices(claim: Claim, ev: Evidence) -> list[Choice]:
    """The word at each combination of a sensitivity run set's open choices, by the same rule
    on the primary tests that have units there."""
    out = []
    for values, outcomes, present, declared, diverged in ev.choices:
        w = (
            word(
                primary(outcomes),
                ev.runset.stands_for,
                ev.T,
                claim.paper_T,
                _seeds([u.label for o in outcomes for u in o.units]),
                present,
                declared,
                claim.per_round,
                claim.no_seeds,
            ).word
            if present
            else "not run"
        )
        out.append(
            Choice(
                values,
                "no test applies" if present == declared and not outcomes else w,
                present,
                declared,
                diverged,
                supporting(ev.runset, values),
            )
        )
    return out


def _seeds(labels: list[str]) -> int:
    """How many seeds units with these labels span: their distinct seeds ("..., seed 3"), or
    the N of a mean curve's unit ("mean of N seeds")."""
    means = [int(m.group(1)) for x in labels if (m := re.search(r"mean of (\d+) seeds$", x))]
    return max([len({x.rsplit("seed ", 1)[-1] for x in labels}) if not means else 0, *means])


def primary(outcomes: list[Outcome]) -> list[Outcome]:
    """The outcomes of the tests that decide the word (primary, and able to decide on this
    data: not ``moot``)."""
    return [o for o in outcomes if o.test.role == "primary" and not o.moot]


def as_check(v: Verdict) -> Verdict:
    """The word of an implementation check from the rule's: **checked** for reproduced,
    **check failed** where a unit does not hold (partly, not reproduced); the others as they
    are (inconclusive, not run, partly run)."""
    if v.word.startswith("reproduced"):
        return Verdict("checked", v.why or "an implementation check: not counted as reproduced")
    if v.word in ("partly", "not reproduced"):
        return Verdict("check failed", f"{v.word} by the rule" + (f": {v.why}" if v.why else ""))
    return v


def of(claim: Claim, ev: Evidence | None) -> Verdict:
    """The word of ``claim`` on the evidence of one of its run sets (None: nothing ran); an
    implementation check's by :func:`as_check`."""
    if ev is None:
        return word([], "", None, claim.paper_T, 0, 0, 0)
    v = word(
        primary(ev.outcomes),
        ev.runset.stands_for,
        ev.T,
        claim.paper_T,
        len(ev.seeds),
        ev.present,
        ev.declared,
        claim.per_round,
        claim.no_seeds,
    )
    if v.word == "not run" and ev.runset.tuning:
        v = Verdict(v.word, "its tuning runs are not all made (`fedrun-reproduce plan`)")
    return as_check(v) if claim.implementation else v


def across(claim: Claim, found: list[Evidence]) -> Verdict:
    """The word of ``claim`` on its run sets. Each device and dataset's deciding run set (its
    first with runs that is neither a sensitivity grid nor declared ``role: supporting``) gives
    a word; where they disagree the word
    names each ("partly (cpu); not reproduced (NVIDIA H200)", "not reproduced (mnist5k); partly
    (FMNIST)") and says why. Where an open-choice grid reads the claim as holding at some values
    and as not reproduced at others, the word depends on what the paper leaves open:
    **inconclusive**, saying so (:func:`depends`)."""
    v = _deciding(claim, found)
    open_ = depends(claim, found)
    if not open_ or v.word in ("not run", "inconclusive") or v.word.startswith("partly run"):
        return v
    return Verdict(
        "inconclusive",
        f"the word depends on what the paper leaves open ({open_}); at the declared setting: "
        f"{v.word}" + (f" ({v.why})" if v.why else ""),
    )


def _deciding(claim: Claim, found: list[Evidence]) -> Verdict:
    per: dict[tuple[str, str], Evidence] = {}  # (device, data) -> its evidence
    for ev in found:
        if ev.present and not ev.runset.choices and ev.runset.role == "primary":
            per.setdefault((ev.runset.device, ev.runset.data), ev)
    if len(per) < 2:
        first = next(iter(per.values()), found[0] if found else None)
        return of(claim, first)
    named = [k for k in range(2) if len({key[k] for key in per}) > 1] or [0, 1]
    words = {", ".join(key[k] for k in named): of(claim, ev) for key, ev in per.items()}
    said = "; ".join(f"{d}: {v.word}" + (f" ({v.why})" if v.why else "") for d, v in words.items())
    if len({v.word for v in words.values()}) == 1:
        return Verdict(next(iter(words.values())).word, f"on each {_what(named)} ({said})")
    return Verdict(
        "; ".join(f"{v.word} ({d})" for d, v in words.items()),
        f"the word depends on the {_what(named)} ({said})",
    )


def _what(named: list[int]) -> str:
    return " and ".join(("device", "dataset")[k] for k in named)


HOLDS = ("reproduced", "reproduced on a stand-in", "partly")


def depends(claim: Claim, found: list[Evidence]) -> str:
    """Where a sensitivity grid, fully run, reads the claim as holding (reproduced, partly) at
    some combination of its open choices and as not reproduced at another: each such grid's
    words ("on mnist5k: partly at (alpha = 0.1, eta = 0.1), ...; not reproduced at ..."),
    else ""."""
    out = []
    for ev in found:
        if not (ev.present and ev.runset.choices and ev.runset.role == "primary"):
            continue
        got = [c for c in choices(claim, ev) if not c.supporting]
        words = {c.word for c in got}
        if any(c.present < c.declared for c in got):
            continue
        if words & set(HOLDS) and "not reproduced" in words:
            per: dict[str, list[str]] = {}  # a word -> where it is said
            for c in got:
                per.setdefault(c.word, []).append(f"({label(c.values)})")
            out.append(
                f"on {ev.runset.data}: "
                + "; ".join(f"{w} at {', '.join(at)}" for w, at in per.items())
            )
    return "; ".join(out)
