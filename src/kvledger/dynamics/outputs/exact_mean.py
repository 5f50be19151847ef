"""The exact mean of many float64 values (optionally weighted by integer counts): Σ values·counts correctly rounded.

Used for the ITL mean (itl_gaps.py, metrics.py), so it does not depend on how the gaps were grouped or ordered.
"""

from __future__ import annotations

import math
from itertools import chain

import numpy as np

from kvledger.dynamics.fast import native

__all__ = ["exact_mean"]

_CHUNK = 1 << 16  # _fsum_mean sums 64k values at a time: the Python floats fsum needs stay at ~2 MiB
_PASS = 1 << 16  # values per pass of _exact_total: its int64 sums stay below 2^63, its temporaries small
_SHIFT_SPAN = 12  # widest spread of binary exponents in a pass that _narrow_total sums without grouping
_SPLIT = 134217729.0  # 2^27 + 1: Veltkamp's splitter for float64


def _two_product(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(p, e)`` with ``p = fl(a·b)`` and ``p + e = a·b`` exactly (Dekker's TwoProduct; finite values far from
    overflow and underflow, as step gaps and counts are)."""
    p = a * b
    t = _SPLIT * a
    ah = t - (t - a)
    al = a - ah
    t = _SPLIT * b
    bh = t - (t - b)
    bl = b - bh
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def _fsum_mean(values: np.ndarray, counts: np.ndarray | None) -> float:
    """The reference: every exact product as two doubles (Dekker), summed by ``math.fsum`` 64k at a time."""
    n = len(values) if counts is None else int(counts.sum())
    if counts is None:
        parts = (values[i: i + _CHUNK].tolist() for i in range(0, len(values), _CHUNK))
    else:
        def parts():
            for i in range(0, len(values), _CHUNK):
                p, e = _two_product(values[i: i + _CHUNK], counts[i: i + _CHUNK].astype(np.float64))
                yield p.tolist()
                yield e.tolist()
        parts = parts()
    return math.fsum(chain.from_iterable(parts)) / n


def _exact_total(values: np.ndarray, counts: np.ndarray | None) -> int:
    """Σ values·counts × 2^1127 as an exact Python integer (every finite double is a multiple of 2^-1074 = 2^(53-1127)).

    ``np.frexp`` writes each value as m·2^(e-53) with m an integer, |m| < 2^53; Σ m·count is taken exactly per
    run of equal exponents with int64 dot products: m split into 27 + 26 bits and the count into 15 + 16 bits,
    every piece's product is below 2^43, so a dot product of up to 2^16 terms stays below 2^59. The values go
    2^16 at a time, so the temporaries stay small and are reused (fresh memory costs more than the arithmetic).
    A pass whose exponents lie within ``_SHIFT_SPAN`` of each other (step gaps: a handful of binades) needs no
    grouping: :func:`_narrow_total`.
    """
    total = 0
    split = counts is not None and int(counts.max()) >> 16
    for i in range(0, len(values), _PASS):
        frac, exp = np.frexp(values[i: i + _PASS])
        mant = (frac * 9007199254740992.0).astype(np.int64)  # × 2^53: exact
        c = None if counts is None else counts[i: i + _PASS].astype(np.int64)
        low = int(exp.min()) if len(exp) else 0
        if len(exp) and int(exp.max()) - low <= _SHIFT_SPAN:
            total += _narrow_total(mant, exp - low, c, split) << (low + 1074)
            continue
        bounds = np.flatnonzero(np.diff(exp)) + 1
        if len(bounds) > 64:  # unsorted values: group equal exponents (one Python step per run below)
            order = np.argsort(exp.astype(np.int16), kind="stable")  # exponents lie in [-1073, 1024]: a radix sort
            mant, exp = mant[order], exp[order]
            c = None if c is None else c[order]
            bounds = np.flatnonzero(np.diff(exp)) + 1
        hi, lo = mant >> 26, mant & 0x3FFFFFF
        if c is None:
            pieces = [(26, hi, None), (0, lo, None)]
        elif split:
            c1, c0 = c >> 16, c & 0xFFFF
            pieces = [(42, hi, c1), (26, hi, c0), (16, lo, c1), (0, lo, c0)]
        else:
            pieces = [(26, hi, c), (0, lo, c)]
        starts = [0, *bounds.tolist()]
        for a, b in zip(starts, [*starts[1:], len(mant)]):
            run = sum(int(x[a:b].sum() if w is None else np.dot(x[a:b], w[a:b])) << bits for bits, x, w in pieces)
            total += run << (int(exp[a]) + 1074)  # the run's 2^(e-53) as a multiple of 2^-1127
    return total


def _narrow_total(mant: np.ndarray, shift: np.ndarray, c: np.ndarray | None, split: bool) -> int:
    """Σ mant·2^shift·c exactly, for 0 ≤ shift ≤ ``_SHIFT_SPAN`` (``c``: int64 counts below 2^31, or None for 1 each).

    Every value is brought to the pass's lowest exponent by a left shift, with no sort: m is cut into three pieces of
    18 bits (the top one signed, |top| < 2^17), each shifted by at most 12 bits (below 2^30), times a count piece
    below 2^16 (the count split into 15 + 16 bits past 2^16): each product is below 2^46, so a dot product of up to
    2^16 terms stays below 2^62, within int64.
    """
    counts = [(0, None)] if c is None else [(16, c >> 16), (0, c & 0xFFFF)] if split else [(0, c)]
    total = 0
    for bits, piece in ((36, mant >> 36), (18, (mant >> 18) & 0x3FFFF), (0, mant & 0x3FFFF)):
        piece <<= shift
        for cbits, w in counts:
            total += int(piece.sum() if w is None else np.dot(piece, w)) << (bits + cbits)
    return total


def exact_mean(values: np.ndarray, counts: np.ndarray | None = None) -> float:
    """Σ values·counts (counts default 1; non-negative integers) correctly rounded, then divided by Σ counts:
    independent of the order and of how equal values are grouped into counts. ``values`` must not be empty.

    The sum is exact in integers (:func:`_exact_total`) and rounded once (int / int is correctly rounded in
    Python): the double ``math.fsum`` gives over the exact products, without a Python float per value.
    """
    n = len(values) if counts is None else int(counts.sum())
    if not np.isfinite(values).all() or (counts is not None and int(counts.max()) >> 31):
        return _fsum_mean(values, counts)  # non-finite values, or counts past the int64 pieces' bound
    total = getattr(native.core, "exact_total", None)  # the same integer summed in C (not built without int128)
    if total is not None:
        c = None if counts is None else np.ascontiguousarray(counts)
        return total(np.ascontiguousarray(values, dtype=np.float64), c) / (1 << 1127) / n
    return _exact_total(values, counts) / (1 << 1127) / n
