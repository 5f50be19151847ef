"""How one engine step's duration divides between its prefill chunks and its decodes, and a run's totals of that split.

vLLM v1 runs prefill chunks and decodes in one forward pass, so a mixed step's time has no
measured owner. Each step's duration is split by the step-cost model's own terms
(``STEP_SPLIT_RULE``); a pure-prefill step is all prefill, a pure-decode step all decode, and the
two parts always add up to the step.

Roofline (``RooflineStepCost``; step = weight matmuls + attention + TP all-reduces, then the CPU
overhead), each term split by what drives it::

    matmuls      max(F/peak, W/BW) × F_prefill ÷ F     F = 2·params·tokens + LM head per sequence
                                                        (+ MLA context re-expansion, prefill only)
    attention    max(A/peak, KV/BW) × A_prefill ÷ A when FLOP-bound, × KV_prefill ÷ KV when bytes-bound
                 (split-kernel backends: the prefill kernel's own roofline term)
    all-reduce   × prefill tokens ÷ tokens (and the measured layer kernels, layer_kernels.py, and the routed
                 experts' fused-MoE term, moe_kernel.py, the same way; their FLOPs and bytes leave the matmul term)
    step         duration × (prefill parts ÷ the three terms), so the CPU overhead follows the GPU work

A prompt is thus charged its own matmul FLOPs whenever the step is compute-bound (1M prompt tokens
never cost less than 2·params·10⁶ FLOPs at the achievable peak), and its tokens' share of the one
weight read when the step is bandwidth-bound. Other step-cost models (calibrated, Vidur, fixed) have
no common terms, so a mixed step's time is split in proportion to what each part costs alone under
the same model: ``t × t_prefill ÷ (t_prefill + t_decode)``.

Charging by wall time until the first token instead (occupancy, Σ TTFT ÷ Σ E2E) bills a prompt only
for the steps before its first token, however much of each step its chunk took: on a batch of
hundreds of decodes it understates prefill many times over.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kvledger.accounting.moe_terms import touched_fraction
from kvledger.accounting.stepcost import StepCostModel, StepPrice, StepShape, step_pricer
from kvledger.accounting.tp_comm import allreduce_step_s_array

__all__ = ["STEP_SPLIT_RULE", "prefill_part_s", "PrefillTime", "roofline_prefill_fraction",
           "roofline_prefill_fraction_one", "gpu_time_split"]

STEP_SPLIT_RULE = ("each step's duration split between its prefill chunks and its decodes by the step-cost model's "
                   "terms: roofline matmul term by FLOPs, attention term by FLOPs or KV bytes (whichever bounds it), "
                   "all-reduce and layer kernels by tokens; other models in proportion to each part's price alone "
                   "(kvledger.accounting.step_split)")


def prefill_part_s(price: StepPrice, pf_tok: int, pf_seqs: int, pf_kv: int, pairs: float, dec: int, dec_kv: int,
                   dur_s: float) -> float:
    """The prefill chunks' part of a step of ``dur_s`` seconds with this shape (module doc), s.

    Examples (FixedStepCost(per_step_s=0.01, per_token_s=0.001), a 100-token chunk beside 10 decodes,
    step 0.12 s): alone the chunk costs 0.11 s and the decodes 0.02 s, so the prefill part is
    0.12 × 0.11 ÷ 0.13 = 0.10154 s.
    """
    if not pf_seqs:
        return 0.0
    if not dec:
        return dur_s
    t_p = price(pf_tok, pf_seqs, pf_kv, pairs, 0, 0)
    t_d = price(0, 0, 0, 0.0, dec, dec_kv)
    both = t_p + t_d
    return dur_s * t_p / both if both > 0 else 0.0


class PrefillTime:
    """Σ prefill-attributed step time of one replica, s, fed one step with prefill at a time (``add``).

    A pure-prefill step adds its duration at once. A mixed step's shape and duration are buffered (``mixed``,
    seven numbers a step; a hot loop may extend it directly and call ``check`` after) and every ``CHUNK_STEPS``
    mixed steps priced together (numpy for the plain roofline and for models with a vectorised ``step_times_of``:
    the fitted and DistServe models; else one ``prefill_part_s`` per step), so the simulator pays a list append per
    arrival, not two more step prices. ``total_s`` folds what is buffered
    and adds it, in step order.
    """

    CHUNK_STEPS = 4096

    def __init__(self, cost: StepCostModel) -> None:
        # a wrapper that records each priced step (calibration/replay.py's _Recorder) names the model it wraps
        # ``inner``: the split prices with that, so splitting adds nothing to the wrapper's record
        cost = getattr(cost, "inner", cost)
        self._price = step_pricer(cost)
        rc = cost if getattr(cost, "name", None) == "roofline" and hasattr(cost, "costs") else None
        self._rc = rc  # the roofline: split by its terms (module doc)
        self._vec = rc if rc is not None and not (rc.window_terms or rc.split_attention) \
            and rc.split_vectorisable else None  # … in numpy
        self._times = None if rc is not None else getattr(cost, "step_times_of", None)  # a model's vectorised prices
        self._pure_s = 0.0  # Σ pure-prefill step durations, s
        self._mixed_s = 0.0  # Σ prefill parts of folded mixed steps, s
        self._pure_tokens = 0  # Σ prefill tokens of pure-prefill steps (``add``), tokens
        self._mixed_tokens = 0  # Σ prefill tokens of folded mixed steps, tokens
        self.mixed: list[float] = []  # (pf_tok, pf_seqs, pf_kv, pairs, dec, dec_kv, dur) per mixed step, flat

    def add(self, pf_tok: int, pf_seqs: int, pf_kv: int, pairs: float, dec: int, dec_kv: int, dur_s: float) -> None:
        """One step with prefill chunks (``pf_seqs`` > 0) of duration ``dur_s``."""
        if not dec:
            self._pure_s += dur_s
            self._pure_tokens += pf_tok
            return
        buf = self.mixed
        buf += (pf_tok, pf_seqs, pf_kv, pairs, dec, dec_kv, dur_s)
        if len(buf) >= 7 * self.CHUNK_STEPS:
            self._fold()

    def check(self) -> None:
        """Fold the buffer once it holds ``CHUNK_STEPS`` mixed steps (after a loop extended ``mixed`` itself)."""
        if len(self.mixed) >= 7 * self.CHUNK_STEPS:
            self._fold()

    @property
    def total_s(self) -> float:
        """Σ prefill-attributed step time so far, s."""
        self._fold()
        return self._pure_s + self._mixed_s

    @property
    def tokens(self) -> int:
        """Σ prefill tokens (the steps' ``num_prefill_tokens``) of the steps fed so far, tokens; SGLang's native
        pure-prefill steps (stretch_core.c ``sg_prefill``) add their time only, so this counts vLLM's rules."""
        self._fold()
        return self._pure_tokens + self._mixed_tokens

    def _fold(self) -> None:
        if not self.mixed:
            return
        a = np.fromiter(self.mixed, np.float64, len(self.mixed)).reshape(-1, 7)  # twice np.array's speed on mixed ints
        self._mixed_tokens += int(a[:, 0].sum())
        self.mixed.clear()  # the same list: a loop holding it keeps appending to the buffer
        if self._vec is not None:
            parts = a[:, 6] * roofline_prefill_fraction(self._vec, *(a[:, j] for j in range(6)))
        elif self._times is not None:
            z = np.zeros(len(a))
            t_p = np.maximum(self._times(a[:, 0], a[:, 1], a[:, 2], a[:, 3], z, z), 0.0)
            t_d = np.maximum(self._times(z, z, z, z, a[:, 4], a[:, 5]), 0.0)
            both = t_p + t_d
            parts = a[:, 6] * np.divide(t_p, both, out=np.zeros_like(both), where=both > 0)
        elif self._rc is not None:
            parts = np.array([r[6] * roofline_prefill_fraction_one(self._rc, StepShape(int(r[0]), int(r[1]), int(r[2]),
                                                                                       r[3],
                                                                                        int(r[4]), int(r[5])))
                              for r in a.tolist()])
        else:
            p = self._price
            parts = np.array([prefill_part_s(p, int(r[0]), int(r[1]), int(r[2]), float(r[3]), int(r[4]), int(r[5]),
                                             float(r[6]))
                              for r in a.tolist()])
        self._mixed_s = float(np.concatenate(([self._mixed_s], parts)).cumsum()[-1])  # left to right, in step order


def roofline_prefill_fraction(rc: Any, pf_tok: np.ndarray, pf_seqs: np.ndarray, pf_kv: np.ndarray, pairs: np.ndarray,
                              dec: np.ndarray, dec_kv: np.ndarray) -> np.ndarray:
    """Prefill's share of each step's time by the roofline's terms (module doc), arrays of shapes of a roofline without
    windowed layers or split attention kernels (``RooflineStepCost.step_time_of``'s terms), 0–1."""
    T, ctx = pf_tok + dec, pf_kv - pf_tok
    pre_f = 2 * rc.matmul_params * pf_tok + rc.head_flops_per_seq * pf_seqs + rc.upproj_flops_per_token * ctx
    f = pre_f + 2 * rc.matmul_params * dec + rc.head_flops_per_seq * dec
    m, ff, b = rc.model, rc.flops_fraction, rc.bw * rc.bandwidth_fraction
    frac = touched_fraction(T, m.experts_per_token, m.num_experts) if m.is_moe else 1.0
    wb = rc.dense_weight_bytes + rc.expert_bytes * frac
    moe = rc.moe_kernel_s_array(T) if rc.moe_layers else 0.0  # the routed experts' fused-MoE term, by tokens
    if rc.moe_layers:  # … in place of their FLOPs and bytes in the matmul roofline, as roofline_prefill_fraction_one
        ex = 2 * rc.expert_params_per_token
        pre_f, f, wb = pre_f - ex * pf_tok, f - ex * T, wb - rc.expert_bytes * frac
    eff = 1.0 if rc.gemm_curve is None else rc.gemm_curve.efficiency_array(T, rc.gemm_nk)  # per step's tokens
    mm = np.maximum(f / (rc.peak_flops * ff) / eff, wb / b)
    pre_a = rc.prefill_flops_per_pair * pairs
    a = pre_a + rc.attn_flops_per_pair * dec_kv
    g, st = rc.growing_read_bytes, 2 * rc.state_bytes
    pre_kv = g * pf_kv + st * pf_seqs
    kv = pre_kv + g * dec_kv + st * dec
    at_f, at_b = a / (rc.attn_peak_flops * rc.attn_fraction), kv / b  # attention's own share (gemm_efficiency)
    at = np.maximum(at_f, at_b)
    by_f = np.divide(pre_a, a, out=np.zeros_like(a), where=a > 0)
    by_b = np.divide(pre_kv, kv, out=np.zeros_like(kv), where=kv > 0)
    per_tok = 0.0  # the terms split by tokens: the all-reduces and the measured layer kernels (layer_kernels.py)
    if rc.num_allreduce_layers:
        per_tok = allreduce_step_s_array(T, m.hidden_size, rc.num_allreduce_layers, rc.tp, rc.allreduce_latency_s,
                                         rc.link_bytes_per_s, rc.custom_allreduce_max_bytes)
    if rc.layer_kernels is not None:
        per_tok = per_tok + rc.layer_kernels.step_s_array(T)
    per_tok = per_tok + moe
    by_tok = np.divide(pf_tok, T, out=np.zeros_like(T), where=T > 0)
    total = mm + at + per_tok
    pre = mm * np.divide(pre_f, f, out=np.zeros_like(f), where=f > 0) + at * np.where(at_f >= at_b, by_f,
                                                                                      by_b) + per_tok * by_tok
    return np.divide(pre, total, out=np.zeros_like(total), where=total > 0)


def roofline_prefill_fraction_one(rc: Any, shape: StepShape) -> float:
    """Prefill's share of one step's time by the roofline's terms (module doc), any roofline (windowed layers, split
    attention kernels: the prefill kernel's own term), from ``RooflineStepCost.costs``, 0–1."""
    c = rc.costs(shape)
    T = shape.num_tokens
    if T == 0:
        return 0.0
    p, pa, b = rc.peak_flops * rc.flops_fraction, rc.attn_peak_flops * rc.attn_fraction, rc.bw * rc.bandwidth_fraction
    ctx = shape.prefill_kv_tokens - shape.num_prefill_tokens
    pre_f = (2 * rc.matmul_params * shape.num_prefill_tokens + rc.head_flops_per_seq * shape.num_prefill_seqs
             + rc.upproj_flops_per_token * ctx)
    if c.moe_kernel_s:  # routed experts in the fused-MoE term (moe_kernel.py), which goes by the step's tokens
        pre_f -= 2 * rc.expert_params_per_token * shape.num_prefill_tokens
    mf, wb = c.matmul_flops - (c.expert_flops if c.moe_kernel_s else 0.0), c.weight_bytes - c.expert_bytes
    mm = max(mf / p / c.matmul_efficiency, wb / b)  # the measured curve's share, 1.0 flat
    pre = mm * (pre_f / mf if mf > 0 else 0.0)
    at = rc.attention_s(c)
    if rc.split_attention:
        pre += max(c.prefill_attn_flops / pa, c.prefill_kv_bytes / b)
    elif c.attn_flops / pa >= c.kv_bytes / b:
        pre += at * (c.prefill_attn_flops / c.attn_flops if c.attn_flops > 0 else 0.0)
    else:
        pre += at * (c.prefill_kv_bytes / c.kv_bytes if c.kv_bytes > 0 else 0.0)
    per_token = c.allreduce_s + c.layer_kernels_s + c.moe_kernel_s  # all by the step's tokens
    pre += per_token * shape.num_prefill_tokens / T
    total = mm + at + per_token
    return pre / total if total > 0 else 0.0


def gpu_time_split(parts: list[tuple[float, float, int]], cost_model: str) -> dict[str, Any]:
    """A run's GPU time by token kind from per-replica (prefill-attributed step s, all step s, GPUs of the replica).

    GPU-seconds weight each replica's step time by its GPUs (a disaggregated run's pools differ);
    ``prefill_share`` = Σ prefill GPU-s ÷ Σ GPU-s (0 when no step ran).
    """
    pre = sum(p * g for p, _, g in parts)
    total = sum(t * g for _, t, g in parts)
    return {"prefill_gpu_s": pre, "decode_gpu_s": total - pre, "gpu_s": total,
            "prefill_share": pre / total if total > 0 else 0.0, "cost_model": cost_model, "rule": STEP_SPLIT_RULE}
