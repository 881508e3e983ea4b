"""The renderings of the claims: results/REPRODUCTION.md (one table, then a section per claim),
the README's reproduction paragraph and docs/reproducing.md's table of claims, all from the
declarations and their evidence, so the three say the same words. Every number printed here
comes from a run folder or a benchmark file; nothing says who ran what when.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..analysis import groups
from . import declare, sensitivity, tuning
from .declare import Claim, RunSet
from .evidence import Evidence
from .sources import Source, facts
from .text import against, num, shown
from .units import Outcome, Unit, timed
from .verdict import Verdict, depends, primary, state
from .verdict import choices as verdict_choices

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
bound. A diverged run ("first non-finite at round r; above 1e3 x its start from round r'": its
first non-finite evaluation, and from where its loss stayed above 1e3 times its first value) is
the worst in every comparison beyond its last finite evaluation and never shortens the window the
others are read over (an equal-bytes budget comes from the runs that reached T). A run that did
not train (chance accuracy) is left out of each compared pair it is in. Orderings compare each
seed's runs (per-seed curves, not the mean curve the papers plot); a win over a diverged run
names it ("over diverged za2"). A level no run on a stand-in reaches (its best method stays
below) decides nothing on it; the claim says what the best run reaches. A claim read on several
devices or stand-ins gets a word for each where they differ; one whose word changes with a
choice the paper leaves open (a sensitivity grid: holds at some values, not reproduced at
others) is **inconclusive**, saying at which values it holds. An implementation check (the
code's own counters against the formulas it implements, not a measurement of what the paper
claims) is **checked** when every test holds in every unit, **check failed** otherwise, and is
never counted as reproduced. Each test says when its bounds (what it compares, where, and the
bounds it reads against) were declared relative to the claim's runs, as git records them
(`fedrun-reproduce record` reads it into `reproduction/DECLARED.tsv`): **pre-registered** when
the commit declaring them precedes every commit of the runs, **post hoc** when some runs were
committed before or with it (the bound could have been set after reading them).{runs_here}"""


@dataclass
class Rendered:
    """A claim's evidence (the run set that decides its word first) and its word."""

    claim: Claim
    evidence: list[Evidence]  # per run set that ran
    verdict: Verdict
    table: str = ""  # the claim's table in the paper's layout, Markdown (claims.tables)
    # test number -> when its bounds were declared relative to its runs, in words (claims.history)
    declared: dict[int, str] = field(default_factory=dict)
    digest: str = ""  # of the figure or table the report links (sha256, 12 digits; "missing")

    @property
    def deciding(self) -> Evidence | None:
        return self.evidence[0] if self.evidence else None


def cell(text: str) -> str:
    """``text`` safe inside a Markdown table cell."""
    return text.replace("|", "\\|")


def seed_list(given: Iterable[int]) -> str:
    """``0-9`` for consecutive seeds, else ``0, 2, 5``."""
    seeds = list(given)
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}-{seeds[-1]}"
    return ", ".join(map(str, seeds))


def data_of(rs: RunSet) -> str:
    return f"{rs.data} for {rs.stands_for}" if rs.stands_for else rs.data


def basis(r: Rendered) -> str:
    """data / T / seeds / device of the deciding run set."""
    ev = r.deciding
    if ev is None:
        return "—"
    rs = ev.runset
    devices = ", ".join(dict.fromkeys(d for e in r.evidence if e.present for d in e.devices))
    if not rs.folders:
        return f"{rs.data} / — / — / {devices}"
    paper = (
        f" of {r.claim.paper_seeds}"
        if r.claim.paper_seeds and len(ev.seeds) < r.claim.paper_seeds
        else ""
    )
    t = f"{ev.T}" + (
        f" of {r.claim.paper_T}" if r.claim.paper_T and ev.T != r.claim.paper_T else ""
    )
    return f"{data_of(rs)} / {t} / {len(ev.seeds)}{paper} / {devices}"


def headline(o: Outcome) -> str:
    """A test's number: mean ± std over its units, and how many hold."""
    vals = np.array([u.value for u in o.conclusive], float)
    _, count = state(o)
    if not len(vals):
        return count
    finite = vals[np.isfinite(vals)]
    if not len(finite):
        return f"diverged; {count}"
    if o.test.kind == "level":  # values of different settings: their range, and how many diverged
        bad = len(vals) - len(finite)
        return (
            f"{num(float(finite.min()))}-{num(float(finite.max()))}"
            + (f", {bad} diverged" if bad else "")
            + f"; {count}"
        )
    base = f" (the base's own spread {o.noise.spread:.1%})" if o.noise is not None else ""
    return f"{over_seeds(o)}{base}; {count}"


def over_seeds(o: Outcome) -> str:
    """A test's number pooled over seeds only: mean ± std over the seeds of its one group, or,
    where its units are several methods, settings or models, each group's mean over its seeds as
    a range that names what it spans ("0.784-0.825 over 3 partitions")."""
    groups: dict[str, list[float]] = {}
    for u in o.conclusive:
        if math.isfinite(u.value):
            name = u.label.rpartition("seed ")[0].rstrip(", ") if "seed " in u.label else u.label
            groups.setdefault(name, []).append(u.value)
    if len(groups) == 1:
        (vals,) = groups.values()
        spread = f" ± {num(float(np.std(vals, ddof=1)))}" if len(vals) > 1 else ""
        return f"{num(float(np.mean(vals)))}{spread}" + (
            f" over {len(vals)} seeds" if len(vals) > 1 else ""
        )
    means = [float(np.mean(v)) for v in groups.values()]
    seeds = {len(v) for v in groups.values()}
    each = f", each the mean of {seeds.pop()} seeds" if seeds != {1} and len(seeds) == 1 else ""
    span = num(min(means)) if min(means) == max(means) else f"{num(min(means))}-{num(max(means))}"
    return f"{span} over {_spans(o, list(groups))}{each}"


def _spans(o: Outcome, names: list[str]) -> str:
    """What a test's groups of units differ in, with how many values of each: the keys of their
    labels, methods or models ("2 methods x 3 partition values")."""
    parts = [n.split(", ") for n in names]
    keys = []
    for i in range(max(map(len, parts))):
        values = {p[i] if i < len(p) else "" for p in parts}
        if len(values) > 1:
            k = next(iter(values)).partition("=")
            noun = (
                f"{k[0]} values"
                if k[1]
                else ("models" if o.test.source == "bench" and i == 0 else "methods")
            )
            keys.append(f"{len(values)} {noun}")
    return " x ".join(keys) or f"{len(names)} groups"


def row(r: Rendered) -> str:
    c, ev = r.claim, r.deciding
    ours = "—"
    deciding = primary(ev.outcomes) if ev is not None else []
    if (
        ev is not None and deciding
    ):  # the primary test of the paper's number, else the first; the others' counts
        first = next((o for o in deciding if o.test.paper), deciding[0])
        ours = (
            f"test {ev.outcomes.index(first) + 1}, {_number(first)}: {headline(first)}"
            + "".join(
                f"; test {ev.outcomes.index(o) + 1}: {state(o)[1]}"
                for o in deciding
                if o is not first
            )
        )
    if ev is not None and any(d for d, _ in ev.diverged.values()):
        ours += f"; {diverged(ev)}"
    if ev is not None and deciding:
        ours += f"; {post_hoc(r, [ev.outcomes.index(o) + 1 for o in deciding])}"
    ours += "".join(f"; {other}" for other in others(r))
    if open_ := depends(c, r.evidence):  # the word the open-choice grid gives, per value
        ours += f"; by the open choice's grid (never deciding): {open_}"
    kind = "figure" if c.figure.endswith(".png") else "table"
    fig = f"[{kind}]({c.figure})" if c.figure and ev is not None else "—"
    return (
        f"| [{c.title}](#{c.id}) ({c.where.split(', ')[0]}): {cell(c.short)} | {cell(c.numbers)} | {ours} | "
        f"{basis(r)} | **{r.verdict.word}** | {fig} |"
    )


def others(r: Rendered) -> list[str]:
    """The other stand-ins' readings of the claim (a run set on other data, at the declared
    setting): each primary test's count ("on FMNIST for MNIST: test 1: 2 of 3 seeds")."""
    first = r.deciding
    out, seen = [], {first.runset.data} if first is not None else set()
    for ev in r.evidence[1:]:
        rs = ev.runset
        if rs.data in seen or rs.choices or not ev.present or not rs.folders:
            continue
        seen.add(rs.data)
        tests = [
            f"test {ev.outcomes.index(o) + 1}: {state(o)[1]}"
            + (f" ({k} with wins over diverged {gone} only)" if (k := len(only)) else "")
            for o in primary(ev.outcomes)
            for only in [_over_diverged(o)]
            for gone in [", ".join(dict.fromkeys(n for u in only for n in _beaten(u)))]
        ]
        if tests:
            aside = " (a supporting run set, never deciding)" if rs.role != "primary" else ""
            out.append(f"on {data_of(rs)}{aside}: {'; '.join(tests)}")
    return out


def _over_diverged(o: Outcome) -> list[Unit]:
    """The units (seeds) that hold with every win over a diverged run: each compared run
    diverged, so the win is the rule's alone and compares nothing that converged."""
    return [u for u in o.units if u.holds and len(_beaten(u)) == len(o.test.values) - 1]


def _beaten(u: Unit) -> list[str]:
    """The diverged runs a unit's win is over (its "over diverged a, b" aside)."""
    said = [x for x in u.aside.split("; ") if x.startswith("over diverged ")]
    return said[0].removeprefix("over diverged ").split(", ") if said else []


def post_hoc(r: Rendered, tests: list[int]) -> str:
    """Which of ``tests`` have bounds declared post hoc, pre-registered or in no record."""
    per: dict[str, list[str]] = {}
    for i in tests:
        said = r.declared.get(i, "not recorded")
        per.setdefault(said.split(":")[0].split(" (")[0], []).append(str(i))
    if len(per) == 1:
        return f"bounds {next(iter(per))}"
    return "bounds " + ", ".join(
        f"{w} (test{'s' * (len(t) > 1)} {', '.join(t)})" for w, t in per.items()
    )


def diverged(ev: Evidence) -> str:
    """How many of the run set's settings diverged, in how many of their runs."""
    bad = {k: v for k, v in ev.diverged.items() if v[0]}
    return (
        f"{len(bad)} of {len(ev.diverged)} settings diverged ("
        + "; ".join(f"{k} in {d} of {n} runs" for k, (d, n) in bad.items())
        + ")"
    )


def trained(c: Claim, ev: Evidence) -> str:
    """Which settings trained (their runs' final trained metric, mean over seeds) and which ended
    below the claim's bar in every run (a result of the setting, said so)."""
    means = {k: float(np.mean(v)) for k, v in ev.trained.items()}
    low = [k for k, v in ev.trained.items() if max(v) < c.trained_min]
    some = [k for k, v in ev.trained.items() if min(v) < c.trained_min and k not in low]
    text = (
        f"Final {c.trained_metric} (mean over seeds): "
        + "; ".join(f"{k}: {num(v)}" for k, v in means.items())
        + "."
    )
    if low and len(low) == len(ev.trained):
        text += (
            f" Below {c.trained_min:g} (untrained) in every run of every setting: on "
            f"{data_of(ev.runset)} no run trains, so the run set cannot test the claim (whether "
            f"the data, the model or the methods' settings cause it, no control run here says)."
        )
    elif low:
        text += (
            f" Below {c.trained_min:g} (untrained) in every run: {'; '.join(low)} -- a result of "
            f"this setting, which leaves it out of every compared pair it is in."
        )
    if some:
        text += f" Below {c.trained_min:g} in some runs: {'; '.join(some)}."
    return text


def _rows(o: Outcome, name: str) -> list[str]:
    """Per-seed rows of one test: one per panel (units sharing all but the seed)."""
    rows: dict[str, list[str]] = {}
    for u in o.units:  # a label's last part names the unit in its panel (a seed, a K, a model)
        panel = u.label.rpartition("seed " if "seed " in u.label else ", ")[0]
        within = u.label.rpartition(", ")[2] if "seed " not in u.label and panel else ""
        mark = ("✓" if u.holds else "✗") if u.holds is not None else f"–({'✓' if u.raw else '✗'})"
        if o.test.at == "every":  # the onset says more than the last value
            text = mark + (f" from {u.onset}" if u.onset is not None and not u.holds else "")
        else:
            text = f"{within + ': ' if within else ''}{u.note or against(u.value, o.test.holds)} {mark}"
        text += f" ({u.aside})" if u.aside else ""
        rows.setdefault(panel.rstrip(", ") or "all", []).append(text)
    held = {panel: sum("✓" in c and "–(" not in c for c in cells) for panel, cells in rows.items()}
    return [
        f"| {name} | {panel} | {_seeds(cells)} | {held[panel]} of {len(cells)} |"
        for panel, cells in rows.items()
    ]


def _seeds(cells: list[str]) -> str:
    """The cells of one panel; one mark shared by every seed once (``✓ in each``)."""
    same = len(cells) > 1 and len(set(cells)) == 1 and " " not in cells[0]
    return f"{cells[0]} in each" if same else "; ".join(cells)


def report_key(key: str) -> str:
    return key.rsplit(".", 1)[-1]


def _value_word(o: Outcome) -> str:
    t = o.test
    if t.kind == "order":
        if t.at == "every":
            return ""
        at = "at equal bytes sent" if t.at == "bytes" else t.at
        return f"{t.metric} ({at}) at {report_key(t.compared)}={shown(t.values[0])}"
    if t.kind == "level":
        return f"{t.metric} ({t.at}) of each"
    if t.kind == "slope":
        return f"slope of log {t.metric} ({t.at}) on log {t.key}"
    if t.kind == "drop":
        return f"points by which {shown(t.values[0])} trails the best other ({t.metric}, {t.at})"
    if t.source == "bench":
        return f"{t.metric} over one forward-backward pass, for {', '.join(t.values)}"
    return f"{t.metric} over {shown(t.base)}"


def _number(o: Outcome) -> str:
    """What a test's summary number is (an ordering read at every evaluation: its first
    value's last one)."""
    t = o.test
    if t.kind == "order" and t.at == "every":
        return f"{t.metric} (last) at {report_key(t.compared)}={shown(t.values[0])}"
    return _value_word(o)


def owners(claims: list[Claim]) -> dict[str, Claim]:
    """Each run set (by its declaration) -> the first claim declaring it, which describes it;
    a later claim sharing it refers to that one."""
    out: dict[str, Claim] = {}
    for c in claims:
        for rs in c.ran:
            out.setdefault(repr(rs), c)
    return out


def settings(rs: RunSet) -> str:
    """A run set's settings as fedrun's arguments: its preset, then its overrides."""
    return " ".join([*([f"experiment={rs.preset}"] if rs.preset else []), *rs.overrides])


def _ran(r: Rendered, ev: Evidence, owner: dict[str, Claim]) -> str:
    """The line saying where a run set's evidence comes from."""
    c, rs = r.claim, ev.runset
    first = owner.get(repr(rs), c)
    aside = " A supporting run set: shown, never deciding the word." * (rs.role != "primary")
    if rs.folders and first.id != c.id:
        return f"Ran on {data_of(rs)}: the runs of [{first.title}](#{first.id}).{aside}"
    if rs.folders:
        new = (rs.into,) if rs.tuning and rs.into not in rs.folders else ()  # its new runs
        return (
            f"Ran on {data_of(rs)}: `{settings(rs)}` in "
            + ", ".join(f"`{f}`" for f in (*rs.folders, *new))
            + f" ({ev.present} of {ev.declared} runs, seeds {seed_list(ev.seeds)}, "
            + f"T = {ev.T}, {ev.minutes:.0f} job-minutes)"
            + (f"; {diverged(ev)}." if any(d for d, _ in ev.diverged.values()) else ".")
            + aside
        )
    files = [rs.bench] if rs.bench else list(dict.fromkeys(t.file for t in c.tests))
    made = f" ({rs.provenance})" if rs.provenance else ""
    return f"Measured on {rs.data}, {rs.device}: {', '.join(files)}{made}."


def _test_lines(
    ev: Evidence, where: str, last_shown: str, declared: dict[int, str]
) -> tuple[list[str], list[str], str]:
    """A run set's numbered test lines, its rows of the per-seed table (each test's number
    followed by ``where``), and the last value word shown (one the test above shows is said
    once); each test's declaration order (``declared``, taken: said once per claim)."""
    out, table = [], []
    for i, o in enumerate(ev.outcomes, 1):
        name = f"{i}{where}"
        paper = f" (paper: {o.test.paper})" if o.test.paper else ""
        shown_ = _value_word(o)
        said = shown_ and shown_ != last_shown
        role = " (supporting: shown, not deciding)" if o.test.role != "primary" else ""
        moot = f" Decides nothing here: {o.moot}." if o.moot else ""
        moot += f" Not measured here: {o.unmeasured}." if o.unmeasured else ""
        moot += noise(o)
        order = f" Bounds {declared.pop(i)}." if i in declared else ""
        out.append(
            f"{i}. {o.test.says}{paper}{role}"
            + (f"; shown: {shown_}." if said else ".")
            + moot
            + order
        )
        last_shown = shown_
        table += _rows(o, name)
    return out, table, last_shown


def noise(o: Outcome) -> str:
    """A timing's noise (:func:`.units.timed`): the base's spread over its repeats, or that it is
    not measured here, so that its units decide nothing."""
    if o.noise is not None:
        return f" Noise: {o.noise.said(o.test.metric)}."
    if timed(o.test) and not o.unmeasured and o.units:
        one = "one median per setting" if o.test.source == "bench" else "one of the base"
        return f" Noise: not measured here ({one}), so no ratio of it decides."
    return ""


def _choice_rows(c: Claim, ev: Evidence) -> list[str]:
    """A sensitivity grid's per-seed rows, per combination of its open choices."""
    out = []
    for values, outcomes, *_ in ev.choices:
        for o in outcomes:
            name = f"{c.tests.index(o.test) + 1} ({ev.runset.data}; {sensitivity.label(values)})"
            out += _rows(o, name)
    return out


def _evidence(r: Rendered, owner: dict[str, Claim]) -> tuple[list[str], list[str]]:
    """The lines on each run set of the claim, and the rows of its per-seed table."""
    c, out, table, last_shown = r.claim, [], [], ""
    declared = dict(r.declared)
    devices = len({ev.runset.device for ev in r.evidence}) > 1
    for ev in r.evidence:
        rs = ev.runset
        where = f" ({rs.data}, {rs.device})" if devices else f" ({rs.data})"
        out.append(_ran(r, ev, owner))
        out += [picked(ev, r.declared.get(0, ""))] if ev.picks else []
        if ev.trained and not ev.runset.choices:
            out.append(trained(c, ev))
        if ev.runset.choices:
            out.append(sensitivity.summary(c, ev.runset, verdict_choices(c, ev)))
            out += [reused(ev)] if ev.reused[0] else []
        lines, rows, last_shown = _test_lines(
            ev, where if len(r.evidence) > 1 else "", last_shown, declared
        )
        out += lines + [""]
        table += rows + _choice_rows(c, ev)
    return out, table


def picked(ev: Evidence, order: str) -> str:
    """A tuned run set's protocol, what it chose (:mod:`.tuning`) and when it was declared
    relative to its tuning runs (``order``, :func:`.history.protocol_of`)."""
    t = tuning.of(ev.runset)
    grid = ", ".join(groups.fmt(x) for x in t.grid)
    return (
        f"Tuned by the declared protocol: each tuned method's step on the grid {{{grid}}}, the one "
        f"whose run on the tuning seed {t.seed} reached T without diverging with the best last "
        f"{t.metric} (a tie to the larger step); the tests read seeds {seed_list(ev.runset.seeds)} "
        f"at the chosen steps, never the tuning seed: "
        + "; ".join(p.said(t.metric) for p in ev.picks)
        + "."
        + (f" Protocol {order}." if order else "")
    )


def reused(ev: Evidence) -> str:
    """What a sensitivity grid's runs are compared with at every combination."""
    n, bad = ev.reused
    return (
        f"At every combination they are compared with the {n} runs the open choices do not vary, "
        f"at the claim's declared setting ({bad} of them diverged)."
    )


def _links(r: Rendered) -> list[str]:
    """The figure or table the report links (with its digest), and the paper-layout table."""
    c, out = r.claim, []
    if c.figure and r.evidence:
        out += [
            "",
            f"[{'Figure' if c.figure.endswith('.png') else 'Table'}]({c.figure}) (sha256 {r.digest})",
        ]
        if c.figure_spec is not None:  # the same figure for a paper: PDF, TrueType fonts
            out[-1] += f" ([PDF]({c.figure.removesuffix('.png')}.pdf))"
    if r.table:  # the paper's table, its numbers beside ours (LaTeX beside it)
        out += [
            "",
            r.table.rstrip("\n"),
            "",
            f"[Markdown](reproduction/tables/{c.id}.md), [LaTeX](reproduction/tables/{c.id}.tex)",
        ]
    return out


def section(r: Rendered, owner: dict[str, Claim]) -> str:
    """One claim's section (``owner``: :func:`owners` of every claim)."""
    c = r.claim
    out = [
        f'<a id="{c.id}"></a>',
        f"## {c.title}: {c.short}",
        "",
        f"> {c.quote} ({c.where})",
        "",
        f"Paper: {c.setting}.",
        f"Chosen: {c.chosen}." if c.chosen else "",
        f"Revised after the runs were read: {c.revised}." if c.revised else "",
        "",
    ]
    lines, table = _evidence(r, owner)
    out += lines
    if table:
        out += [
            "| test | panel | per seed (in order) | holds in |",
            "|---|---|---|---|",
            *table,
            "",
        ]
    if c.note:
        out += [c.note, ""]
    out.append(f"Word: **{r.verdict.word}**" + (f": {r.verdict.why}." if r.verdict.why else "."))
    return "\n".join(out + _links(r)) + "\n"


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
    """Why the claim has its word (the rule's reason), and each sensitivity grid's reading:
    the lines `fedrun-reproduce list` prints under a claim."""
    out = [f"why: {r.verdict.why}"] if r.verdict.why else []
    for ev in r.evidence:
        if ev.runset.choices and ev.present:
            said = sensitivity.summary(r.claim, ev.runset, verdict_choices(r.claim, ev))
            out.append(f"on {data_of(ev.runset)}: {said}")
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
