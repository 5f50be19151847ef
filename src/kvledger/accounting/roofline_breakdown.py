"""The roofline section of the ledger: ridge point, a prefill chunk, decode against concurrency, and where decode turns
compute-bound.

Arithmetic intensity = FLOPs / HBM bytes; a step is compute-bound when it exceeds the GPU's ridge
point (peak FLOP/s ÷ bandwidth). Weight matmuls have intensity ≈ tokens in the step × 2 / bytes per
weight, so they cross the ridge at ≈ ridge × bytes-per-weight / 2 tokens (295 on an H100 in bf16);
decode attention reads each sequence's KV for ≈ 2·(H_q/H_kv)/bytes FLOPs per byte and stays
bandwidth-bound at any batch (docs/engine-model.md §6.1–§6.2).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvledger.accounting.roofline import RooflineStepCost, StepCosts
from kvledger.accounting.step_term_notes import sparse_mla_layer, step_term_notes
from kvledger.accounting.stepcost import StepShape
from kvledger.jsonable import json_fields, to_jsonable

__all__ = ["DecodeRow", "RooflineReport", "roofline_report", "decode_shape", "prefill_shape"]


def decode_shape(batch: int, context_tokens: int) -> StepShape:
    """``batch`` requests each decoding one token at ``context_tokens`` of KV."""
    return StepShape(num_decode_seqs=batch, decode_kv_tokens=batch * context_tokens)


def prefill_shape(chunk_tokens: int, prior_tokens: int = 0) -> StepShape:
    """One request's prefill chunk of ``chunk_tokens`` after ``prior_tokens`` already computed."""
    pairs = chunk_tokens * prior_tokens + chunk_tokens * (chunk_tokens + 1) / 2
    return StepShape(num_prefill_tokens=chunk_tokens, num_prefill_seqs=1, prefill_kv_tokens=prior_tokens + chunk_tokens,
                     prefill_attn_pairs=pairs)


@dataclass(frozen=True)
class DecodeRow:
    """One decode step at a batch size and context: its FLOPs, bytes and time are each GPU's; its throughput is the
    replica's (every GPU of the TP × PP group runs the step for the same ``batch`` tokens).

    Attributes:
        batch: sequences, count. context_tokens: KV per sequence, tokens.
        flops, bytes: FLOP and B per step. intensity: FLOP/B. bound: "memory", "weights compute, KV memory" (weight
        matmuls past the ridge, attention not) or "compute".
        step_s_lower_bound: at datasheet peaks, s. step_s: at achievable fractions (+ CPU overhead), s.
        tok_per_s_per_seq / tok_per_s: decode throughput per sequence and of the whole replica (all its GPUs
            together, not per GPU), tok/s.
        kv_bytes_share: KV bytes ÷ all bytes of the step, 0–1. fits: within the KV pool's concurrency.
    """

    batch: int
    context_tokens: int
    flops: float
    bytes: float
    intensity: float
    bound: str
    step_s_lower_bound: float
    step_s: float
    tok_per_s_per_seq: float
    tok_per_s: float
    kv_bytes_share: float
    fits: bool


@json_fields(read={"decode_compute_bound_batch": "compute_bound_batch_by_text",
                   "decode_attention_by_context": "attention_by_context_text"})
@dataclass(frozen=True)
class RooflineReport:
    """Roofline figures for one model on one GPU (per GPU, at the plan's TP and KV dtype).

    Attributes:
        compute_dtype: "bf16" or "fp8". peak_flops_per_s, hbm_bandwidth_bytes_per_s: datasheet peaks.
        ridge_flops_per_byte: peak ÷ bandwidth, FLOP/B.
        weight_matmul_crossover_tokens: tokens per step at which weight matmuls turn compute-bound.
        decode_attention_intensity: FLOP/B of decode attention (any batch, long context).
        prefill: the prefill chunk's figures. decode: rows over batch sizes per context.
        decode_compute_bound_batch: per context, the batch where the whole decode step turns compute-bound (None:
        never).
        flops_fraction / bandwidth_fraction: achievable shares used for ``step_s``. notes: caveats.
        decode_attention_by_context: decode attention's FLOP/B at each context (batch 1); it varies where a step reads
            a bounded window (sliding windows, DeepSeek-V4's window and top-k) or a fixed per-request state (Mamba,
            linear attention) besides the growing KV, and ``decode_attention_intensity`` is the longest context's.
        decode_attention_varies_because: which of those the model's steps read, in words ("" when neither).
        pipeline: under --pp, the stage-to-stage sends each step's time includes (``pipeline_pass.py``); None at PP 1.
    """

    compute_dtype: str
    peak_flops_per_s: float
    hbm_bandwidth_bytes_per_s: float
    ridge_flops_per_byte: float
    weight_matmul_crossover_tokens: float
    decode_attention_intensity: float | None
    prefill: dict[str, Any]
    decode: tuple[DecodeRow, ...]
    decode_compute_bound_batch: dict[int, int | None]
    flops_fraction: float
    bandwidth_fraction: float
    notes: tuple[str, ...] = field(default_factory=tuple)
    decode_attention_by_context: dict[int, float] = field(default_factory=dict)
    decode_attention_varies_because: str = ""
    pipeline: dict[str, Any] | None = None
    __json_optional__ = ("pipeline",)  # PP 1 plans' JSON as before

    @property
    def compute_bound_batch_by_text(self) -> dict[str, Any]:
        """``decode_compute_bound_batch`` keyed by the context as text (JSON object keys)."""
        return {str(k): v for k, v in self.decode_compute_bound_batch.items()}

    @property
    def attention_by_context_text(self) -> dict[str, float]:
        """``decode_attention_by_context`` keyed by the context as text (JSON object keys)."""
        return {str(k): v for k, v in self.decode_attention_by_context.items()}

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)

    def decode_attention_varies(self) -> bool:
        """Whether decode attention's FLOP/B differs between the contexts reported (by more than its printed 0.1)."""
        vals = list(self.decode_attention_by_context.values())
        return bool(vals) and max(vals) - min(vals) >= 0.05


def _crossover(rc: RooflineStepCost, flops_of, bytes_of, hi: int = 1 << 22) -> int | None:
    """Smallest batch b ≥ 1 with flops(b)/peak ≥ bytes(b)/bw (bisection; None if not below ``hi``)."""
    def cb(b: int) -> bool:
        return flops_of(b) / rc.peak_flops >= bytes_of(b) / rc.bw
    if not cb(hi):
        return None
    lo, h = 1, hi
    while lo < h:
        mid = (lo + h) // 2
        if cb(mid):
            h = mid
        else:
            lo = mid + 1
    return lo


def _row(rc: RooflineStepCost, batch: int, ctx: int, max_conc: float | None) -> DecodeRow:
    c: StepCosts = rc.costs(decode_shape(batch, ctx))
    lb, t = rc.time_s(c, achievable=False), rc.time_s(c)
    inten = c.flops / c.bytes
    gemm_cb = c.matmul_flops / rc.peak_flops >= c.weight_bytes / rc.bw
    attn_cb = c.attn_flops / rc.attn_peak_flops >= c.kv_bytes / rc.bw  # attention at its own dtype's peak
    bound = "compute" if gemm_cb and attn_cb else ("weights compute, KV memory" if gemm_cb else "memory")
    return DecodeRow(batch, ctx, c.flops, c.bytes, inten, bound,
                     lb, t, 1 / t, batch / t, c.kv_bytes / c.bytes, max_conc is None or batch <= max_conc)


def roofline_report(rc: RooflineStepCost, contexts: list[int], max_concurrency: dict[int, float],
                    prefill_chunk_tokens: int, engine: str = "vllm", settings: Any = None) -> RooflineReport:
    """Build the roofline section: a prefill chunk of ``prefill_chunk_tokens`` and decode over powers of two up to the
    pool's concurrency (``engine``: whose kernel choices its notes name); ``settings`` (``PlanSettings``): under its
    --pp, each step is a pass through the stages with their sends (``pipeline_pass.pipeline_roofline``)."""
    from kvledger.accounting.pipeline_pass import pipeline_roofline

    ridge = rc.peak_flops / rc.bw
    cross = _crossover(rc, lambda b: (2 * rc.matmul_params + rc.head_flops_per_seq) * b,
                       rc.weight_read_bytes) or float("inf")
    pc = rc.costs(prefill_shape(prefill_chunk_tokens))
    prefill = {"chunk_tokens": prefill_chunk_tokens, "flops": pc.flops, "bytes": pc.bytes,
               "intensity": pc.flops / pc.bytes,
               "bound": "compute" if pc.flops / pc.bytes >= ridge else "memory", "step_s_lower_bound": rc.time_s(pc,
                   achievable=False),
               "step_s": rc.time_s(pc), "tok_per_s": prefill_chunk_tokens / rc.time_s(pc),
               "allreduce_s": pc.allreduce_s}  # in both times, beside the FLOPs and bytes (TP > 1)
    rows, turn = [], {}
    for ctx in contexts:
        mc = max_concurrency.get(ctx)
        top = 1024 if mc is None else max(1, int(mc))  # 0 (not one fits): one row, at batch 1, marked as not fitting
        batches = sorted({b for b in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048) if b <= top} | {top})
        rows += [_row(rc, b, ctx, mc) for b in batches]
        turn[ctx] = _crossover(rc, lambda b, c=ctx: rc.costs(decode_shape(b, c)).flops, lambda b,
                               c=ctx: rc.costs(decode_shape(b, c)).bytes)
    long_ctx = max(contexts) if contexts else 8192
    one = rc.costs(decode_shape(1, long_ctx))
    attn_int = one.attn_flops / one.kv_bytes if one.kv_bytes else None
    by_ctx = {}
    for ctx in sorted(set(contexts)):
        c1 = rc.costs(decode_shape(1, ctx))
        if c1.kv_bytes:
            by_ctx[ctx] = c1.attn_flops / c1.kv_bytes
    notes = ["decode attention reads every sequence's KV each step: its intensity does not grow with batch, so it "
             "stays bandwidth-bound", _crossover_note(rc, ridge, cross)]
    if rc.model.dtype_bytes == 4:
        notes.append("dtype float32: matmuls are priced at the GPU's BF16 tensor-core peak, a lower bound on step time "
                     "(the GPU catalog has no FP32 figure, and PyTorch's default FP32 matmul does not use TF32 tensor "
                     "cores)")
    notes += step_term_notes(rc.model, rc.gpu, rc.ep, rc.moe_config, engine)
    notes += _curve_note(rc)
    report = RooflineReport(rc.dtype, rc.peak_flops, rc.bw, ridge, cross, attn_int, prefill, tuple(rows), turn,
                            rc.flops_fraction, rc.bandwidth_fraction, tuple(notes), by_ctx, _why_it_varies(rc))
    return report if settings is None else pipeline_roofline(report, rc.model, rc.gpu, settings)


def _crossover_note(rc: RooflineStepCost, ridge: float, cross: float) -> str:
    """Where the weight matmuls turn compute-bound, with the figures that give it. A MoE step at that batch touches
    every expert (1 − (1 − k/E)^T ≈ 1), so it reads all of a GPU's weights while it multiplies by its active ones only:
    the batch is ridge × bytes read ÷ FLOPs per token (``_crossover``'s equality), ≈ ridge × bytes-per-weight / 2 ×
    total ÷ active weights, not × experts/top-k (the routed experts are not all of the weights)."""
    head = f"weight matmuls turn compute-bound at ≈ {cross:,.0f} tokens per step"
    if not rc.model.is_moe or cross == float("inf"):
        return head + " (ridge × bytes-per-weight / 2)"
    read, flops = rc.weight_read_bytes(cross), 2 * rc.matmul_params + rc.head_flops_per_seq
    touched = rc.experts_touched_fraction(cross)
    share = "every expert, so it reads all the weights" if touched >= 0.995 else f"{touched:.0%} of the experts"
    return (f"{head} (ridge {ridge:.1f} FLOP/B × {read / 1e9:,.2f} GB of weights read per GPU ÷ {flops / 1e9:,.2f} "
            f"GFLOP of matmuls per token: at that batch the step touches {share} while each token multiplies by its "
            "active ones)")


def _why_it_varies(rc: RooflineStepCost) -> str:
    """What makes decode attention's FLOP/B depend on the context: window terms and fixed per-request state bytes."""
    windows = ("it reads bounded windows (DeepSeek sparse attention's top-k latent entries)" if sparse_mla_layer(
        rc.model) else "it reads bounded windows (sliding-window layers, or DeepSeek-V4's window and top-k entries)")
    parts = ([windows] if rc.window_terms else []) + (
        [f"each request also reads a fixed {rc.state_bytes:,.0f} B of recurrent or compressor state"]
        if rc.state_bytes
        else []
    )
    return "; ".join(parts)


def _curve_note(rc: RooflineStepCost) -> list[str]:
    """The note that the simulator prices this GPU's weight matmuls by its measured efficiency curve, where it does
    by default (``gemm_efficiency.curve_applies``), while this table keeps the flat fractions."""
    from kvledger.accounting.gemm_efficiency import curve_span
    from kvledger.accounting.layer_kernels import LayerKernels, kernel_words, kernels_apply, layer_kernel_fit

    span = None if rc.gemm_curve is not None else curve_span(rc.model, rc.gpu, rc.gemm_nk)
    if span is None:
        from kvledger.accounting.carried_kernels import carried_layer_kernel_fit
        from kvledger.accounting.gemm_efficiency import gemm_curve

        measured = gemm_curve(rc.gpu.gpu_id) is not None and _measured_default(rc)  # FP8, quantized or MoE models
        own = layer_kernel_fit(rc.gpu.gpu_id) if measured else None
        carried = (carried_layer_kernel_fit(rc.gpu.gpu_id) or own) if kernels_apply(rc.model) else None
        ops = () if carried is None or rc.layer_kernels is not None else LayerKernels(carried, rc.model, rc.tp, 1.0).ops
        where = ("measured on this GPU (kvledger.accounting.layer_kernels)" if carried is own else
                 "carried from the profiled GPUs (kvledger.accounting.carried_kernels)")
        return [f"`simulate` and every capacity figure add each layer's {kernel_words(ops)} kernels at floors "
                f"{where}, left out here"] if ops else []
    lo, hi = span
    fit = layer_kernel_fit(rc.gpu.gpu_id) if kernels_apply(rc.model) else None
    ops = () if fit is None else LayerKernels(fit, rc.model, rc.tp, 1.0).ops
    kernels = f", and add each layer's {kernel_words(ops)} kernels (kvledger.accounting.layer_kernels)" if ops else ""
    return [f"these step times price every matmul at {rc.flops_fraction:.0%} of peak (flat); `simulate` and every "
            f"capacity figure price this GPU's weight matmuls by its measured efficiency instead, {lo:.0%}–{hi:.0%} of "
            f"peak for this model by tokens per step (kvledger.accounting.gemm_efficiency){kernels}"]


def _measured_default(rc: RooflineStepCost) -> bool:
    """Whether `simulate` prices this GPU by its measured tables by default: no flat bundled GPU profile does (the RTX
    PRO 6000's; ``gemm_efficiency.curve_prices``)."""
    from kvledger.accounting.gpu_profile import bundled_gpu_profile

    prof = bundled_gpu_profile(rc.gpu.name)
    return prof is None or prof.gemm_efficiency == "measured"
