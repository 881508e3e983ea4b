"""R runs' gradient calls computed as one vmap call (see :mod:`seeds`).

:meth:`Lockstep.rounds` runs one round of each of R runs, each in its own greenlet (a
coroutine with its own stack: the algorithms' code runs unchanged). A run's vmapped gradient
``fn(X, inputs, targets, w)`` on its own rows (clients) suspends the run; once every run is
suspended in such a call or has finished its round, the calls whose arguments agree in
everything but the number of rows are concatenated in run order, computed by one call (or as
few as ``max_rows`` allows) and split back, and each run resumes with exactly the rows it asked
for. Runs switch only there, in run order: no threads, no locks, and what is joined depends on
the runs' own call sequences only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar, cast

import torch
from greenlet import getcurrent, greenlet

R = TypeVar("R", bound=tuple[torch.Tensor, ...])  # a joined call's outputs: rows of tensors
TensorFn = Callable[..., tuple[torch.Tensor, ...]]
"""A vmapped gradient call: tensors in, tensors out (one row per client in each)."""
Request = tuple[TensorFn, tuple[torch.Tensor, ...]]
"""A suspended run's call: the function and its arguments."""


class _Failed:
    """A joined call's exception, handed to each run in it (e.g. out of memory)."""

    def __init__(self, error: Exception) -> None:
        self.error = error


class Lockstep:
    def __init__(self, max_rows: int) -> None:
        self.max_rows = max_rows  # rows per joined call (the memory plan of all R runs)
        self.joined = 0  # calls computed
        self._runs: set[greenlet] = set()

    def rounds(self, rounds: dict[int, Callable[[], None]]) -> dict[int, BaseException]:
        """Run ``rounds[r]()`` for every run r, joining their gradient calls; return the
        exception of each run whose round raised one (``KeyboardInterrupt`` propagates)."""
        runs = {r: greenlet(fn) for r, fn in sorted(rounds.items())}
        self._runs = set(runs.values())
        waiting: dict[int, Request] = {}
        failed: dict[int, BaseException] = {}
        resume: dict[int, object] = {r: None for r in runs}
        try:
            while resume:
                for r, value in resume.items():
                    try:
                        request = (
                            runs[r].switch(value) if runs[r] else runs[r].switch()
                        )  # to its next call or end
                    except KeyboardInterrupt:
                        raise
                    except BaseException as e:  # noqa: BLE001 (the run's own failure)
                        failed[r] = e
                        continue
                    if not runs[r].dead:
                        waiting[r] = request
                resume = self._compute_all(waiting)
                waiting = {}
        finally:
            self._runs = set()
        return failed

    def call(self, fn: Callable[..., R], *args: torch.Tensor) -> R:
        """``fn(*args)``; inside :meth:`rounds`, joined with the other runs' calls."""
        me = getcurrent()
        if me not in self._runs:  # not a run's round (e.g. a start-up measurement): on its own
            return fn(*args)
        result = me.parent.switch((fn, args))
        if isinstance(result, _Failed):
            raise result.error
        return cast(R, result)  # greenlet's switch: what _compute gave, fn's outputs split

    def member(self, fn: Callable[..., R]) -> Callable[..., R]:
        """``fn`` as a run calls it."""
        return lambda *args: self.call(fn, *args)

    def _compute_all(self, waiting: dict[int, Request]) -> dict[int, object]:
        groups: dict[tuple[object, ...], list[int]] = {}
        for r, (_, args) in waiting.items():  # run order
            groups.setdefault(tuple((a.shape[1:], a.dtype, a.device) for a in args), []).append(r)
        results: dict[int, object] = {}
        for runs in groups.values():
            for part in self._parts(runs, waiting):
                results.update(self._compute(part, waiting))
        return dict(sorted(results.items()))

    def _parts(self, runs: list[int], waiting: dict[int, Request]) -> list[list[int]]:
        """Consecutive runs packed into calls of at most ``max_rows`` rows (a run's call is never
        split)."""
        parts: list[list[int]] = [[]]
        rows = 0
        for r in runs:
            m = len(waiting[r][1][0])
            if parts[-1] and rows + m > self.max_rows:
                parts.append([])
                rows = 0
            parts[-1].append(r)
            rows += m
        return parts

    def _compute(self, runs: list[int], waiting: dict[int, Request]) -> dict[int, object]:
        fn = waiting[runs[0]][0]
        argsets = [waiting[r][1] for r in runs]
        try:
            joined = [torch.cat(parts) if len(runs) > 1 else parts[0] for parts in zip(*argsets)]
            out = fn(*joined)
        except Exception as e:  # noqa: BLE001 (every run in the call sees it)
            return {r: _Failed(e) for r in runs}
        self.joined += 1
        sizes = [len(args[0]) for args in argsets]
        return dict(zip(runs, zip(*(torch.split(o, sizes) for o in out))))
