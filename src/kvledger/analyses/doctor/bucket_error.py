"""The error measure of the start-up buckets (issue 20: no version, GPU or topology bucket above a 5% mean error).

A start-up prints two kinds of figure. The available KV memory, the KV tokens, the blocks and the "Maximum
concurrency" are what a user sizes a deployment by: their error is relative to the printed figure. The memory terms
subtracted before the KV pool (weights, activation peak, non-torch memory, the CUDA-graph estimate) matter by the KV
memory they move, and several are near zero (non-torch 0.03–0.35 GiB on one GPU, where a 0.08 GiB miss is 32%): their
error is taken relative to the memory vLLM splits, the usable memory (device total × gpu_memory_utilization), so a
0.08 GiB miss on an RTX 4090 at 0.9 counts 0.4%. A start-up that failed prints an available KV at or below zero, of
which a relative error has no meaning: that figure's error is also taken relative to the usable memory. Both measures
are printed; the bucket test is read on this one (``scaled``), and the figure-relative mean is printed beside it.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MEMORY_TERMS", "BucketRecord", "scaled_error", "bucket_summary", "buckets_above"]

MEMORY_TERMS = frozenset({"weights", "activation peak", "non-torch", "CUDA graph estimate"})
"""Terms whose error is measured against the usable memory (module docstring)."""


@dataclass(frozen=True)
class BucketRecord:
    """One checked figure of one start-up: its buckets, its figure-relative error, the scaled error (module docstring)
    and whether the printed figure lies in the plan's range (None where the plan prints no range)."""

    version: str
    gpu: str
    topology: str
    term: str
    rel_error: float
    scaled: float
    inside: bool | None

    def key(self, field: str) -> str:
        return getattr(self, field)


def scaled_error(term: str, predicted: float, logged: float, usable_gib: float | None) -> float:
    """(predicted − logged) over the usable memory for a memory term or a failed start-up's available KV (logged ≤ 0),
    else over the logged figure; a figure logged as 0 with no usable memory known: the plain difference."""
    d = predicted - logged
    if usable_gib and (term in MEMORY_TERMS or (term == "available KV" and logged <= 0)):
        return d / usable_gib
    return d / logged if logged else d


def bucket_summary(records: list[BucketRecord], field: str) -> dict[str, dict[str, float | None]]:
    """Per value of ``field`` (version, gpu, topology, term): n, the scaled mean |error| %, the figure-relative mean
    |error| %, available KV (n, mean, share within 2%) and the share of printed figures inside the range."""
    out: dict[str, dict[str, float | None]] = {}
    for k in sorted({r.key(field) for r in records}):
        rs = [r for r in records if r.key(field) == k]
        av = [r for r in rs if r.term == "available KV"]
        ins = [r for r in rs if r.inside is not None]
        out[k] = {"n": len(rs), "mean_abs_pct": 100 * sum(abs(r.scaled) for r in rs) / len(rs),
                  "mean_abs_rel_to_figure_pct": 100 * sum(abs(r.rel_error) for r in rs) / len(rs),
                  "available_n": len(av),
                  "available_mean_abs_pct": 100 * sum(abs(r.scaled) for r in av) / len(av) if av else None,
                  "available_within_2pct": sum(abs(r.scaled) <= 0.02 for r in av) / len(av) if av else None,
                  "inside_range_n": len(ins),
                  "inside_range": sum(bool(r.inside) for r in ins) / len(ins) if ins else None}
    return out


def buckets_above(tables: dict[str, dict[str, dict[str, float | None]]], limit_pct: float = 5.0,
                  fields: tuple[str, ...] = ("version", "gpu", "topology")) -> list[tuple[str, str, float]]:
    """(field, bucket, scaled mean |error| %) of every bucket of ``fields`` above ``limit_pct``."""
    return [(f, k, v["mean_abs_pct"]) for f in fields for k, v in tables[f].items()
            if v["mean_abs_pct"] is not None and v["mean_abs_pct"] > limit_pct]
