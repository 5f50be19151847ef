"""Widening a boundary search's bracket upward: double the high end while the target still holds there, so bisection
starts from a bracket whose high end misses (``kvledger.ledgers.boundary.search_boundary`` assumes one)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["MAX_DOUBLINGS", "Widened", "widen_upward"]

#: doublings of the high end at most (1.5 × the rate given → 48 ×); past them the boundary is a lower bound
MAX_DOUBLINGS = 5


@dataclass(frozen=True, slots=True)
class Widened:
    """The bracket after widening.

    Attributes:
        good: the highest value tried that meets the target (None: the first high end already misses).
        bad: the lowest value tried above ``good`` that misses it (None: every value tried met it — the cap was hit).
        tried: every value tried, in order (each one simulation).
    """

    good: float | None
    bad: float | None
    tried: list[float] = field(default_factory=list)

    @property
    def capped(self) -> bool:
        """True when the target held at every doubling: the boundary found is only a lower bound."""
        return self.good is not None and self.bad is None


def widen_upward(meets: Callable[[float], bool], hi: float, max_doublings: int = MAX_DOUBLINGS) -> Widened:
    """Try ``hi``; while it meets the target, double it (at most ``max_doublings`` times).

    ``Widened(None, None, [hi])`` when ``hi`` misses (the bracket needs no widening); ``Widened(v, 2v, …)`` when ``v``
    meets and ``2v`` misses; ``Widened(v, None, …)`` when the last doubling ``v`` still meets (capped).
    """
    tried = [hi]
    if not meets(hi):
        return Widened(None, None, tried)
    v = hi
    for _ in range(max_doublings):
        tried.append(2 * v)
        if not meets(2 * v):
            return Widened(v, 2 * v, tried)
        v *= 2
    return Widened(v, None, tried)
