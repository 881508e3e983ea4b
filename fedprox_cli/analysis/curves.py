"""Figures of many runs: one mean +- std band per run group (``fedrun-plot``).

One legend below the axes, in as many columns as fit the figure's width, and under it the
caption: the settings every curve shares, how many seeds a line averages and what a band is
(also in the file's metadata and beside it: ``fig.pdf`` -> ``fig.caption.txt``). A legend entry
names only what tells its curve apart (:func:`curve_labels`): the method's printed name
(``display_name`` of its class, a plugin's too) where the methods differ, the parameters that
differ between the curves that have them as the papers' symbols (``FedProx (μ = 0.01)``; a
parameter only one method has is in no label), then the other keys that differ. ``--label``
renames (a value, a key, a ``key=value`` part or a whole label) change only what they name.
A curve's seed count is in its entry only where the curves differ in it ("3 seeds"; n is the
papers' client count). Curves cycle colours, line styles and markers; curves identical to float
precision are named as such; a run that did not finish (diverged, interrupted, ...) is left out
of its curve's mean and drawn alone up to its last finite point, marked there (``x`` for
diverged). On a log axis a band is clipped to the axis's range; bytes read in MB or GB.
Accuracies are fractions (0-1) as in ``metrics.csv``, in every figure and table.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import combinations
from pathlib import Path

import numpy as np
from matplotlib.ticker import NullFormatter

from ..common.files import atomic_write_text
from .groups import Group, config_key, differing, fmt, group, shared, short, split
from .names import algorithm_title
from .plotting import (
    at_data,
    byte_unit,
    caption_file,
    clip_bands,
    figure_legend,
    mark_end,
    plt,
    readable_log_ticks,
    run_title,
    save_figure,
    symbol,
)
from .run import CHOICE, LOG_Y, X_AXES, Run
from .stats import band, seed_interval, seeds, slope

Y_LABELS = {
    "stationarity": "stationarity ||G_s(x)||²",
    "test_acc": "test accuracy",
    "train_loss": "train loss f(x)",
    "objective": "objective f(x) + h(x)",
    "hoyer": "Hoyer sparsity",
    "nnz_frac": "share of non-zero entries",
}
LINESTYLES = ("-", "--", "-.", ":")
MARKERS = ("o", "s", "^", "v", "D", "P", "*", "h")
END_MARKERS = {"diverged": "x"}  # other unfinished runs: ">"


def style(i: int) -> dict:
    """The i-th curve's colour, line style and marker (cycles of 10, 4 and 8: no two of the
    first 40 curves look alike)."""
    return {"color": f"C{i % 10}", "linestyle": LINESTYLES[i % 4], "marker": MARKERS[i % 8]}


def caption(
    runs: list[Run], leave=(), counts=(), banded: bool = False, clipped: bool = False
) -> str:
    """The settings all ``runs`` share (without ``leave`` keys) on one line, then what a line is
    (the mean of ``counts`` seeds, when every curve holds as many) and a band (± 1 std over the
    seeds; ``clipped`` at a log axis's bottom)."""
    common = {k: v for k, v in shared(runs).items() if k not in leave}
    text = " · ".join(run_title(common).splitlines())
    counts = set(counts)
    line = (
        f"Lines: mean of {seeds(min(counts))} per curve"
        if len(counts) == 1
        else "Lines: mean over each curve's seeds"
    )
    if banded:
        line += "; bands: ± 1 std over the seeds" + (
            " (clipped at the axis's bottom)" if clipped else ""
        )
    return f"{text}. {line}." if text else f"{line}."


def write_caption(out: Path, text: str) -> None:
    """The caption beside the figure (:func:`plotting.caption_file`)."""
    atomic_write_text(caption_file(out), text + "\n")


def part(key: str, value, names: dict) -> str:
    """One ``key = value`` of a label, renamed by ``names``: the whole part (``K=10``), the value
    (``dir/0.1``), or the key (``algorithm.beta``, ``beta``); a parameter reads as its symbol."""
    k, v = short(key), fmt(value)
    whole = names.get(f"{k}={v}") or names.get(f"{key}={v}")
    if whole:
        return whole
    if v in names:
        return names[v]
    name = (
        names.get(key)
        or names.get(k)
        or (symbol(k) if key.startswith("algorithm.") or "." not in k else k)
    )
    return f"{name} = {v}"


def method(name, names: dict) -> str:
    shown = algorithm_title(name)
    return names.get(str(name)) or names.get(shown) or shown


def own_parameters(groups: list[Group], names: dict, shown=()) -> str:
    """The parameters of each method that no legend entry names and not every curve shares
    (FedAvg's alpha = 1 beside FedProx's mu = 0.01): ``FedAvg: α = 1; FedProx: μ = 0.01. ``
    (empty when there are none), so every setting is on the figure."""
    configs = [g.config for g in groups]
    if len({repr(c.get("algorithm.name")) for c in configs}) < 2:
        return ""
    common = set(shared([r for g in groups for r in g.runs]))
    out = {}
    for c in configs:
        same = [d for d in configs if d.get("algorithm.name") == c.get("algorithm.name")]
        own = [
            k
            for k in sorted(c)
            if k.startswith("algorithm.")
            and k != "algorithm.name"
            and k not in common
            and k not in shown
            and len({repr(d.get(k)) for d in same}) == 1
            and len({repr(d[k]) for d in configs if k in d}) == 1
        ]
        if own:
            out.setdefault(
                method(c["algorithm.name"], names), ", ".join(part(k, c[k], names) for k in own)
            )
    return "".join(f"{m}: {p}; " for m, p in out.items()).removesuffix("; ") + (". " if out else "")


def curve_labels(groups: list[Group], names: dict, shown=()) -> list[str]:
    """Each group's legend label: the method's printed name where methods differ, its parameters
    whose value differs between the curves that have them (a parameter of one method alone, as
    FedAvg's alpha = 1 beside FedProx, is in no label), then the other keys that differ (beyond the
    ``shown`` panel keys); a group choice only where nothing else tells two curves apart.
    ``names`` renames parts (:func:`part`) or a whole label (old form ``k=v, k2=v2`` too)."""
    configs = [g.config for g in groups]
    methods = {repr(c.get("algorithm.name")) for c in configs}
    varies = {k for k in differing(configs) if len({repr(c[k]) for c in configs if k in c}) > 1}
    rest = sorted(k for k in varies if not k.startswith(("algorithm.", CHOICE)) and k not in shown)
    labels = []
    for g in groups:
        c = g.config
        params = sorted(
            k
            for k in varies
            if k.startswith("algorithm.") and k != "algorithm.name" and k in c and k not in shown
        )
        head = (
            method(c["algorithm.name"], names) if len(methods) > 1 and "algorithm.name" in c else ""
        )
        inner = ", ".join(part(k, c[k], names) for k in params)
        head = f"{head} ({inner})" if head and inner else head or inner
        labels.append(
            ", ".join(p for p in (head, *(part(k, c[k], names) for k in rest if k in c)) if p)
        )
    choices = sorted(k for k in differing(configs) if k.startswith(CHOICE) and k not in shown)
    for i, g in enumerate(groups):
        if labels.count(labels[i]) > 1 and choices:
            labels[i] = ", ".join(
                p
                for p in (
                    labels[i],
                    *(part(k, g.config[k], names) for k in choices if k in g.config),
                )
                if p
            )
    return [
        names.get(lab) or names.get(g.label) or lab or "all runs" for lab, g in zip(labels, groups)
    ]


def _figure(panels: int, panel_size) -> tuple:
    cols = min(3, panels)
    rows = -(-panels // cols)
    w, h = panel_size or (5.6, 4.2)
    fig, axes = plt.subplots(rows, cols, figsize=(w * cols, h * rows), squeeze=False, sharey=True)
    return fig, axes


def _same(a, b) -> bool:
    return len(a) == len(b) and np.allclose(a, b, rtol=1e-6, atol=1e-12, equal_nan=True)


def plot_groups(
    runs: list[Run],
    out: Path,
    x: str = "round",
    y: str = "test_acc",
    logy: bool | None = None,
    title: str = "",
    panels: list[str] = (),
    warn: Callable[[str], None] = lambda _: None,
    names: dict[str, str] | None = None,
    panel_size: tuple[float, float] | None = None,
) -> tuple[list[str], str]:
    """Draw ``y`` against ``x`` (round | time | bytes), one line (mean over the group's finished
    runs, markers every tenth point) and band (+- std, with two or more) per group, one subplot
    per value of the ``panels`` keys (each ``panel_size`` inches); log y for the metrics in
    LOG_Y unless ``logy`` says otherwise; ``title`` drawn above if given. Returns the legend's
    labels and the caption (drawn under the legend and written into the file's metadata)."""
    names = names or {}
    parts = split(runs, list(panels)) if panels else {"": runs}
    panel_keys = [config_key(runs, k) for k in panels]
    groups = group(runs, shown=panel_keys)
    for g, label in zip(groups, curve_labels(groups, names, panel_keys)):
        g.label = label
    styles = {label: style(i) for i, label in enumerate(dict.fromkeys(g.label for g in groups))}
    fig, axes = _figure(len(parts), panel_size)
    for ax in axes.flat[len(parts) :]:
        ax.set_visible(False)
    scale, unit = (
        byte_unit(max(float(np.nanmax(r.column("bytes"), initial=0)) for r in runs))
        if x == "bytes"
        else (1.0, "")
    )
    means: dict[str, list] = {}  # legend label -> [handle, set of run counts, note]
    banded = clipped = False
    alone: dict[str, list] = {}  # label: status -> [handle, number of runs]
    log = y in LOG_Y if logy is None else logy
    for ax, (panel, panel_runs) in zip(axes.flat, parts.items()):
        inside = {id(r) for r in panel_runs}
        curves, bands = [], []
        if log:
            ax.set_yscale("log")
        for g in groups:
            rs = [r for r in g.runs if id(r) in inside]
            ok = [r for r in rs if r.problem() is None]
            st = styles[g.label]
            if ok:
                b = band(ok, x, y)
                xs, mean, std = b["x"].to_numpy() / scale, b["mean"].to_numpy(), b["std"].to_numpy()
                (line,) = ax.plot(
                    xs,
                    np.where(mean > 0, mean, np.nan) if log else mean,
                    **st,
                    markevery=max(1, len(b) // 10),
                    markersize=0.8 * plt.rcParams["lines.markersize"],
                )
                if len(ok) > 1:
                    banded = True
                    bands.append((xs, mean - std, mean + std, st["color"]))
                means.setdefault(g.label, [line, set(), ""])[1].add(len(ok))
                curves.append((g.label, xs, mean))
            for r in rs:
                why = r.problem()
                if why is None:
                    continue
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
                handle = plt.Line2D(
                    [],
                    [],
                    color=st["color"],
                    marker=mark,
                    markersize=8,
                    linestyle=st["linestyle"],
                    markeredgewidth=2,
                )
                alone.setdefault(f"{g.label}: {why}", [handle, 0])[1] += 1
        for (a, xa, ya), (b, xb, yb) in combinations(curves, 2):
            if _same(xa, xb) and _same(ya, yb):
                where = f" in panel {panel}" if panel else ""
                warn(f"note: curves {a!r} and {b!r}{where} are identical to float precision")
                means[b][2] = f"; identical to {a}"
        clipped = clip_bands(ax, bands) or clipped
        if log:
            readable_log_ticks(ax)
        at_data(ax, np.concatenate([r.column(x) / scale for r in panel_runs]), integer=x == "round")
        ax.set_xlabel(f"transmitted {unit} (up + down)" if x == "bytes" else X_AXES[x])
        ax.grid(alpha=0.3)
        ax.set_title(
            ", ".join(part(k, panel_runs[0].config.get(k, "-"), names) for k in panel_keys)
            if panel
            else ""
        )
    for ax in axes[:, 0]:
        ax.set_ylabel(names.get(y) or Y_LABELS.get(y, y))
    counts = {k for _, c, _ in means.values() for k in c}

    def entry(label: str, c: set, note: str) -> str:
        extra = [seeds(min(c)) + (f"-{max(c)}" if len(c) > 1 else "")] if len(counts) > 1 else []
        extra += [note.removeprefix("; ")] if note else []
        return label + (f" ({'; '.join(extra)})" if extra else "")

    labels = [entry(label, c, note) for label, (_, c, note) in means.items()]
    labels += [
        f"{label} ({k} run{'s' * (k > 1)}, not in the mean; marked at its end)"
        for label, (_, k) in alone.items()
    ]
    handles = [e[0] for e in (*means.values(), *alone.values())]
    text = caption(runs, leave=panel_keys, counts=counts, banded=banded, clipped=clipped)
    text = own_parameters(groups, names, panel_keys) + text
    if title:
        fig.suptitle(title)
    figure_legend(fig, handles, labels, text)
    save_figure(fig, out, caption=text)
    write_caption(out, text)
    return labels, text


def plot_slope(
    runs: list[Run],
    key: str,
    out: Path,
    metric: str = "stationarity",
    final: str = "last",
    warn: Callable[[str], None] = lambda _: None,
    title: str = "",
    names: dict[str, str] | None = None,
    panel_size: tuple[float, float] | None = None,
) -> tuple[list[dict], str]:
    """Final ``metric`` (mean +- std over seeds) against ``key`` on log-log axes with the
    least-squares line of log(metric) on log(key) (FedNMap Figs. 3b, 4b), its slope, R^2 and,
    with several seeds, the spread of the per-seed slopes. Returns the fits and the caption."""
    fits = slope(runs, key, metric, final, warn)
    fig, axes = _figure(1, panel_size)
    ax = axes[0, 0]
    handles, labels = [], []
    for i, f in enumerate(fits):
        st = style(i)
        v = np.array([p[0] for p in f["points"]], float)
        m = np.array([p[1] for p in f["points"]], float)
        s = np.nan_to_num(np.array([p[2] for p in f["points"]], float))
        ax.errorbar(v, m, yerr=s, fmt=st["marker"], color=st["color"], capsize=3)
        (line,) = ax.plot(
            v,
            np.exp(f["intercept"]) * v ** f["slope"],
            color=st["color"],
            linestyle=st["linestyle"],
        )
        name = f"{(names or {}).get(f['label'], f['label'])}: " if f["label"] != "all runs" else ""
        seeds = seed_interval(f)
        handles.append(line)
        labels.append(
            f"{name}slope {f['slope']:.3f}, R² {f['r2']:.3f}"
            + (f"; per seed {seeds}" if seeds else "")
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    readable_log_ticks(ax, "x")
    readable_log_ticks(ax, "y")
    swept = sorted({p[0] for f in fits for p in f["points"]})
    ax.set_xticks(swept, [fmt(v) for v in swept])  # the swept values, not decades
    ax.xaxis.set_minor_formatter(NullFormatter())
    final_text = "mean of the last 10% of evaluations of" if final == "tail" else "final"
    ax.set_xlabel(f"{(names or {}).get(key) or symbol(key)} (log scale)")
    ax.set_ylabel(f"{final_text} {Y_LABELS.get(metric, metric)}")
    ax.grid(alpha=0.3, which="both")
    if title:
        fig.suptitle(title)
    text = caption(runs, leave=[key], counts={p[3] for f in fits for p in f["points"]})
    text = (
        text.replace("Lines: mean", "Points: mean") + " Bars: ± 1 std over the seeds; lines: "
        f"least-squares fits of log(value) on log {short(key)}."
    )
    figure_legend(fig, handles, labels, text)
    save_figure(fig, out, caption=text)
    write_caption(out, text)
    return fits, text
