"""Figures for the commands whose natural output is a curve: ``fp8-kv`` (decode step against context, break-even
marked), ``spec-decode`` (speed-up against batch, the flip marked) and ``goodput --target`` (attainment against load,
the boundary marked)."""

from __future__ import annotations

import textwrap
from typing import Any

from kvledger.report.figure import new_axes

__all__ = ["fp8_kv_figure", "spec_decode_figure", "boundary_figure"]


def _wrap(title: str) -> str:
    return "\n".join(textwrap.wrap(title, 90))


def fp8_kv_figure(r: Any):
    """bf16 and fp8 decode step time against context at the report's batch, and the break-even context."""
    fig, ax = new_axes(height=3.4)
    x = [p.context_tokens for p in r.curve]
    ax.plot(x, [p.bf16_step_s * 1e3 for p in r.curve], marker="o", label="bf16 KV")
    ax.plot(x, [p.fp8_step_s * 1e3 for p in r.curve], marker="s", label="fp8 KV (incl. quantise/dequantise overhead)")
    be = next((b for b in r.break_even_by_batch if b.batch == r.concurrency), None)
    if be is not None and be.context_tokens:
        ax.axvline(be.context_tokens, color="grey", ls=":", label=f"break-even {be.context_tokens:,} tokens")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("context per sequence, tokens")
    ax.set_ylabel("decode step time, ms")
    ax.set_title(_wrap(f"FP8 KV: {r.model} on {r.gpu}, batch {r.concurrency} (roofline + FP8 overhead)"), fontsize=8)
    ax.legend(fontsize=7)
    return fig


def spec_decode_figure(r: Any):
    """Speed-up (×) of speculative decoding against batch at the report's context; 1× drawn, the flip where it
    crosses."""
    fig, ax = new_axes(height=3.4)
    b = [row.batch for row in r.rows]
    ax.plot(b, [row.speedup for row in r.rows], marker="o", label=f"speed-up at {r.context_tokens:,} tokens")
    ax.axhline(1.0, color="#c44e52", lw=1, label="1× (no gain)")
    flip = next((f for f in r.flips if f.get("context_tokens") == r.context_tokens and f.get("flip_batch")), None)
    if flip is not None:
        ax.axvline(flip["flip_batch"], color="grey", ls=":", label=f"flip at {flip['flip_batch']:,} sequences")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("decode batch, sequences")
    ax.set_ylabel("spec ÷ plain output tokens/s, ×")
    s = r.summary
    ax.set_title(_wrap(f"Speculative decoding: {r.model} on {r.gpu}, k = {s.draft_tokens}, α = "
                       f"{s.acceptance}"), fontsize=8)
    ax.legend(fontsize=7)
    return fig


def boundary_figure(points: list[tuple[float, float, float | None]], axis: str, target: float, boundary: float | None,
                    measured: bool, estimated: int = 0):
    """Attainment (and goodput) against load, the target line and the SLO boundary.

    Args:
        points: (axis value, attainment 0–1, goodput req/s or None) per run or probe.
        axis: the axis name (``request_rate``, ``concurrency``, ``max_num_seqs``); measured: files, not a simulation.
        estimated: how many points are estimates (attainment bounded, drawn at the lower bound; the legend says so).
    """
    pts = sorted(points)
    fig, ax = new_axes(height=3.4)
    tw = ax.twinx()
    x = [p[0] for p in pts]
    label = "requests within SLO, %" + (f" ({estimated} estimated: drawn at their lower bound)" if estimated else "")
    ax.plot(x, [100 * p[1] for p in pts], marker="o", color="#4c72b0", label=label)
    ax.axhline(100 * target, color="#4c72b0", ls=":", lw=1, label=f"target {100 * target:.0f}%")
    if any(p[2] is not None for p in pts):
        tw.plot([p[0] for p in pts if p[2] is not None], [p[2] for p in pts if p[2] is not None], marker="s",
                color="#55a868",
                label="goodput, req/s" + (" (lower bound where estimated)" if estimated else ""))
        tw.set_ylabel("goodput, good req/s")
    if boundary is not None:
        ax.axvline(boundary, color="grey", ls="--", label=f"boundary {boundary:g}")
    unit = {"request_rate": "request rate, req/s", "concurrency": "concurrency, users", "max_num_seqs": "max_num_seqs, "
        "sequences"}
    ax.set_xlabel(unit.get(axis, axis) + (" (measured runs)" if measured else " (simulated probes)"))
    ax.set_ylabel("requests within SLO, %")
    ax.set_ylim(0, 105)
    ax.legend(fontsize=7, loc="lower left")
    if any(p[2] is not None for p in pts):
        tw.legend(fontsize=7, loc="lower right")
    return fig
