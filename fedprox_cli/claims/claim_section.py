"""One claim's section of results/REPRODUCTION.md (:func:`section`): the quote, where each
run set's evidence comes from (:func:`picked` for a tuned one, :func:`trained` for which of
its settings trained), the numbered tests with their noise (:func:`noise`), the per-seed
table, the word and the links to its figure and table.
"""

from __future__ import annotations

import numpy as np

from ..analysis import groups
from . import sensitivity, tuning
from .claim_table import (
    Rendered,
    data_of,
    diverged,
    seed_list,
    settings,
    value_word,
)
from .declare import Claim
from .evidence import Evidence
from .text import against, num
from .units import Outcome, timed
from .verdict import choices as verdict_choices


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
            value = u.note or against(u.value, o.test.holds)
            text = f"{within + ': ' if within else ''}{value} {mark}"
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
            + f" ({counted(ev)}, T = {ev.T}, {ev.minutes:.0f} job-minutes)"
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
        shown_ = value_word(o)
        said = shown_ and shown_ != last_shown
        role = " (supporting: shown, not deciding)" if o.test.role != "primary" else ""
        moot = f" Decides nothing here: {o.moot}." if o.moot else ""
        moot += f" Diverged runs decide alone: {o.reach}." if o.reach else ""
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


def counted(ev: Evidence) -> str:
    """A run set's runs present of those declared, and its seeds; a tuned one's split into its
    tuning runs (on the tuning seed) and the verdict's runs (at the chosen steps)."""
    runs = f"{ev.present} of {ev.declared} runs"
    if not ev.picks:
        return f"{runs}, seeds {seed_list(ev.seeds)}"
    made, of = sum(len(p.read) for p in ev.picks), sum(p.of for p in ev.picks)
    return (
        f"{runs}: {made} of {of} tuning runs on seed {tuning.of(ev.runset).seed} and "
        f"{ev.present - made} of {ev.declared - of} verdict runs on seeds {seed_list(ev.seeds)}"
    )


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
            f"[{'Figure' if c.figure.endswith('.png') else 'Table'}]({c.figure})"
            f" (sha256 {r.digest})",
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
