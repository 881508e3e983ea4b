"""The pieces every figure shares (a run's own: :mod:`.run_plots`; many runs': :mod:`.curves`):
atomic saving, titles from configs, readable ticks, one legend below the axes."""

from __future__ import annotations

import re
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib

matplotlib.use("Agg")
matplotlib.rcParams.update(
    {"pdf.fonttype": 42, "ps.fonttype": 42}
)  # TrueType in PDFs: venues reject Type 3
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import (  # noqa: E402
    Formatter,
    FuncFormatter,
    LogLocator,
    MaxNLocator,
    NullFormatter,
)
from numpy.typing import ArrayLike  # noqa: E402

from ..common import metric_table as mt  # noqa: E402
from ..common.files import atomic_write  # noqa: E402
from ..common.flatten import flatten  # noqa: E402

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes
    from matplotlib.axis import Axis
    from matplotlib.figure import Figure

__all__ = ["plt"]  # pyplot, configured here (Agg, TrueType): the figure modules draw with it

METADATA_KEY = {
    "png": "Description",
    "svg": "Description",
    "pdf": "Subject",
}  # where a caption goes
STYLES = Path(__file__).resolve().parent / "styles"  # style sheets shipped: <name>.mplstyle


def caption_file(path: Path) -> Path:
    """Where a figure's caption is written: ``fig.pdf`` -> ``fig.caption.txt``."""
    return Path(path).with_suffix(".caption.txt")


def save_figure(
    fig: Figure,
    path: Path,
    laid_out: bool = False,
    caption: str = "",
    crop: bool | None = None,
    close: bool = True,
) -> None:
    """Lay out ``fig`` (unless ``laid_out``: its layout is fixed and all inside the figure),
    write it to ``path`` atomically in the format its extension names (``.png``, ``.pdf``,
    ``.svg``, ...; PNG without one) with ``caption`` in the file's metadata (PNG and SVG
    ``Description``, PDF ``Subject``; no creation date, so the same figure is the same file),
    close it (unless not ``close``). A missing folder is created; legends placed
    outside the axes are kept inside the written image (``crop``; default: unless ``laid_out``).
    Resolution: the style's ``savefig.dpi``, else 110."""
    path = Path(path)
    if not laid_out:
        fig.tight_layout()
    fmt = path.suffix.lstrip(".").lower() or "png"
    crop = not laid_out if crop is None else crop
    tight: dict[str, Any] = (  # savefig's keywords
        {"bbox_inches": "tight", "pad_inches": 0.03} if crop else {}
    )  # "tight" draws the figure twice
    dpi = plt.rcParams["savefig.dpi"]
    meta: dict[str, str | None] = (
        {METADATA_KEY[fmt]: caption} if caption and fmt in METADATA_KEY else {}
    )
    if fmt == "pdf":
        meta["CreationDate"] = None
    elif fmt == "svg":
        meta["Date"] = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(
            path,
            lambda f: fig.savefig(
                f, format=fmt, dpi=110 if dpi == "figure" else dpi, metadata=meta or None, **tight
            ),
        )
    finally:
        if close:
            plt.close(fig)


def style_sheet(name: str) -> str:
    """A matplotlib style: a shipped sheet by name (``paper``: :data:`STYLES`), a ``.mplstyle``
    file, or one of matplotlib's own (``ggplot``, ``seaborn-v0_8-paper``, ...)."""
    from ..common.errors import require

    shipped = STYLES / f"{name}.mplstyle"
    if shipped.exists():
        return str(shipped)
    if name.endswith(".mplstyle") or "/" in name:
        require(Path(name).is_file(), f"no such style sheet: {name}")
        return name
    require(
        name in plt.style.available,
        f"unknown style {name!r} (shipped: "
        f"{', '.join(sorted(p.stem for p in STYLES.glob('*.mplstyle')))}; a .mplstyle file; or one "
        f"of matplotlib's: {', '.join(sorted(plt.style.available)[:6])}, ...)",
    )
    return name


def styled(
    style: str | None = None, font_size: float | None = None
) -> AbstractContextManager[None]:
    """A context in which figures are drawn with ``style`` (:func:`style_sheet`) and, if given,
    ``font_size`` points as the base font size."""
    sheets = [style_sheet(style)] if style else []
    rc = {"font.size": font_size} if font_size else {}
    return plt.style.context([*sheets, rc])


def _fmt(v: object) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def run_title(cfg: dict[str, Any]) -> str:
    """Two lines naming a run's setting: the algorithm with its step sizes, the regularizer
    and (unless identity) the compressor with their parameters; then dataset, model, n, K, B,
    T and the partition. ``cfg`` is a resolved config (nested as in ``config.yaml``, or a flat
    dotted dict); missing parts are left out, so a config holding only the settings several
    runs share gives the caption of a figure of them."""
    flat = flatten(cfg)

    def section(name: str, prefix: str = "") -> str | None:
        params = [
            f"{k[len(name) + 1 :]}={_fmt(v)}"
            for k, v in flat.items()
            if k.startswith(f"{name}.") and k not in (f"{name}.name", f"{name}.seed")
        ]
        head = flat.get(f"{name}.name")
        if head is None and not params:
            return None
        if head is None:  # several methods, one setting: what they share
            return (
                ("all methods" if name == "algorithm" else f"every {name}")
                + ": "
                + ", ".join(params)
            )
        return prefix + str(head) + (f" ({', '.join(params)})" if params else "")

    compressor = (
        section("compressor", "compressor ") if flat.get("compressor.name") != "identity" else None
    )
    first = [section("algorithm"), section("regularizer", "reg. "), compressor]
    second = [
        section("dataset"),
        section("model"),
        ", ".join(
            f"{k}={_fmt(flat[k])}" + (" clients" if k == "n" else "")
            for k in ("n", "K", "B", "T")
            if k in flat
        )
        or None,
        section("partition", "partition "),
    ]
    return "\n".join(
        " · ".join(p for p in line if p) for line in (first, second) if any(line)
    ).strip()


def integer_ticks(axis: Axis) -> None:
    """Ticks on whole numbers only (rounds)."""
    axis.set_major_locator(MaxNLocator(integer=True))


def at_data(ax: Axes, given: ArrayLike, integer: bool = True) -> None:
    """x limits at the data's first and last finite value (no margin: ticks stop at T); with
    ``integer`` (rounds), ticks at the rounds the curves were evaluated at (:func:`round_ticks`)."""
    xs = np.asarray(given, float)
    xs = xs[np.isfinite(xs)]
    if len(xs) and xs.min() < xs.max():
        ax.set_xlim(xs.min(), xs.max())
    if integer:
        round_ticks(ax.xaxis, xs)


TICKS = 8  # at most about this many labelled ticks on a round axis


def round_ticks(axis: Axis, xs: np.ndarray) -> None:
    """Ticks on a round axis at multiples of the evaluation step (the most common gap between
    evaluated rounds: eval_every), every 1, 2, 5, 10, ... of them so that about :data:`TICKS`
    fit; whole numbers where the data give no step."""
    from matplotlib.ticker import MultipleLocator

    rounds = np.unique(np.round(xs))
    gaps = np.diff(rounds)
    if len(gaps) == 0:
        integer_ticks(axis)
        return
    values, counts = np.unique(gaps, return_counts=True)
    step = float(values[np.argmax(counts)])
    span = rounds[-1] - rounds[0]
    every = next(
        m for m in (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, np.inf) if span / (step * m) <= TICKS
    )
    if not np.isfinite(every):
        integer_ticks(axis)
        return
    axis.set_major_locator(MultipleLocator(step * every))


def readable_log_ticks(ax: Axes, which: str = "y") -> None:
    """Log-axis tick labels as plain numbers (0.01, 2, 500), with labels between the decades
    when the data spans fewer than two (at 2 and 5; at every digit below a factor of 3), so a
    short log axis is never left with one label or none."""
    axis = ax.yaxis if which == "y" else ax.xaxis
    lo, hi = ax.get_ylim() if which == "y" else ax.get_xlim()
    plain = FuncFormatter(lambda v, _: f"{v:g}")
    axis.set_major_locator(LogLocator(base=10))
    axis.set_major_formatter(plain)
    if lo > 0 and hi / lo < 100:
        subs = tuple(range(2, 10)) if hi / lo < 3 else (2, 5)
        axis.set_minor_locator(LogLocator(base=10, subs=subs))
        axis.set_minor_formatter(plain)
    else:
        axis.set_minor_formatter(NullFormatter())


class PercentTicks(Formatter):
    """Tick labels of a fraction in percent (0.825 -> ``82.5``), each tick at the fewest
    decimals (at most 3) that print every tick of the axis exactly."""

    decimals = 0

    def set_locs(self, locs: list[float]) -> None:
        super().set_locs(locs)
        shown = 100 * np.asarray(locs, float)
        exact = (d for d in range(3) if np.allclose(shown, np.round(shown, d), rtol=0, atol=1e-6))
        self.decimals = next(exact, 3)

    def __call__(self, x: float, pos: int | None = None) -> str:
        return f"{100 * x:.{self.decimals}f}"


def metric_axis(ax: Axes, m: mt.Metric, label: str | None = None, which: str = "y") -> None:
    """``m``'s value axis as the tables show the metric (:mod:`common.metric_table`): its label
    (``label``, else the metric's) followed by its unit, and a percentage's tick labels in
    percent (``test accuracy (%)``, ticks ``80 82.5 85``). The data stay the fractions the runs
    recorded, so every line, band, mark and reference value drawn in them is where it belongs.
    Called once the axis's scale and ticks are set (its tick labels are replaced here)."""
    axis = ax.yaxis if which == "y" else ax.xaxis
    axis.set_label_text((m.label() if label is None else label) + m.unit)
    if m.percent:
        axis.set_major_formatter(PercentTicks())
        if not isinstance(axis.get_minor_formatter(), NullFormatter):
            axis.set_minor_formatter(PercentTicks())


def mark_end(
    ax: Axes, xs: np.ndarray, ys: np.ndarray, color: str | tuple[float, ...], marker: str = "x"
) -> bool:
    """Draw a big ``marker`` at the last finite point of (xs, ys) (where a run diverged or
    stopped); False if there is none."""
    ok = np.isfinite(xs) & np.isfinite(ys)
    if not ok.any():
        return False
    i = np.flatnonzero(ok)[-1]
    size = plt.rcParams["lines.markersize"]  # to the style: 10 pt by default, 6.6 in paper style
    ax.plot(
        [xs[i]],
        [ys[i]],
        marker=marker,
        markersize=1.2 * size + 2.8,
        markeredgewidth=0.2 * size + 1,
        color=color,
        linestyle="none",
        zorder=5,
    )
    return True


SYMBOLS = {
    "alpha": "α",
    "beta": "β",
    "eta": "η",
    "mu": "μ",
    "gamma": "γ",
    "lam": "λ",
    "theta": "θ",
    "rho": "ρ",
    "tau": "τ",
    "sigma": "σ",
}


def symbol(key: str) -> str:
    """A parameter's symbol as the papers write it: ``algorithm.beta`` -> ``β``, ``K`` -> ``K``,
    ``eta_a`` -> ``$\\eta_{a}$`` (mathtext, for the subscript); a longer name stays as it is."""
    name = key.rsplit(".", 1)[-1]
    head, _, sub = name.partition("_")
    if not (head in SYMBOLS or (len(head) == 1 and head.isalpha())):
        return name
    if not sub:
        return SYMBOLS.get(head, head)
    return f"${chr(92) + head if head in SYMBOLS else head}_{{{sub}}}$"


_MATHTEXT = re.compile(r"\$\\?([A-Za-z]+)_\{([^}$]*)\}\$")


def plain(text: str) -> str:
    """``text`` outside a drawing (a caption's side file and metadata, a printed label): each
    symbol :func:`symbol` writes in mathtext as plain text, ``$\\eta_{g}$`` -> ``η_g``."""
    return _MATHTEXT.sub(lambda m: f"{SYMBOLS.get(m[1], m[1])}_{m[2]}", text)


# a band: x, its low and high edges, its colour
Band = tuple[np.ndarray, np.ndarray, np.ndarray, Any]

BYTE_UNITS = ((1e9, "GB"), (1e6, "MB"), (1e3, "kB"), (1.0, "bytes"))


def byte_unit(largest: float) -> tuple[float, str]:
    """The divisor and unit (GB, MB, kB) in which bytes up to ``largest`` read as plain numbers:
    an axis in bytes carries its unit in its label, never a ``1e9`` offset."""
    return next(((d, u) for d, u in BYTE_UNITS if largest >= d), BYTE_UNITS[-1])


def clip_bands(ax: Axes, bands: list[Band], alpha: float = 0.15) -> bool:
    """Draw each band (x, low, high, colour) on ``ax``; on a log y axis the limits are the
    curves' positive range and a low edge at or below 0 ends at the axis's bottom instead of
    reaching for 0. True if some band was clipped."""
    clipped = False
    if ax.get_yscale() == "log" and bands:
        lo = [np.nanmin(np.where(b[1] > 0, b[1], np.nan)) for b in bands if (b[1] > 0).any()]
        hi = [np.nanmax(b[2]) for b in bands if np.isfinite(b[2]).any()]
        cur = ax.get_ylim()
        bottom = min([*lo, cur[0]]) if lo else cur[0]
        ax.set_ylim(bottom, max([*hi, cur[1]]) if hi else cur[1])
        bottom = ax.get_ylim()[0]
    for x, low, high, color in bands:
        if ax.get_yscale() == "log":
            clipped = clipped or bool((low <= 0).any())
            low = np.where(low > bottom, low, bottom)
        ax.fill_between(x, low, high, color=color, alpha=alpha, linewidth=0)
    if ax.get_yscale() == "log":
        readable_log_ticks(ax)
    return clipped


def _px(size: float | str) -> float:
    from matplotlib.font_manager import FontProperties

    return FontProperties(size=size).get_size_in_points()


def balanced_fill(text: str, chars: int) -> str:
    """``text`` wrapped to at most ``chars`` a line in as few lines as that takes, of even
    length (no last line of one word), never breaking a ``key = value`` apart."""
    import textwrap

    glued = text.replace(" = ", "\0=\0")  # no break there: NUL is no whitespace to textwrap
    lines = len(textwrap.wrap(glued, chars))
    width = max(1, -(-len(glued) // lines))
    while len(textwrap.wrap(glued, width)) > lines:
        width += 1
    return textwrap.fill(glued, width).replace("\0=\0", " = ")


def figure_legend(fig: Figure, handles: list[Artist], labels: list[str], caption: str = "") -> None:
    """One legend for the whole figure below the axes, in as many columns as fit the figure's
    width (a label too long for one column is wrapped), and ``caption`` (the settings every curve
    shares, what a line and a band are) wrapped to the width below it: the figure says what it
    shows without a side file. The figure is laid out here (``tight_layout``)."""
    import textwrap

    fig.tight_layout()
    r = fig.canvas.get_renderer()  # type: ignore[attr-defined]  # Agg's canvas (above) has it
    to_fig = fig.transFigure.inverted()
    boxes = [b for ax in fig.axes if ax.get_visible() and (b := ax.get_tightbbox(r)) is not None]
    y = min(to_fig.transform(b)[0][1] for b in boxes) - 0.01 if boxes else 0.0
    width = fig.bbox.width
    size = _px(plt.rcParams["legend.fontsize"]) * fig.dpi / 72
    if handles:
        for ncol in range(min(len(labels), 4), 0, -1):
            leg = fig.legend(
                handles,
                labels,
                loc="upper center",
                bbox_to_anchor=(0.5, y),
                ncol=ncol,
                frameon=False,
                columnspacing=1.0,
                handlelength=1.8,
            )
            w = leg.get_window_extent(r).width
            if w <= width or ncol == 1:
                break
            leg.remove()
        if w > width:  # one column too wide: wrap the labels to the width
            leg.remove()
            chars = max(12, int(max(map(len, labels)) * (width - 3 * size) / w))
            leg = fig.legend(
                handles,
                [textwrap.fill(t, chars) for t in labels],
                loc="upper center",
                bbox_to_anchor=(0.5, y),
                ncol=1,
                frameon=False,
                handlelength=1.8,
            )
        y = to_fig.transform(leg.get_window_extent(r))[0][1] - 0.005
    if caption:
        small = 0.9 * size
        chars = max(20, int(width / (0.5 * small)))
        fig.text(
            0.5,
            y,
            balanced_fill(caption, chars),
            ha="center",
            va="top",
            fontsize=0.9 * _px(plt.rcParams["legend.fontsize"]),
            color="0.25",
        )
