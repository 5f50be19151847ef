"""Step time with the weight GEMMs and attention priced as kernels that run one after the other, each on its own roofline.

``RooflineStepCost.time_s`` takes one max over the whole step, as if GEMMs and attention overlapped
perfectly. The analyses here price them in sequence, as seed-claims.md §3 ("Reproduce") writes it:

    t = max(matmul FLOPs / F_peak, weight bytes / BW) + max(attention FLOPs / F_peak, KV bytes / BW) + cpu

(both with the achievable fractions). When both terms are bandwidth-bound — decode at small batch —
this equals the whole-step max exactly; they differ once the weight GEMMs turn compute-bound, where
the whole-step max would let those FLOPs hide the KV reads. That regime is the point of both the
FP8 KV break-even at large batch and the speculative-decoding flip, so the sum is the one used.
"""

from __future__ import annotations

from kvledger.accounting.roofline import RooflineStepCost, StepCosts

__all__ = ["serial_time_s", "weights_bound", "attention_bound"]


def _rates(rc: RooflineStepCost) -> tuple[float, float]:
    return rc.peak_flops * rc.flops_fraction, rc.bw * rc.bandwidth_fraction


def serial_time_s(rc: RooflineStepCost, c: StepCosts) -> float:
    """GEMM term + attention term + per-step CPU overhead, s (module docstring)."""
    f, b = _rates(rc)
    return max(c.matmul_flops / f, c.weight_bytes / b) + max(c.attn_flops / f, c.kv_bytes / b) + rc.cpu_overhead_s


def weights_bound(rc: RooflineStepCost, c: StepCosts) -> str:
    """"compute" when the weight GEMMs' FLOP time exceeds their weight-read time, else "memory"."""
    f, b = _rates(rc)
    return "compute" if c.matmul_flops / f >= c.weight_bytes / b else "memory"


def attention_bound(rc: RooflineStepCost, c: StepCosts) -> str:
    """"compute" when attention's FLOP time exceeds its KV-read time, else "memory"."""
    f, b = _rates(rc)
    return "compute" if c.attn_flops / f >= c.kv_bytes / b else "memory"
