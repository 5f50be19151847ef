"""Vidur's measured tables read into interpolation grids: CSV rows, per-key means, and the attention grids.

The attention table (A100, Llama-2-70B shape at TP2) is read into two grids: prefill time against (chunk, prior KV)
and decode time against (batch, KV per request); ``kvledger.accounting.vidur_cost`` scales them to other shapes.
"""

from __future__ import annotations

import csv
import functools
from bisect import bisect_left
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

__all__ = ["read_rows", "num", "mean_by_key", "causal_pairs", "Grid2", "attention_grids"]


def read_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def num(text: str | None) -> float:
    return float(text) if text not in (None, "") else 0.0


def mean_by_key(pairs: list[tuple[tuple, float]]) -> dict[tuple, float]:
    acc: dict[tuple, list[float]] = defaultdict(list)
    for key, value in pairs:
        acc[key].append(value)
    return {k: float(np.mean(v)) for k, v in acc.items()}


def causal_pairs(c: float, p: float) -> float:
    """Causal query–key pairs of a chunk of c tokens after p computed tokens."""
    return c * p + c * (c + 1) / 2


@dataclass(frozen=True, slots=True)
class Grid2:
    """A measured table z[i, j] on a rectilinear grid (xs[i], ys[j]), ms; bilinear inside, clamped at edges.

    ``at`` reads the table as Python floats (``xl``, ``yl``, ``zl``): a step's price is several lookups, and numpy's
    scalar calls cost more than the arithmetic (the same IEEE operations in the same order: the same floats).
    """

    xs: np.ndarray
    ys: np.ndarray
    z: np.ndarray
    xl: list[float] = field(init=False, repr=False, compare=False)
    yl: list[float] = field(init=False, repr=False, compare=False)
    zl: list[list[float]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "xl", np.asarray(self.xs, dtype=np.float64).tolist())
        object.__setattr__(self, "yl", np.asarray(self.ys, dtype=np.float64).tolist())
        object.__setattr__(self, "zl", np.asarray(self.z, dtype=np.float64).tolist())

    def at(self, x: float, y: float) -> float:
        xs, ys, z = self.xl, self.yl, self.zl
        xc = min(max(x, xs[0]), xs[-1])
        yc = min(max(y, ys[0]), ys[-1])
        i = min(max(bisect_left(xs, xc) - 1, 0), len(xs) - 2)  # np.searchsorted's left side, clipped
        j = min(max(bisect_left(ys, yc) - 1, 0), len(ys) - 2)
        fx = (xc - xs[i]) / (xs[i + 1] - xs[i])
        fy = (yc - ys[j]) / (ys[j + 1] - ys[j])
        return float((1 - fx) * ((1 - fy) * z[i][j] + fy * z[i][j + 1]) + fx * ((1 - fy) * z[i + 1][j] + fy * z[i + 1][
            j + 1]))

    def row(self, x: float) -> np.ndarray:
        """z interpolated along x at fixed x (clamped), as a function of ys."""
        xs = self.xl
        xc = min(max(x, xs[0]), xs[-1])
        i = min(max(bisect_left(xs, xc) - 1, 0), len(xs) - 2)
        fx = (xc - xs[i]) / (xs[i + 1] - xs[i])
        return (1 - fx) * self.z[i] + fx * self.z[i + 1]


@functools.lru_cache(maxsize=2)
def attention_grids(path: Path) -> tuple[Grid2, Grid2]:
    """(decode grid over (batch, kv), prefill grid over (chunk, prior kv)); duplicate rows averaged; prefill
    cells past the measured c + p ≤ max_model_len edge filled in proportion to causal pairs.

    Read once per path (every Vidur cost scales the same A100 table: reading its rows took ~0.5 s a model, TP degree
    or GPU); the grids' arrays are read-only, so the cached pair cannot be changed by a caller."""
    rows = read_rows(path)
    dec = mean_by_key([((int(r["batch_size"]), int(r["kv_cache_size"])), num(r["time_stats.attn_decode.median"]))
                        for r in rows if r["is_prefill"] != "True"])
    pre = mean_by_key([((int(r["prefill_chunk_size"]), int(r["kv_cache_size"])),
                         num(r["time_stats.attn_prefill.median"]))
                        for r in rows if r["is_prefill"] == "True"])
    grids = []
    for table, fill in ((dec, False), (pre, True)):
        xs = np.array(sorted({k[0] for k in table}), dtype=np.float64)
        ys = np.array(sorted({k[1] for k in table}), dtype=np.float64)
        z = np.full((len(xs), len(ys)), np.nan)
        for (x, y), v in table.items():
            z[np.searchsorted(xs, x), np.searchsorted(ys, y)] = v
        if fill:
            for i, c in enumerate(xs):
                j_last = int(np.flatnonzero(~np.isnan(z[i]))[-1])
                for j in range(j_last + 1, len(ys)):
                    z[i, j] = z[i, j_last] * causal_pairs(c, ys[j]) / causal_pairs(c, ys[j_last])
        if np.isnan(z).any():
            raise ValueError(f"{path}: attention grid has holes")
        for a in (xs, ys, z):
            a.setflags(write=False)
        grids.append(Grid2(xs, ys, z))
    return grids[0], grids[1]
