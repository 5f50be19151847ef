"""Whether a GPU-scope fit's runs can see what it fitted: a FLOP fraction that no step of the runs prices is not a fit.

With the measured GEMM curve the weight matmuls of a step of T tokens cost FLOPs / (peak · f · e(T)); below about 190
tokens a step reads its weights for longer than that at any f the fit tries, so a run whose steps are all decode
steps of a few dozen sequences (or prompts served from the prefix cache) prices the same whatever f is. The pattern
search then drifts f along that plateau (a synthetic decode-only Llama-3.1-8B run generated at 0.8 ended at 0.29),
and a profile carrying it would price every prefill 2–3× too slowly. ``flops_seen`` tells the two apart.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["flops_seen"]


def flops_seen(total: Callable[[float], float], flops_fraction: float, objective: float, start: float) -> bool:
    """False when the objective at the start's FLOP fraction and at 1.0 (the other terms as fitted) is the same float as
    at the fitted ``flops_fraction``: the runs cannot tell the fit from either, so the fit keeps the uncalibrated
    default's — 1.0 × the measured curve, the start's when flat — not the plateau's end (two replays per run).
    ``total(f)``: the fit's objective at FLOP fraction f."""
    return any(total(x) != objective for x in (start, 1.0) if x != flops_fraction)
