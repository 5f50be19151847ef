"""The KV usage series of one replica: time buckets of at most ``MAX_USAGE_BUCKETS``, doubling their width as the run
grows.

Each bucket keeps ∫ usage dt, busy seconds and the largest usage of the steps that start in it,
the sums added left to right in step order (a step-at-a-time loop's floats, bit for bit). When a
step starts past the last bucket, pairs of buckets merge (their sums added, their maxima kept) and
the width doubles. ``KvUsageTracker`` (kv_usage.py) feeds it its buffered steps a fold at a time.
"""

from __future__ import annotations

import numpy as np

from kvledger.dynamics.fast import native

__all__ = ["UsageBuckets", "MAX_USAGE_BUCKETS"]

MAX_USAGE_BUCKETS = 256


class UsageBuckets:
    """Per time bucket of ``width_s``: [∫ usage dt, busy s, max usage] (see the module doc)."""

    def __init__(self) -> None:
        self.width_s = 0.01
        self._b: list[list[float]] = []

    def add(self, starts: np.ndarray, durs: np.ndarray, u: np.ndarray, ud: np.ndarray) -> None:
        """Steps starting at ``starts`` (ascending, s), lasting ``durs`` (s), at usage ``u`` (``ud`` = ``u`` ×
        ``durs``). The compiled core's ``bucket_steps`` (native.py) adds them one step at a time, the same sums."""
        if native.core is not None:
            self.width_s = native.core.bucket_steps(self._b, self.width_s, starts, durs, u, ud)
            return
        j, n = 0, len(starts)
        while j < n:
            self._bucket(float(starts[j]))  # merges buckets first when the run has outgrown them
            pos = starts[j:] / self.width_s  # bucket i holds the steps with i ≤ pos < i + 1
            e = j + int(np.searchsorted(pos, MAX_USAGE_BUCKETS))  # steps before the next merge
            self._add_to_buckets(pos[: e - j].astype(np.int64), durs[j: e], u[j: e], ud[j: e])
            j = e

    def series(self) -> list[dict[str, float]]:
        """Each bucket's start and end (s), time-weighted mean usage and max usage."""
        w = self.width_s
        return [{"start_s": i * w, "end_s": (i + 1) * w, "mean": b[0] / b[1] if b[1] else 0.0, "max": b[2]}
                for i, b in enumerate(self._b)]

    def _add_to_buckets(self, idx, durs, u, ud) -> None:
        """Add steps to buckets ``idx`` (ascending, all below MAX_USAGE_BUCKETS), each bucket's sums left to right."""
        n, b = len(idx), self._b
        first = np.concatenate(([0], np.flatnonzero(idx[1:] != idx[:-1]) + 1))
        length = np.diff(np.append(first, n))
        at = idx[first].tolist()
        while len(b) <= at[-1]:
            b.append([0.0, 0.0, 0.0])
        S, M = len(first), int(length.max())
        if S <= 2 or S * (M + 1) > 4 * n + 64:  # a few buckets, or steps spread too unevenly for a grid: one at a time
            for k, i in enumerate(at):
                x, f = b[i], int(first[k])
                e = f + int(length[k])
                x[0] = _seq_sum(x[0], ud[f: e])
                x[1] = _seq_sum(x[1], durs[f: e])
                x[2] = max(x[2], float(u[f: e].max()))
            return
        grid = np.zeros((2, S, M + 1))  # per bucket: its sums so far, its steps, then zeros (x + 0.0 is x)
        grid[0, :, 0] = [b[i][0] for i in at]
        grid[1, :, 0] = [b[i][1] for i in at]
        r = np.repeat(np.arange(S), length)
        c = np.arange(n) - np.repeat(first, length) + 1
        grid[0, r, c] = ud
        grid[1, r, c] = durs
        sums = grid.cumsum(axis=2)[:, np.arange(S), length].tolist()
        peak = np.maximum.reduceat(u, first).tolist()
        for k, i in enumerate(at):
            x = b[i]
            x[0], x[1] = sums[0][k], sums[1][k]
            if peak[k] > x[2]:
                x[2] = peak[k]

    def _bucket(self, start: float) -> list[float]:
        """The bucket a step starting at ``start`` s counts in, merging pairs of buckets first while it is past the
        last."""
        i = int(start / self.width_s)
        while i >= MAX_USAGE_BUCKETS:
            merged = []
            for j in range(0, len(self._b), 2):
                a = self._b[j]
                b = self._b[j + 1] if j + 1 < len(self._b) else [0.0, 0.0, 0.0]
                merged.append([a[0] + b[0], a[1] + b[1], max(a[2], b[2])])
            self._b, self.width_s = merged, self.width_s * 2
            i = int(start / self.width_s)
        while len(self._b) <= i:
            self._b.append([0.0, 0.0, 0.0])
        return self._b[i]


def _seq_sum(start: float, values: np.ndarray) -> float:
    """``start + values[0] + values[1] + …`` added left to right (as a Python loop would), float."""
    if len(values) == 1:
        return start + float(values[0])
    buf = np.empty(len(values) + 1)
    buf[0] = start
    buf[1:] = values
    return float(buf.cumsum()[-1])
