"""The rounds a run evaluates (``eval_every``): round 0, every ``eval_every``-th round and the
last one, T; ``eval_every=0`` evaluates round T alone (a run whose only output is its final
model's metrics: no initial row, no evaluation on the way)."""

from __future__ import annotations


def evaluates(t: int, T: int, every: int) -> bool:
    """Whether round ``t`` (0..T) is evaluated."""
    return t == T or (every > 0 and t % every == 0)


def schedule(T: int, every: int) -> list[int]:
    """The rounds evaluated, in order."""
    return [T] if every <= 0 else sorted({0, *range(every, T + 1, every), T})


def count(start: int, T: int, every: int) -> int:
    """How many evaluations a run going from round ``start`` to T makes (``start`` itself
    evaluated only at round 0, where a run begins)."""
    return sum(1 for t in schedule(T, every) if t > start or t == start == 0)
