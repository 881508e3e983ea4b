"""A paper's number drawn on a claim's curves panel as a reference line (:func:`paper_mark`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes


def paper_mark(
    ax: Axes,
    mark: dict[str, Any],
    finals: dict[str, tuple[np.ndarray, np.ndarray]],
    names: dict[str, str],
    handles: dict[str, Artist],
) -> None:
    """A paper's number on a curves panel: ``hline`` at ``y``, or ``below`` (``points`` below the
    best final mean of the curves but ``of``: where the paper puts ``of``'s curve)."""
    kind, text = mark["kind"], mark["text"]
    if kind == "hline":
        line = ax.axhline(mark["y"], color="0.3", linestyle=(0, (4, 2)), linewidth=0.9)
    elif kind == "below":
        others = [m[-1] for v, (_, m) in finals.items() if v != str(mark["of"]) and len(m)]
        if not others:
            return
        level = max(others) - mark["points"] / 100
        xs = next(iter(finals.values()))[0]
        start = xs[int(0.6 * (len(xs) - 1))]
        (line,) = ax.plot(
            [start, xs[-1]], [level, level], color="0.2", linestyle=(0, (4, 2)), linewidth=1.0
        )
    else:
        raise ValueError(f"unknown mark kind {kind!r}")
    handles.setdefault(text, line)
