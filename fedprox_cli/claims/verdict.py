"""The word of a claim, from its evidence, by one rule for every claim (:func:`word`), applied
to its primary tests alone (a supporting test is shown, never deciding: :func:`of`).

- nothing of the claim ran here: **not run**; some declared runs missing: **partly run (k of m
  runs)** (never a number from fewer runs than declared);
- one seed (where seeds matter), or fewer rounds than the paper's T (where the tested numbers
  depend on T): **inconclusive**;
- no unit of any test is evidence (nothing trained): **inconclusive**;
- every test holds in every unit: **reproduced** on the paper's data, **reproduced on a
  stand-in** on another dataset; every test in no unit: **not reproduced**; anything between,
  and an ordering that holds only from some round on ("holds from round r on only"): **partly**.
"""

from __future__ import annotations

from dataclasses import dataclass

from .evidence import Evidence, Outcome
from .sensitivity import Choice

WORDS = (
    "reproduced",
    "reproduced on a stand-in",
    "partly",
    "not reproduced",
    "inconclusive",
    "not run",
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
    return "panel-seeds" if o.test.panels else "seeds"


def state(o: Outcome) -> tuple[str, str]:
    """A test's state (all, late, some, none, undecided) and its count in words."""
    c = o.conclusive
    n, held = len(c), o.held
    count = f"{held} of {n} {units_noun(o)}" + (
        f" ({len(o.units) - n} no evidence)" if len(o.units) > n else ""
    )
    if not c:
        return "undecided", f"no evidence in {len(o.units)} {units_noun(o)}"
    if held == n:
        return "all", count
    if o.test.at == "every" and all(u.onset is not None for u in c):  # the count that holds first
        return "late", (
            f"{n} of {n} {units_noun(o)} from round {max(u.onset for u in c)} on "
            f"({held} of {n} from round {o.test.from_round})"
        )
    return ("none" if held == 0 else "some"), count


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
    T and seeds against the paper's, and the runs present against those declared."""
    if not declared or not present:
        return Verdict("not run", "nothing of it ran here")
    if present < declared:
        return Verdict(
            f"partly run ({present} of {declared} runs)",
            "the missing runs are in `fedrun-reproduce plan`",
        )
    if not no_seeds and seeds < 2:
        return Verdict("inconclusive", "one seed cannot order the runs")
    if not per_round and paper_T and T is not None and T < paper_T:
        return Verdict("inconclusive", f"T = {T} of the paper's {paper_T}")
    states = [state(o) for o in outcomes]
    kinds = {s for s, _ in states}
    blind = sum(len(o.units) - len(o.conclusive) for o in outcomes)
    if kinds == {"undecided"}:
        return Verdict(
            "inconclusive", "no unit is evidence: in every seed a compared run ends untrained"
        )
    if kinds == {"all"} and not blind:
        return Verdict("reproduced on a stand-in" if stand_in else "reproduced", "")
    if kinds == {"none"}:
        return Verdict("not reproduced", "")
    late = [u.onset for o, (s, _) in zip(outcomes, states) if s == "late" for u in o.conclusive]
    if kinds <= {"all", "late"} and late:
        return Verdict("partly", f"holds from round {max(late)} on only")
    only_blind = kinds <= {"all", "undecided"}  # it holds wherever there is evidence
    return Verdict(
        "partly", f"{blind} unit{'s' * (blind > 1)} without evidence" if only_blind else ""
    )


def choices(claim, ev: Evidence) -> list[Choice]:
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
                len({u.label.rsplit("seed ", 1)[-1] for o in outcomes for u in o.units}),
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
            )
        )
    return out


def primary(outcomes: list[Outcome]) -> list[Outcome]:
    """The outcomes of the tests that decide the word."""
    return [o for o in outcomes if o.test.role == "primary"]


def of(claim, ev: Evidence | None) -> Verdict:
    """The word of ``claim`` on the evidence of one of its run sets (None: nothing ran)."""
    if ev is None:
        return word([], "", None, claim.paper_T, 0, 0, 0)
    return word(
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
