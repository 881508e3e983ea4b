"""The report's table of claims (results/REPRODUCTION.md's first table, the README's and
docs/reproducing.md's): a claim's rendering (:class:`Rendered`), its row (:func:`row`), the
basis of its word (:func:`basis`), a test's number (:func:`headline`, :func:`over_seeds`) and
what the number is of (:func:`value_word`). Every number comes from a run folder or a
benchmark file.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from .declare import Claim, RunSet
from .evidence import Evidence
from .text import num, shown
from .units import Outcome, Unit
from .verdict import Verdict, depends, primary, state


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
            f"test {ev.outcomes.index(first) + 1}, {number_of(first)}: {headline(first)}"
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
    elif mine := [i for i, t in enumerate(c.tests, 1) if t.role == "primary"]:
        ours += f" ({post_hoc(r, mine)})"  # no deciding reading: still when its bounds were set
    ours += "".join(f"; {other}" for other in others(r))
    if open_ := depends(c, r.evidence):  # the word the open-choice grid gives, per value
        ours += f"; by the open choice's grid (the word depends on it: inconclusive): {open_}"
    kind = "figure" if c.figure.endswith(".png") else "table"
    fig = f"[{kind}]({c.figure})" if c.figure and ev is not None else "—"
    return (
        f"| [{c.title}](#{c.id}) ({c.where.split(', ')[0]}): {cell(c.short)} | "
        f"{cell(c.numbers)} | {ours} | "
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
            for only in [over_diverged(o)]
            for gone in [", ".join(dict.fromkeys(n for u in only for n in beaten(u)))]
        ]
        if tests:
            aside = " (a supporting run set, never deciding)" if rs.role != "primary" else ""
            out.append(f"on {data_of(rs)}{aside}: {'; '.join(tests)}")
    return out


def over_diverged(o: Outcome) -> list[Unit]:
    """The units (seeds) that hold with every win over a diverged run: each compared run
    diverged, so the win is the rule's alone and compares nothing that converged."""
    return [u for u in o.units if u.holds and len(beaten(u)) == len(o.test.values) - 1]


def beaten(u: Unit) -> list[str]:
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


def report_key(key: str) -> str:
    return key.rsplit(".", 1)[-1]


def value_word(o: Outcome) -> str:
    """What a test's number is, and where it reads the seeds' mean curves, so."""
    said = _value_word(o)
    return f"{said}, on the seeds' mean curve" if said and o.test.curve == "mean" else said


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


def number_of(o: Outcome) -> str:
    """What a test's summary number is (an ordering read at every evaluation: its first
    value's last one)."""
    t = o.test
    if t.kind == "order" and t.at == "every":
        return f"{t.metric} (last) at {report_key(t.compared)}={shown(t.values[0])}"
    return value_word(o)


def settings(rs: RunSet) -> str:
    """A run set's settings as fedrun's arguments: its preset, then its overrides."""
    return " ".join([*([f"experiment={rs.preset}"] if rs.preset else []), *rs.overrides])
