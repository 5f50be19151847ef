"""The bracket of a simulator-driven boundary search: a low value that meets the attainment target and a high one that
misses it, found by doubling or halving, or taken from a guess whose ends the probes imply.

``prober`` is ``sim_boundary``'s probe runner: ``meets(value)`` simulates the value once (later calls reuse the run)
and says whether its attainment meets the target; ``current_phase`` labels the probes it runs.

The guessed bracket (``guessed_bracket``) serves a configuration search, which starts each candidate at its capacity
bound (``kvledger.analyses.search.bounds``): a probe there usually misses and one at half of it meets, so the bracket
is usually [start/2, start]. The guess probes that bracket's first midpoint before either end; bisection assumes
attainment does not rise with the load, and under that same assumption a midpoint that meets implies that the low end
meets and one that misses implies that the high end misses, so one end is never simulated. The bisection then goes on
from the state doubling or halving would have reached, with the same midpoints, so the boundary is the same; only the
probe list is one shorter (the implied end is missing from it and the midpoint comes first). When the other end
disagrees with the guess (the start meets, or half of it misses) the search falls back to doubling or halving from the
start, whose probes it reuses.
"""

from __future__ import annotations

from typing import Any

from kvledger.errors import InputError

__all__ = ["MAX_DOUBLINGS", "MAX_HALVINGS", "halve", "find_bracket", "guessed_bracket"]

MAX_DOUBLINGS = 12
MAX_HALVINGS = 10


def halve(p: Any, v: float, integer: bool, tries: int = MAX_HALVINGS) -> tuple[float, float]:
    """``v`` misses the target: halve until a value meets it (at most ``tries`` times) → (meets, last miss); else
    (smallest tried, 2 × it)."""
    for _ in range(tries):
        nxt = float(v // 2) if integer else v / 2
        if nxt < (1 if integer else 1e-9):
            break
        if p.meets(nxt):
            return nxt, v
        v = nxt
    return v, v * 2  # v misses: search_boundary reports that no value in the range meets the target


def find_bracket(p: Any, lo: float | None, hi: float | None, integer: bool, start: float = 1.0) -> tuple[float, float]:
    """[lo, hi] with lo meeting the target and hi missing it, found by doubling or halving (from ``start`` when no end
    is given) within limits.

    When the target holds up to the doubling limit, both ends meet it (search_boundary then notes the
    boundary may be higher); when nothing down to the halving limit meets it, lo misses it.
    """
    if lo is not None and hi is not None:
        return lo, hi
    if hi is None:
        v = lo if lo is not None else start
        if p.meets(v):
            for _ in range(MAX_DOUBLINGS):
                if not p.meets(v * 2):
                    return v, v * 2
                v *= 2
            return v / 2, v
        return (v, v * 2) if lo is not None else halve(p, v, integer)
    if not p.meets(hi):
        return halve(p, hi, integer)
    if integer and hi <= 1:
        raise InputError("--hi 1 meets the target and leaves no smaller whole number to search; raise --hi")
    return (float(max(1, hi // 2)) if integer else hi / 2), hi


def guessed_bracket(p: Any, start: float) -> tuple[float, float, float, float]:
    """(lo, hi, good, bad): the bracket from ``start`` that ``find_bracket(p, None, None, False, start)`` finds, with
    each halving's bracket [v/2, v] guessed and its first midpoint probed before v/2 (module docstring); good and bad
    are the bisection's state (the highest value known to meet the target, the lowest known to miss it, lo ≤ good <
    bad ≤ hi), past that midpoint when the guess held. When the start meets, doubling goes on from it (good, bad = lo,
    hi), reusing the probes run here."""
    v = start
    for level in range(MAX_HALVINGS):
        lo = v / 2  # the value halving tries next (``halve``)
        if lo < 1e-9:
            break
        mid = (lo + v) / 2.0  # the first midpoint of the bisection on [lo, v] (kvledger.ledgers.boundary)
        phase, p.current_phase = p.current_phase, "bisection"
        meets_mid = p.meets(mid)
        p.current_phase = phase
        if meets_mid:  # so does lo (implied); v misses: probed on the way down, or the start, probed now
            if level > 0 or not p.meets(v):
                return lo, v, mid, v
            got = find_bracket(p, None, None, False, start)  # the start meets: doubling from it
            return got[0], got[1], got[0], got[1]
        if p.meets(lo):  # v misses (implied at the start, probed below it)
            return lo, v, lo, mid
        v = lo
    return v, v * 2, v, v * 2  # nothing down to the halving limit meets: search_boundary reports it
