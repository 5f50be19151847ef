"""Vidur's measured tables read into interpolation grids: CSV rows, per-key means, and the attention grids.

The attention table (A100, Llama-2-70B shape at TP2) is read into two grids: prefill time against (chunk, prior KV)
and decode time against (batch, KV per request); ``kvledger.accounting.vidur_cost`` scales them to other shapes.
"""

from __future__ import annotations

import csv
from collections import defaultdict
from dataclasses import dataclass
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
    """A measured table z[i, j] on a rectilinear grid (xs[i], ys[j]), ms; bilinear inside, clamped at edges."""

    xs: np.ndarray
    ys: np.ndarray
    z: np.ndarray

    def at(self, x: float, y: float) -> float:
        xc = min(max(x, self.xs[0]), self.xs[-1])
        yc = min(max(y, self.ys[0]), self.ys[-1])
        i = int(np.clip(np.searchsorted(self.xs, xc) - 1, 0, len(self.xs) - 2))
        j = int(np.clip(np.searchsorted(self.ys, yc) - 1, 0, len(self.ys) - 2))
        fx = (xc - self.xs[i]) / (self.xs[i + 1] - self.xs[i])
        fy = (yc - self.ys[j]) / (self.ys[j + 1] - self.ys[j])
        z = self.z
        return float((1 - fx) * ((1 - fy) * z[i, j] + fy * z[i, j + 1]) + fx * ((1 - fy) * z[i + 1, j] + fy * z[i + 1,
            j + 1]))

    def row(self, x: float) -> np.ndarray:
        """z interpolated along x at fixed x (clamped), as a function of ys."""
        xc = min(max(x, self.xs[0]), self.xs[-1])
        i = int(np.clip(np.searchsorted(self.xs, xc) - 1, 0, len(self.xs) - 2))
        fx = (xc - self.xs[i]) / (self.xs[i + 1] - self.xs[i])
        return (1 - fx) * self.z[i] + fx * self.z[i + 1]


def attention_grids(path: Path) -> tuple[Grid2, Grid2]:
    """(decode grid over (batch, kv), prefill grid over (chunk, prior kv)); duplicate rows averaged; prefill
    cells past the measured c + p ≤ max_model_len edge filled in proportion to causal pairs."""
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
        grids.append(Grid2(xs, ys, z))
    return grids[0], grids[1]
