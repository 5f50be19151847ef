"""The bracket of a simulator-driven boundary search: a low value that meets the attainment target and a high one that
misses it, found by doubling or halving, or taken from a guess whose ends the probes imply.

``prober`` is ``sim_boundary``'s probe runner: ``meets(value)`` simulates the value once (later calls reuse the run)
and says whether its attainment meets the target; ``current_phase`` labels the probes it runs.

The guessed bracket (``guessed_bracket``) serves a configuration search, which starts each candidate at its capacity
bound (``kvledger.analyses.search.bounds``): a probe there usually misses and one at half of it meets, so the bracket
is usually [start/2, start]. The guess probes that bracket's first midpoint before either end; bisection assumes
attainment does not rise with the load, and under that same assumption a midpoint that misses implies that the high end
misses, which is then not simulated. A low end is never assumed to meet: the capacity found rests on it, and a probe
that misses below one that meets (a queue read as growing at a light load) made the search and ``goodput --simulate
--target`` (doubling from 1 req/s, which probes every lower power of two) disagree by 2× (a user trial: Llama-3.1-8B on
an H200, 13.375 against 26 req/s), so the low end is probed once the bisection above it has settled, and where it
misses the search halves on below it, as doubling would have stopped there. The bisection goes on from the state
doubling or halving would have reached, with the same midpoints, so the boundary is the same; only the probe list is
one shorter (the implied high end is missing from it and the midpoint comes first). When the other end disagrees with
the guess (the start meets, or half of it misses) the search falls back to doubling or halving from the start, whose
probes it reuses.
"""

from __future__ import annotations

from typing import Any

from kvledger.errors import InputError
from kvledger.ledgers.boundary_widen import widen_upward

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
        w = widen_upward(p.meets, v, MAX_DOUBLINGS)  # v, then doubling while the target holds
        if w.good is not None:
            return (w.good, w.bad) if w.bad is not None else (w.good / 2, w.good)
        return (v, v * 2) if lo is not None else halve(p, v, integer)
    if not p.meets(hi):
        return halve(p, hi, integer)
    if integer and hi <= 1:
        raise InputError("--hi 1 meets the target and leaves no smaller whole number to search; raise --hi")
    return (float(max(1, hi // 2)) if integer else hi / 2), hi


def guessed_bracket(p: Any, start: float, max_evals: int = 30) -> tuple[float, float, float, float, list[str]]:
    """(lo, hi, good, bad, implied): the bracket [lo, hi] that ``find_bracket(p, None, None, False, start)`` finds and
    the final state of the bisection on it (good meets, bad misses, bad − good at most hi/100 — the tolerance
    ``search_sim_boundary`` gives ``search_boundary``), found by bisecting each halving's bracket [v/2, v] before its
    ends are known (module docstring).

    The high end (the start; lower ends were probed on the way down) is probed only when every midpoint met; the low
    end always, once the midpoints have settled, or as soon as two midpoints have missed and none met (the boundary is
    then likely below the bracket, which halving goes on to); ``implied``: the high end not simulated, with the probe
    that implies it. When the start meets, doubling
    from it brackets the boundary as ``find_bracket`` does and the state is (lo, hi, lo, hi)."""
    hi, implied_hi = start, None  # implied_hi: the probe below hi that missed (hi misses too), if any
    for _ in range(MAX_HALVINGS):
        lo = hi / 2  # the value halving tries next (``halve``)
        if lo < 1e-9:
            break
        good, bad, misses, evals = lo, hi, 0, 2  # evals: lo and hi count as search_boundary's
        lo_meets = False
        while bad - good > hi / 100.0 and evals < max_evals:  # search_boundary's loop on [lo, hi] (ledgers/boundary)
            mid = (good + bad) / 2.0
            if mid in (good, bad):
                break
            evals += 1
            if _probe(p, mid, "bisection"):
                good, lo_meets = mid, True
            else:
                bad, misses, implied_hi = mid, misses + 1, implied_hi or mid
                if misses == 2 and not lo_meets:  # likely below lo: find out before bisecting on
                    lo_meets = _probe(p, lo, "bracket")
                    if not lo_meets:
                        break
        if not lo_meets and (misses >= 2 or not _probe(p, lo, "bracket")):
            hi, implied_hi = lo, None  # lo misses (probed): halving goes on below it
            continue
        if implied_hi is None and hi == start and _probe(p, hi, "bracket"):
            got = find_bracket(p, None, None, False, start)  # the start meets: doubling from it
            return got[0], got[1], got[0], got[1], []
        if lo not in p.runs and not _probe(p, lo, "bracket"):  # a low end is verified, never implied (module doc)
            hi, implied_hi = lo, None
            continue
        notes = [f"{hi:g} req/s misses the target, as {implied_hi:g} req/s does"] if hi not in p.runs else []
        return lo, hi, good, bad, notes
    return hi, hi * 2, hi, hi * 2, []  # nothing down to the halving limit meets: search_boundary reports it


def _probe(p: Any, value: float, phase: str) -> bool:
    p.current_phase = phase
    return p.meets(value)
