"""What a results folder holds, walked once: every folder below the paths given with the names
it holds (:func:`walk`). The walk keeps its own stack (a folder any number of levels deep never
exhausts Python's recursion), follows no link, and names every folder it cannot list through
``warn`` (``skipped DIR: it cannot be listed (Permission denied)``) instead of leaving it out in
silence or stopping at the first ``OSError``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path


def walk(
    roots: Iterable[Path], warn: Callable[[str], None], prune: Iterable[str] = ()
) -> Iterator[tuple[Path, frozenset[str]]]:
    """Each folder at or below ``roots`` (not below a folder named in ``prune``), with the names
    of the entries it holds, parents before their children."""
    pruned = frozenset(prune)
    stack = [Path(r) for r in reversed(list(roots))]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = list(it)
        except OSError as err:
            warn(f"skipped {folder}: it cannot be listed ({err.strerror or err})")
            continue
        yield folder, frozenset(entry.name for entry in entries)
        below = []
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False) and entry.name not in pruned:
                    below.append(folder / entry.name)
            except OSError as err:
                warn(f"skipped {folder / entry.name}: it cannot be read ({err.strerror or err})")
        stack.extend(sorted(below, reverse=True))
