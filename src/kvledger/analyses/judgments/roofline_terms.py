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
    """"compute" when the weight GEMMs' FLOP time exceeds their weight-read time, else "memory": the two sides of the
    max the step is priced with (``StepCosts.weight_terms_s``, as ``RooflineStepCost.time_s`` uses them: the FLOPs at
    the measured GEMM efficiency where a curve applies), so the label names the term the step's price pays. A
    verification of batch × (k+1) tokens whose GEMMs the curve prices above the weight read is "compute", and its
    time says so."""
    f, b = _rates(rc)
    mm, wb = c.weight_terms_s(f, rc.expert_peak_flops * rc.flops_fraction, b)
    return "compute" if mm >= wb else "memory"


def attention_bound(rc: RooflineStepCost, c: StepCosts) -> str:
    """"compute" when attention's FLOP time exceeds its KV-read time, else "memory"."""
    f, b = _rates(rc)
    return "compute" if c.attn_flops / f >= c.kv_bytes / b else "memory"
