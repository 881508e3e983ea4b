"""A claim figure's caption (:func:`caption`): the paper's figure and what it shows, then ours
(the data and what it stands in for, n, K or Q, T, the seeds), what a line, a band and a mark
are, and the declared curves the figure draws no line of."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..analysis import groups as grouping
from ..analysis.plotting import symbol
from ..analysis.run import Run
from ..analysis.stats import seeds
from ..common import metric_table as mt
from .declare import Claim, Figure, RunSet

if TYPE_CHECKING:
    from matplotlib.artist import Artist


@dataclass
class Drawn:
    """A claim's figure as its panels draw it: its declaration, the legend's entries, the runs
    drawn alone by (marker, why) (a run counted once however many panels hold it), whether
    bands were drawn, and clipped; the curves drawn with a mean, those whose every run was left
    out of it, and the declared curves (``order``) no panel has a run of."""

    fig: Figure
    handles: dict[str, Artist] = field(default_factory=dict)
    alone: dict[tuple[str, str], set[int]] = field(default_factory=dict)
    meaned: set[str] = field(default_factory=set)
    unmeaned: set[str] = field(default_factory=set)
    seen: set[str] = field(default_factory=set)  # values of the curves' key with a run
    clipped: bool = False
    banded: bool = False


def value(run: Run, key: str) -> Any:  # a config value
    return run.config.get(grouping.config_key([run], key))


def notation(fig: Figure, key: str) -> str:
    return fig.notation.get(key) or fig.notation.get(key.rsplit(".", 1)[-1]) or symbol(key)


def facts(claim: Claim, rs: RunSet, runs: list[Run], fig: Figure) -> str:
    """The caption's facts: the data (and what it stands in for), n, K (or Q), T, the seeds run."""

    def one(key: str) -> str:
        vals = sorted(
            {value(r, key) for r in runs if value(r, key) is not None},
            key=lambda v: grouping.order([v]),
        )
        name = notation(fig, key) if key != "n" else "n"
        return (
            f"{name} = {grouping.fmt(vals[0])}"
            if len(vals) == 1
            else f"{name} ∈ {{{', '.join(map(grouping.fmt, vals))}}}"
        )

    data = f"{rs.data} (standing in for the paper's {rs.stands_for})" if rs.stands_for else rs.data
    seed_text = seeds(len({r.config.get("seed") for r in runs}))
    return f"Ours: {data}; {one('n')} clients, {one('K')}, T = {rs.T}; {seed_text}"


def absent(state: Drawn) -> str:
    """The declared curves the figure draws no mean line of, named, and why: every run of it
    left out of the mean (diverged or collapsed: drawn alone), or no run of it here at all
    ("" where every declared curve has a line)."""
    fig = state.fig
    listed = [grouping.fmt(v) if isinstance(v, float) else str(v) for v in fig.order]
    unrun = [
        fig.names.get(v) or (fig.label.format(v) if fig.label else v)
        for v in listed
        if v not in state.seen
    ]
    gone = sorted(state.unmeaned - state.meaned, key=list(state.handles).index)
    said = [f"{_names(gone)}: no line, every run diverged or collapsed"] if gone else []
    if unrun:
        said.append(f"{_names(unrun)}: absent, no run of {'it' if len(unrun) == 1 else 'them'}")
    return "; ".join(said)


def _names(names: list[str]) -> str:
    return ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0]


def caption(claim: Claim, rs: RunSet, runs: list[Run], state: Drawn, fig: Figure) -> str:
    """The figure's caption: the paper's figure and what it shows, then ours (:func:`facts`),
    what a line and a band are, the declared curves without a line (:func:`absent`), and what
    the marks mean."""
    one_seed = len({r.config.get("seed") for r in runs}) == 1
    lines = (
        ("lines: that seed's runs" if one_seed else "lines: mean over the seeds")
        + ("; bands: ± 1 std over the seeds" if state.banded else "")
        + (" (clipped at the axis's bottom)" if state.clipped else "")
    )
    if any(p.get("kind") == "slope" for p in fig.panels):
        lines += (
            "; points: mean ± 1 std of the tail (last 10% of evaluations) per value, solid: "
            "least-squares fit"
        )
    paper = f"{claim.paper} {claim.where.split(', ')[-1]}: {fig.caption}"
    marks = "; dashed grey: the paper's number" if fig.marks else ""
    if fig.stationarity == Figure.stationarity and any(
        p.get("y", fig.y) == mt.STATIONARITY.name for p in fig.panels
    ):
        marks += "; ||G||² = ||G_s(x)||², the proximal gradient mapping at the algorithm's step s"
    if state.alone:
        marks += (
            "; dotted, marked: a run that diverged (x) or collapsed to chance accuracy (o), "
            "drawn alone and left out of the mean"
        )
    missing = f"; {without}" if (without := absent(state)) else ""
    return f"{paper}. {facts(claim, rs, runs, fig)}; {lines}{missing}{marks}."
