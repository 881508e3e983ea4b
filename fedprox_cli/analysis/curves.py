"""Figures of many runs: one mean +- std band per run group (``fedrun-plot``).

One legend below the axes, in as many columns as fit the figure's width, and under it the
caption (:mod:`.caption`: one sentence in the papers' notation -- the methods with their own
parameters, the setting every curve shares, how many seeds a line averages and what a band is;
``drawn_caption=False`` leaves it out of the image), also in the file's metadata and beside it
(``fig.pdf`` -> ``fig.caption.txt``). A legend entry names only what tells its curve apart
(:mod:`.legend`: a parameter is known by its name and the class declaring it); ``--label``
renames change only what they name, and one that names nothing is refused (:mod:`.renames`).
A curve's seed count is in its entry only where the curves differ in it ("3 seeds"; n is the
papers' client count). Curves cycle colours, line styles and markers; curves identical to float
precision are named as such; a run that did not finish (diverged, interrupted, ...) is left out
of its curve's mean and drawn alone up to its last finite point, marked there (``x`` for
diverged). On a log axis a band is clipped to the axis's range; bytes read in MB or GB; a round
axis has its ticks at the evaluated rounds; accuracy reads in percent, as in the tables
(:func:`plotting.metric_axis`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

import numpy as np
from matplotlib.lines import Line2D
from matplotlib.typing import LineStyleType

from ..common import metric_table as mt
from ..common.files import atomic_write_text
from .caption import common_keys, sentence, what_lines_are
from .groups import config_key, group, shared, split
from .legend import NAME, curve_labels, method, method_settings, part
from .plotting import (
    at_data,
    byte_unit,
    caption_file,
    clip_bands,
    figure_legend,
    mark_end,
    metric_axis,
    plain,
    plt,
    readable_log_ticks,
    save_figure,
)
from .renames import Renames
from .run import BYTES, X_AXES, Run
from .stats import band, seeds

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from .groups import Group
    from .legend import Entry
    from .plotting import Band


class Style(TypedDict):
    """A curve's look: colour, line style, marker."""

    color: str
    linestyle: LineStyleType
    marker: str


LINESTYLES: tuple[LineStyleType, ...] = ("-", "--", "-.", ":")
MARKERS = ("o", "s", "^", "v", "D", "P", "*", "h")
END_MARKERS = {"diverged": "x"}  # other unfinished runs: ">"


def style(i: int) -> Style:
    """The i-th curve's colour, line style and marker (cycles of 10, 4 and 8: no two of the
    first 40 curves look alike)."""
    return {"color": f"C{i % 10}", "linestyle": LINESTYLES[i % 4], "marker": MARKERS[i % 8]}


def write_caption(out: Path, text: str) -> None:
    """The caption beside the figure (:func:`plotting.caption_file`)."""
    atomic_write_text(caption_file(out), text + "\n")


def written(fig: Figure, out: Path, caption: str) -> str:
    """Write ``fig`` to ``out`` with ``caption`` (drawn in mathtext) as plain text in its
    metadata and beside it; returns that text."""
    text = plain(caption)
    save_figure(fig, out, caption=text)
    write_caption(out, text)
    return text


def new_figure(panels: int, panel_size: tuple[float, float] | None) -> tuple[Figure, np.ndarray]:
    cols = min(3, panels)
    rows = -(-panels // cols)
    w, h = panel_size or (5.6, 4.2)
    fig, axes = plt.subplots(rows, cols, figsize=(w * cols, h * rows), squeeze=False, sharey=True)
    return fig, axes


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return len(a) == len(b) and bool(np.allclose(a, b, rtol=1e-6, atol=1e-12, equal_nan=True))


@dataclass
class Mean:
    """A legend label's mean line: its handle, the run counts it averaged, its note."""

    handle: Artist
    counts: set[int] = field(default_factory=set)
    note: str = ""


@dataclass
class Alone:
    """Runs drawn alone under one label (``label: why``): the handle of their kind, how many."""

    handle: Artist
    count: int = 0


@dataclass
class Drawn:
    """What the panels drew: per legend label its mean line (:class:`Mean`); the runs drawn
    alone (:class:`Alone`); whether bands were drawn and clipped."""

    means: dict[str, Mean] = field(default_factory=dict)
    alone: dict[str, Alone] = field(default_factory=dict)
    banded: bool = False
    clipped: bool = False


def mean_curve(
    ax: Axes,
    ok: list[Run],
    x: str,
    y: str,
    scale: float,
    log: bool,
    st: Style,
    marks: int = 10,
    markersize: float | None = None,
) -> tuple[Line2D, np.ndarray, np.ndarray, Band | None]:
    """The mean line of runs ``ok`` (about ``marks`` markers; non-positive values left out on a
    log axis): the line, its x and mean, and its band's (x, low, high, colour) with two or more
    runs, else None."""
    b = band(ok, x, y)
    xs, mean, std = b["x"].to_numpy() / scale, b["mean"].to_numpy(), b["std"].to_numpy()
    (line,) = ax.plot(
        xs,
        np.where(mean > 0, mean, np.nan) if log else mean,
        **st,
        markevery=max(1, len(b) // marks),
        markersize=markersize or 0.8 * plt.rcParams["lines.markersize"],
    )
    return line, xs, mean, (xs, mean - std, mean + std, st["color"]) if len(ok) > 1 else None


def _alone(ax: Axes, r: Run, x: str, y: str, scale: float, st: Style) -> Line2D:
    """A run left out of its group's mean, drawn up to its last finite point and marked there;
    the legend handle of its kind."""
    xs, ys = r.column(x) / scale, r.column(y)
    ax.plot(
        xs,
        np.where(np.isfinite(ys), ys, np.nan),
        color=st["color"],
        linestyle=st["linestyle"],
        linewidth=0.9,
        alpha=0.8,
    )
    mark = END_MARKERS.get(r.status, ">")
    mark_end(ax, xs, ys, st["color"], mark)
    return Line2D(
        [],
        [],
        color=st["color"],
        marker=mark,
        markersize=8,
        linestyle=st["linestyle"],
        markeredgewidth=2,
    )


def _panel(
    ax: Axes,
    panel_runs: list[Run],
    groups: list[Group],
    styles: dict[str, Style],
    x: str,
    y: str,
    scale: float,
    log: bool,
    drawn: Drawn,
    warn: Callable[[str], None],
    panel: str,
) -> None:
    """Every group's curves in one panel; curves identical to float precision noted."""
    inside = {id(r) for r in panel_runs}
    curves: list[tuple[str, np.ndarray, np.ndarray]] = []
    bands: list[Band] = []
    if log:
        ax.set_yscale("log")
    for g in groups:
        rs = [r for r in g.runs if id(r) in inside]
        ok = [r for r in rs if r.problem() is None]
        st = styles[g.label]
        if ok:
            line, xs, mean, spread = mean_curve(ax, ok, x, y, scale, log, st)
            bands += [spread] if spread else []
            drawn.banded = drawn.banded or spread is not None
            drawn.means.setdefault(g.label, Mean(line)).counts.add(len(ok))
            curves.append((g.label, xs, mean))
        for r in rs:
            why = r.problem()
            if why is not None:
                handle = _alone(ax, r, x, y, scale, st)
                drawn.alone.setdefault(f"{g.label}: {why}", Alone(handle)).count += 1
    for (a, xa, ya), (b, xb, yb) in combinations(curves, 2):
        if _same(xa, xb) and _same(ya, yb):
            where = f" in panel {panel}" if panel else ""
            warn(f"note: curves {a!r} and {b!r}{where} are identical to float precision")
            drawn.means[b].note = f"; identical to {a}"
    drawn.clipped = clip_bands(ax, bands) or drawn.clipped


def _axes(
    ax: Axes,
    panel_runs: list[Run],
    x: str,
    y: str,
    unit: str,
    scale: float,
    log: bool,
    title: str,
) -> None:
    if log:
        readable_log_ticks(ax)
    at_data(
        ax, np.concatenate([r.column(x) / scale for r in panel_runs]), integer=x == mt.ROUND.name
    )
    ax.set_xlabel(f"transmitted {unit} (up + down)" if x == BYTES else X_AXES[x])
    ax.grid(alpha=0.3)
    ax.set_title(title)


def _entries(drawn: Drawn) -> tuple[list[Artist], list[str], set[int]]:
    """The legend's handles and labels: a seed count only where the curves differ in it."""
    counts = {k for m in drawn.means.values() for k in m.counts}

    def entry(label: str, c: set[int], note: str) -> str:
        extra = [seeds(min(c)) + (f"-{max(c)}" if len(c) > 1 else "")] if len(counts) > 1 else []
        extra += [note.removeprefix("; ")] if note else []
        return label + (f" ({'; '.join(extra)})" if extra else "")

    labels = [entry(label, m.counts, m.note) for label, m in drawn.means.items()]
    labels += [
        f"{label} ({a.count} run{'s' * (a.count > 1)}, not in the mean; marked at its end)"
        for label, a in drawn.alone.items()
    ]
    handles = [m.handle for m in drawn.means.values()] + [a.handle for a in drawn.alone.values()]
    return handles, labels, counts


def figure_caption(
    runs: list[Run],
    groups: list[Group],
    entries: list[Entry],
    names: Renames,
    leave: list[str],
    counts: set[int],
    banded: bool,
    clipped: bool,
) -> str:
    """The caption (:mod:`.caption`): the methods with their own parameters, the shared
    setting, what a line and a band are."""
    shared_settings = shared(runs)
    common = common_keys(shared_settings, [g.config for g in groups])
    methods = method_settings(groups, entries, common, names)
    if not methods and NAME in common:
        methods = [method(shared_settings[NAME], names)]
    text = sentence(methods, shared_settings, common, leave=[*leave, NAME])
    return " ".join(t for t in (text, what_lines_are(counts, banded, clipped)) if t)


def plot_groups(
    runs: list[Run],
    out: Path,
    x: str = mt.ROUND.name,
    y: str = mt.TEST_ACC.name,
    logy: bool | None = None,
    title: str = "",
    panels: Sequence[str] = (),
    warn: Callable[[str], None] = lambda _: None,
    names: dict[str, str] | None = None,
    panel_size: tuple[float, float] | None = None,
    drawn_caption: bool = True,
) -> tuple[list[str], str]:
    """Draw ``y`` against ``x`` (round | time | bytes), one line (mean over the group's finished
    runs) and band (+- std, with two or more) per group, one subplot per value of the ``panels``
    keys (each ``panel_size`` inches); log y for the metrics the papers draw so
    (:mod:`common.metric_table`) unless ``logy`` says otherwise; ``title`` drawn above if given.
    Returns the legend's labels and the caption (in the file's metadata and beside it; drawn under
    the legend if ``drawn_caption``). A ``--label`` rename that names nothing here is refused before
    anything is written."""
    names = Renames.of(names)
    parts = split(runs, list(panels)) if panels else {"": runs}
    panel_keys = [config_key(runs, k) for k in panels]
    groups = group(runs, shown=panel_keys)
    entries = curve_labels(groups, names, panel_keys)
    for g, e in zip(groups, entries):
        g.label = e.label
    styles = {label: style(i) for i, label in enumerate(dict.fromkeys(g.label for g in groups))}
    fig, axes = new_figure(len(parts), panel_size)
    for ax in axes.flat[len(parts) :]:
        ax.set_visible(False)
    scale, unit = (
        byte_unit(max(float(np.nanmax(r.column(BYTES), initial=0)) for r in runs))
        if x == BYTES
        else (1.0, "")
    )
    drawn = Drawn()
    log = mt.metric(y).log if logy is None else logy
    for ax, (panel, panel_runs) in zip(axes.flat, parts.items()):
        _panel(ax, panel_runs, groups, styles, x, y, scale, log, drawn, warn, panel)
        heading = ", ".join(part(k, panel_runs[0].config.get(k, "-"), names) for k in panel_keys)
        _axes(ax, panel_runs, x, y, unit, scale, log, heading if panel else "")
    for ax in axes[:, 0]:
        metric_axis(ax, mt.metric(y), names.get(y))
    handles, labels, counts = _entries(drawn)
    text = figure_caption(
        runs, groups, entries, names, panel_keys, counts, drawn.banded, drawn.clipped
    )
    names.check("figure", [e.label for e in entries])
    if title:
        fig.suptitle(title)
    figure_legend(fig, handles, labels, text if drawn_caption else "")
    return [plain(label) for label in labels], written(fig, out, text)
