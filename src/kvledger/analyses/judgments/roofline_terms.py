"""Which roofline bounds each term of a step: the weight GEMMs and the attention, each on its own roofline.

``RooflineStepCost.time_s`` prices the two as kernels that run one after the other (docs/engine-model.md §6.2):
``max(matmul FLOPs / F, weight bytes / BW) + max(attention FLOPs / F, KV bytes / BW) + cpu`` at the
achievable fractions; these helpers say which side of each max binds.
"""

from __future__ import annotations

from kvledger.accounting.roofline import RooflineStepCost, StepCosts

__all__ = ["weights_bound", "attention_bound"]


def _rates(rc: RooflineStepCost) -> tuple[float, float]:
    return rc.peak_flops * rc.flops_fraction, rc.bw * rc.bandwidth_fraction


def weights_bound(rc: RooflineStepCost, c: StepCosts) -> str:
    """"compute" when the weight GEMMs' FLOP time at the achievable FLOP fraction of peak exceeds their weight-read
    time, else "memory": the roofline's side, not the measured GEMM curve's (whose low-token end is the weight read's,
    docs/validation.md §2.6), so a decode step of a few dozen sequences reads as memory-bound as it is."""
    f, b = _rates(rc)
    return "compute" if c.matmul_flops / f >= c.weight_bytes / b else "memory"


def attention_bound(rc: RooflineStepCost, c: StepCosts) -> str:
    """"compute" when attention's FLOP time exceeds its KV-read time, else "memory"."""
    f, b = _rates(rc)
    return "compute" if c.attn_flops / f >= c.kv_bytes / b else "memory"
