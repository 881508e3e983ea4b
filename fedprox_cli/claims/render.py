"""The renderings of the claims: results/REPRODUCTION.md (its rule paragraph, one table
(:mod:`.claim_table`), then a section per claim (:mod:`.claim_section`)), the README's
reproduction paragraph and docs/reproducing.md's table of claims, all from the declarations and
their evidence, so the three say the same words. Every number printed here comes from a run
folder or a benchmark file; nothing says who ran what when.
"""

from __future__ import annotations

from typing import Any

from . import declare, sensitivity
from .claim_section import section
from .claim_table import Rendered, basis, data_of, row, settings
from .declare import Claim
from .sources import Source, facts
from .verdict import choices as verdict_choices

__all__ = ["Rendered", "basis"]  # the commands' names of a claim's rendering and its basis

BEGIN, END = "<!-- claims:begin (fedrun-reproduce report writes this) -->", "<!-- claims:end -->"

RULES = """\
Written by `fedrun-reproduce report` from the claims in {source} and the runs
in `results/reproduction/`; `fedrun-reproduce check` recomputes it and names every change of the
evidence since its digests were recorded (`reproduction/EVIDENCE.sha256`). Tests count units (a
seed in a panel; a pair for ratios; a run for levels; a model for the prox benchmark). Each test
is *primary* (it tests the quoted words or a number the paper states) or *supporting* (shown,
marked so, never deciding). The word, from the primary tests alone, by one rule:
**reproduced** (the paper's data) or **reproduced on a stand-in** when every test holds in every
unit, **not reproduced** when in none, **partly** in between or when an ordering read to the end
holds from some round on only, in every unit (over a window that ends, a speed test, it then does not hold; where some unit never holds, a unit holding from some round on only, "✗ from r", counts as not holding); **partly run (k of m runs)** with declared runs missing; **not run** when nothing
ran here. A timing decides only outside its noise: a ratio whose margin to its bound lies inside
the spread of its base's own repeated measurement, or whose noise is not measured (one
measurement per setting, a benchmark file's single median), is no evidence. A test cannot decide with one seed where its numbers differ by seed, nor with fewer
rounds than the paper's T where they depend on T; the claim's other primary tests then decide
(**not reproduced** if they hold in no unit, **inconclusive** if in every unit), and with none
left, or no unit that trained, the word is **inconclusive**. *Tail*: the mean of a run's last 10%
of evaluations. Per-seed tables: ✓ holds, ✗ not, "✗ from r" from round r on only, – no evidence
(result in brackets); a value within 1% of its bound shows the digits that decide it and the
bound, and a one-point ordering names the best of the other runs and the margin, with the digits
that tell the two apart ("next fedda 0.956 against 0.96, margin +0.004"). A diverged run ("first non-finite at round r; above 1e3 x its start from round r'": its
first non-finite evaluation, and from where its loss stayed above 1e3 times its first value) is
the worst in every comparison beyond its last finite evaluation and never shortens the window the
others are read over (an equal-bytes budget comes from the runs that reached T). A run that did
not train (finite, at chance accuracy) is left out of each compared pair it is in, and a level
it misses is no evidence, where a diverged run fails it: a choice of this report, since both are
a method failing at the declared steps; divergence is read as the method's outcome (its iterates
left every bound, which the papers' "all converge" speaks to), a collapse as no reading (an
untrained model orders nothing). Both are named where they occur. A test reads each seed's
curves (a unit per seed), or, marked "on the seeds' mean curve", the mean over the seeds at
every evaluation that a paper plots and fits (a unit per panel; a seed that diverged makes the
mean non-finite from there): FedNMap Figs. 3-4, whose papers' orderings and slopes are read on
the mean of 10 trials, decide on it, each seed's reading shown beside it (read on the mean, no
other claim's word changes). A win over a diverged run names it ("over diverged za2"). A level no run on a stand-in reaches (its best method stays
below) decides nothing on it; the claim says what the best run reaches. A claim read on several
devices or stand-ins gets a word for each where they differ; one whose word changes with a
choice the paper leaves open (a sensitivity grid of a primary run set: holds at some values, not
reproduced at others) is **inconclusive**, saying at which values it holds; a supporting grid
(values off what the paper fixes, or a reading of this report's own) is shown and decides
nothing. An implementation check (the
code's own counters against the formulas it implements, not a measurement of what the paper
claims) is **checked** when every test holds in every unit, **check failed** otherwise, and is
never counted as reproduced. Each test says when its bounds (what it compares, where, and the
bounds it reads against) were declared relative to the claim's runs, as git records them
(`fedrun-reproduce record` reads it into `reproduction/DECLARED.tsv`): **pre-registered** when
the commit declaring them precedes every commit of the runs, **post hoc** when some runs were
committed before or with it (the bound could have been set after reading them).{runs_here}"""


def owners(claims: list[Claim]) -> dict[str, Claim]:
    """Each run set (by its declaration) -> the first claim declaring it, which describes it;
    a later claim sharing it refers to that one."""
    out: dict[str, Claim] = {}
    for c in claims:
        for rs in c.ran:
            out.setdefault(repr(rs), c)
    return out


def exemptions(claims: list[Claim]) -> str:
    """The rule's exemptions, each with the claims it applies to (from their declarations)."""
    seeds = [_exempt(c, "no_seeds") for c in claims if any(t.no_seeds for t in c.tests)]
    rounds = [_exempt(c, "per_round") for c in claims if any(t.per_round for t in c.tests)]
    out = []
    if seeds:
        out.append(
            f"one seed suffices where the tested numbers are counts, times per round or a "
            f"benchmark, the same at every seed ({', '.join(seeds)})"
        )
    if rounds:
        out.append(
            f"fewer rounds than the paper's T do not make a claim inconclusive where its tested "
            f"numbers are per round ({', '.join(rounds)})"
        )
    return ("Exemptions from the rule: " + "; ".join(out) + ".") if out else ""


def _exempt(c: Claim, flag: str) -> str:
    """The claim's title, with the tests the exemption covers where it does not cover all."""
    tests = [i for i, t in enumerate(c.tests, 1) if getattr(t, flag)]
    if len(tests) == len(c.tests):
        return c.title
    return f"{c.title} test{'s' * (len(tests) > 1)} {', '.join(map(str, tests))}"


def elsewhere(rendered: list[Rendered]) -> str:
    """Which claims also rest on measurements made on another device, and where they are."""
    per: dict[str, list[str]] = {}
    for r in rendered:
        for ev in r.evidence:
            if ev.present and ev.runset.device != "cpu" and ev.runset.bench:
                per.setdefault(ev.runset.device, []).append(r.claim.title)
    return " ".join(
        f"Measured on an {d} (files under `reproduction/`, each with its provenance): "
        f"{', '.join(dict.fromkeys(titles))}."
        for d, titles in per.items()
    )


def stand_ins(rendered: list[Rendered], facts: dict[str, Any] | None = None) -> str:
    """What each stand-in a claim ran on is (``facts``, default :func:`.declare.stand_ins`),
    and what it stands for."""
    facts = declare.stand_ins() if facts is None else facts
    used: dict[str, dict[str, None]] = {}  # stand-in -> what it stands for (in order)
    for r in rendered:
        for ev in r.evidence:
            if ev.present and ev.runset.stands_for:
                used.setdefault(ev.runset.data, {})[ev.runset.stands_for] = None
    return "\n".join(
        f"- **{d}** (for {', '.join(fors)}): {facts[d]}." for d, fors in sorted(used.items())
    )


def reasons(r: Rendered) -> list[str]:
    """Why the claim has its word (the rule's reason), each sensitivity grid's reading and
    each setting that diverged where its run set says why (``diverges``): the lines
    `fedrun-reproduce list` prints under a claim."""
    out = [f"why: {r.verdict.why}"] if r.verdict.why else []
    for ev in r.evidence:
        if ev.runset.choices and ev.present:
            said = sensitivity.summary(r.claim, ev.runset, verdict_choices(r.claim, ev))
            out.append(f"on {data_of(ev.runset)}: {said}")
        out += [
            f"on {data_of(ev.runset)}: {k} diverged in {d} of {n} runs: {why}"
            for k, (d, n) in ev.diverged.items()
            if d and (why := ev.runset.diverges.get(k))
        ]
    return out


def report(
    rendered: list[Rendered], owner: dict[str, Claim], origin: list[Source], written: str = ""
) -> str:
    """REPRODUCTION.md of the claims of the sources ``origin`` (named in its rule paragraph;
    ``written``: the line of digests of what it was written from beyond the runs,
    :func:`.digests.said`)."""
    rules = RULES.format(
        source=", ".join(s.name for s in origin),
        runs_here="".join(dict.fromkeys(s.runs_here for s in origin)),
    )
    head = [
        "# Reproduction report",
        "",
        rules + (f"\n{elsewhere(rendered)}" if elsewhere(rendered) else ""),
        "",
        *([written, ""] if written else []),
        exemptions([r.claim for r in rendered]),
        "",
        "Stand-ins (the data a claim ran on in place of the paper's):",
        stand_ins(rendered, facts(origin)),
        "",
        (
            "| claim | paper's number | ours (the test named, its number: mean ± std; holds in) | "
            "data / T / seeds / device | word | figure |"
        ),
        "|---|---|---|---|---|---|",
    ]
    return (
        "\n".join([*head, *map(row, rendered), ""])
        + "\n"
        + "\n".join(section(r, owner) for r in rendered)
    )


def readme(rendered: list[Rendered]) -> str:
    """The README's reproduction paragraph: one line per claim, its word and basis."""
    lines = [BEGIN, "| claim | word | data / T / seeds / device |", "|---|---|---|"]
    lines += [
        f"| {r.claim.title}: {r.claim.short} | **{r.verdict.word}** | {basis(r)} |"
        for r in rendered
    ]
    return "\n".join([*lines, END])


def docs(rendered: list[Rendered]) -> str:
    """docs/reproducing.md's table: each claim's run at the paper's setting and here."""
    lines = [BEGIN, "| claim | at the paper's setting | ran here | word |", "|---|---|---|---|"]
    for r in rendered:
        c = r.claim
        paper = f"`{settings(c.paper_runs)}` ({c.paper_runs.data})" if c.paper_runs else "—"
        here = (
            "; ".join(
                f"{data_of(ev.runset)}: "
                + (", ".join(f"`{f}`" for f in ev.runset.folders) or ev.runset.data)
                for ev in r.evidence
            )
            or "—"
        )
        lines.append(f"| {c.title} (`{c.id}`) | {paper} | {here} | **{r.verdict.word}** |")
    return "\n".join([*lines, END])


def between(text: str) -> str | None:
    """The generated block of ``text`` (markers included), or None without markers."""
    if BEGIN not in text or END not in text:
        return None
    return text[text.index(BEGIN) : text.index(END) + len(END)]


def replace_between(text: str, block: str) -> str | None:
    """``text`` with its generated block replaced by ``block``, or None without markers."""
    old = between(text)
    return text.replace(old, block) if old is not None else None
