"""The run's inter-token-latency (ITL) distribution kept without per-request token times: step gaps weighted by counts.

Every ITL of a simulated request is the gap between two of its token times, which are step
end times: within a run of consecutive steps the gap ending at step ``j`` is
``t[j] − t[j−1]``, the same float for every request that emitted a token in both steps. So
the multiset of all ITLs is the set of step gaps, each counted once per such request, plus
the few gaps that span a preemption or a skipped step (kept one by one). Memory follows the
number of steps (12 bytes per step in which some request had a gap), not the number of tokens.

Exactness: up to ``EXACT_PAIRS`` (gap, count) pairs per replica the percentiles are bit for
bit numpy's 'linear' percentiles over the full gap array, and the mean is Σ value × count
correctly rounded (summed exactly as integers, the double ``math.fsum`` would give over the
exact products), divided by the count: bit for bit ``exact_mean`` (exact_mean.py) of the full gap array, which the
simulator's summary uses when token times are kept, so its ITL mean does not depend on
``record_token_times`` (numpy's pairwise mean may differ in the last digits). Past that (runs of
millions of steps) the pairs fold into a log-bucketed sketch (DDSketch's scheme) whose
percentiles and mean are within a relative ``SKETCH_ALPHA`` = 1e-6 of the exact ones; the
summary's definitions then say so.
"""

from __future__ import annotations

import math

import numpy as np

from kvledger.dynamics.outputs.exact_mean import exact_mean
from kvledger.dynamics.outputs.metrics import LatencyStats

__all__ = ["GapHistogram", "merged_stats", "exact_mean", "EXACT_PAIRS", "SKETCH_ALPHA", "SKETCH_NOTE"]

EXACT_PAIRS = 1_000_000  # (gap, count) pairs kept exactly per replica: 12 MiB (every bundled trace stays exact)
SKETCH_ALPHA = 1e-6  # relative error of every sketched figure
_GAMMA = (1 + SKETCH_ALPHA) / (1 - SKETCH_ALPHA)
_LOG_GAMMA = math.log(_GAMMA)
SKETCH_NOTE = (f"itl_s: more than {EXACT_PAIRS:,} distinct step gaps, so the ITL mean and percentiles come from a "
               f"log-bucketed sketch, each within a relative {SKETCH_ALPHA:g} of the exact value (TTFT, TPOT, E2E "
               f"exact)")


_BINCOUNT_SPAN = 1 << 22  # widest key span counted by bincount (a 32 MiB array of sums at most)


class GapHistogram:
    """Weighted ITL values of one replica: (gap s, count) pairs, plus single gaps; a sketch past EXACT_PAIRS."""

    def __init__(self) -> None:
        self._values: list[np.ndarray] = []
        self._counts: list[np.ndarray] = []
        self._pairs = 0
        self.single: list[float] = []  # gaps spanning a preemption or a skipped step, s
        self.sketch: tuple[np.ndarray, np.ndarray] | None = None  # (bucket keys, counts) once exactness is given up

    def add_steps(self, gaps: np.ndarray, counts: np.ndarray) -> None:
        """Steps' gaps (s) and how many requests had a token in both the step and the one before (count)."""
        keep = counts > 0
        if keep.any():
            self._values.append(gaps[keep])
            self._counts.append(counts[keep].astype(np.int32))
            self._pairs += len(self._values[-1])
            if self._pairs > EXACT_PAIRS:
                self.to_sketch()

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """All exact (values, counts), single gaps included with count 1."""
        vals = self._values + [np.asarray(self.single, dtype=np.float64)]
        cnts = self._counts + [np.ones(len(self.single), dtype=np.int32)]
        return np.concatenate(vals), np.concatenate(cnts)

    def to_sketch(self) -> None:
        """Fold the exact pairs into the sketch (keys ⌈log_γ v⌉; a gap of 0 gets its own key)."""
        values, counts = self.arrays()
        self._values, self._counts, self.single, self._pairs = [], [], [], 0
        keys, counts = _bucket_counts(values, counts)
        if self.sketch is not None:  # two sorted runs: a stable sort merges them in one pass
            keys = np.concatenate((self.sketch[0], keys))
            counts = np.concatenate((self.sketch[1], counts))
            order = np.argsort(keys, kind="stable")
            keys, counts = _summed_runs(keys[order], counts[order])
        self.sketch = keys, counts


def _bucket_counts(values: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sorted distinct sketch keys, int64 count of each) of gaps ``values`` weighted by ``counts`` (integers ≥ 1).

    The positive gaps' keys usually span a few million at most (γ = 1 + 2·10⁻⁶: a factor of e spans 500,000 keys):
    their counts are then summed per key by one ``bincount`` (float sums of integer counts, exact below 2^53),
    with no sort. Otherwise each (key − lowest key, count) is packed into one int64 and sorted by value (no
    argsort): keys of positive doubles span less than 7.3·10⁸ (ln of the widest ratio, 1,455, over ln γ), below
    2^31. A gap of 0 gets the key −2^62, ahead of every other.
    """
    pos = values > 0
    every = bool(pos.all())  # the common case: no gap of 0, nothing to pick out
    if not every:
        zero = int(counts[~pos].sum())
        values, counts = values[pos], counts[pos]
    with np.errstate(divide="ignore"):
        keys = np.log(values)
    keys /= _LOG_GAMMA  # in place, the same operations as ceil(log(v) / ln γ): fewer large temporaries
    np.ceil(keys, out=keys)
    keys = keys.astype(np.int64)
    cnt = counts.astype(np.int64)
    if len(keys):
        lo = int(keys.min())
        keys -= lo
        if int(keys.max()) < _BINCOUNT_SPAN:
            tot = np.bincount(keys, weights=cnt)
            present = np.flatnonzero(tot > 0)  # every count is ≥ 1, so a key is present iff its sum is > 0
            keys, cnt = present + lo, tot[present].astype(np.int64)
        else:
            packed = (keys << 32) | cnt
            packed.sort()
            keys, cnt = _summed_runs((packed >> 32) + lo, packed & 0xFFFFFFFF)
    if not every:
        keys = np.concatenate(([-2**62], keys))
        cnt = np.concatenate(([zero], cnt))
    return keys, cnt


def _summed_runs(keys: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted ``keys`` with their equal runs merged, each run's counts summed (integers: exact in any order)."""
    if not len(keys):
        return keys, counts
    first = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
    return keys[first], np.add.reduceat(counts, first)


def _sketch_values(keys: np.ndarray) -> np.ndarray:
    """Each bucket's representative 2γ^i/(γ+1), s, within a relative α of every value in the bucket."""
    return np.where(keys == -2**62, 0.0, 2.0 * np.exp(keys * _LOG_GAMMA) / (_GAMMA + 1.0))


def _ranked(values: np.ndarray, counts: np.ndarray, ranks: list[int], is_sorted: bool) -> list[float]:
    """The rank-th smallest value (0-based) of the expanded array (each value repeated ``count`` times), per rank.

    Sorted values: one cumulative sum. Otherwise no full sort: non-negative doubles order like their int64 bit
    patterns, so the values are bucketed by their top bits (sign, exponent, 12 mantissa bits; the exponent alone
    if that would make too many buckets), the weighted count per bucket locates each rank's bucket, and only
    the values of those few buckets are sorted. The same values as a full sort, in a third of the time.
    """
    bits = values.view(np.int64)
    if not is_sorted and len(values) and int(bits.min()) >= 0:  # no negative value, nor -0.0
        lo, hi = int(bits.min()), int(bits.max())
        shift = 40 if (hi >> 40) - (lo >> 40) < 1 << 18 else 52
        key = bits >> shift
        key -= lo >> shift  # bucket numbers from 0
        per = np.cumsum(np.bincount(key, weights=counts))  # float sums of counts: exact below 2^53
        out, seen = [], {}
        for r in ranks:
            b = int(np.searchsorted(per, r, side="right"))
            if b not in seen:
                inside = key == b
                vals, cnts = values[inside], counts[inside]
                order = np.argsort(vals)
                seen[b] = vals[order], np.cumsum(cnts[order]), int(per[b - 1]) if b else 0
            vals, cum, before = seen[b]
            out.append(float(vals[int(np.searchsorted(cum, r - before, side="right"))]))
        return out
    if not is_sorted:
        order = np.argsort(values)
        values, counts = values[order], counts[order]
    cum = np.cumsum(counts)
    return [float(values[int(np.searchsorted(cum, r, side="right"))]) for r in ranks]


def merged_stats(hists: list[GapHistogram]) -> tuple[LatencyStats, bool]:
    """(mean, p50, p90, p99 and count of all gaps of ``hists``, whether a sketch was used).

    Exact: the figures ``latency_stats`` gives on the expanded gap array (mean: see the module doc).
    """
    sketched = any(h.sketch is not None for h in hists)
    if sketched:
        for h in hists:
            h.to_sketch()
        keys = np.concatenate([h.sketch[0] for h in hists if h.sketch is not None])
        uniq, inv = np.unique(keys, return_inverse=True)
        values, counts = _sketch_values(uniq), np.bincount(inv, weights=np.concatenate(
            [h.sketch[1] for h in hists if h.sketch is not None])).astype(np.int64)
    else:  # in any order: each rank's value is the same
        parts = [h.arrays() for h in hists]
        values = np.concatenate([v for v, _ in parts]) if len(parts) > 1 else parts[0][0]
        counts = np.concatenate([c for _, c in parts]) if len(parts) > 1 else parts[0][1]  # int32; sums in int64
    n = int(counts.sum())
    if n == 0:
        return LatencyStats(None, None, None, None, 0), sketched
    at = []  # (h, lo): the percentile's fractional rank and the rank below it
    for q in (50.0, 90.0, 99.0):
        h = q / 100.0 * (n - 1)
        at.append((h, int(h)))
    ranked = _ranked(values, counts, [r for _, lo in at for r in (lo, min(lo + 1, n - 1))], is_sorted=sketched)
    out = [a + (h - lo) * (b - a) for (h, lo), a, b in zip(at, ranked[0::2], ranked[1::2])]
    return LatencyStats(exact_mean(values, counts), out[0], out[1], out[2], n), sketched
