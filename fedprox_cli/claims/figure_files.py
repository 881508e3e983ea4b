"""A claim's figure files from its evidence: drawn into the results (:func:`draw_claim`), and
checked against what its runs draw now (:func:`stale`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from .declare import Claim
from .figures import draw, paths

if TYPE_CHECKING:
    from .evidence import Evidence


def draw_claim(
    claim: Claim, evidence: list[Evidence], root: Path, warn: Callable[[str], None]
) -> list[Path]:
    """Draw ``claim``'s figure (if it declares one) from the first run set that ran (its
    ``evidence``, :func:`.evidence.gather`'s) into ``root``/figures; the files written."""
    from .loading import load_runs

    if claim.figure_spec is None:
        return []
    for ev in evidence:
        if ev.present and ev.runset.folders:
            return draw(claim, ev.read_as, load_runs(claim, ev.read_as, root, warn)[0], root)
    return []


def stale(
    claim: Claim, evidence: list[Evidence], root: Path, warn: Callable[[str], None]
) -> list[str]:
    """One line per figure file of ``claim`` under ``root`` that differs from the one its runs
    draw now (or is missing): ``check`` redraws every figure into a scratch folder."""
    import tempfile

    if claim.figure_spec is None:
        return []
    with tempfile.TemporaryDirectory() as scratch:
        from .loading import load_runs

        for ev in evidence:
            if ev.present and ev.runset.folders:
                draw(claim, ev.read_as, load_runs(claim, ev.read_as, root, warn)[0], Path(scratch))
                break
        out = []
        for new, old in zip(paths(claim, Path(scratch)), paths(claim, root)):
            if not old.is_file():
                out.append(f"{claim.id}: {old} is missing (fedrun-reproduce report draws it)")
            elif new.is_file() and new.read_bytes() != old.read_bytes():
                out.append(f"{claim.id}: {old} differs from the figure its runs draw now")
        return out
