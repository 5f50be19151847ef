"""The step-cost terms a model and GPU switch on beyond the plain roofline, each in one line with its engine source:
FP8 block-quantized GEMMs (fp8_block.py), the routed experts' fused-MoE kernel fit (moe_kernel.py), DeepSeek sparse
attention's indexer (attention_terms.py) and vLLM's expert parallelism (expert_parallel.py, moe_terms.py)."""

from __future__ import annotations

from kvledger.accounting.fp8_block import (
    FP8_BLOCK_EFFICIENCY,
    FP8_BLOCK_EFFICIENCY_RANGE,
    expert_mma_dtype,
    fp8_block_kernel,
    sglang_fp8_block_kernel,
)
from kvledger.accounting.moe_kernel import moe_kernel_fit, moe_layer_count
from kvledger.catalog.gpus import GpuSpec
from kvledger.catalog.layers import MLAAttention
from kvledger.catalog.modelspec import ModelSpec

__all__ = ["sparse_mla_layer", "step_term_notes", "expert_parallel_step_note", "fused_moe_note"]


def sparse_mla_layer(model: ModelSpec) -> MLAAttention | None:
    """The first MLA layer with a DeepSeek sparse-attention indexer (``index_topk``), or None."""
    return next((sp for sp in model.layers if isinstance(sp, MLAAttention) and sp.index_topk and not sp.window_tokens),
                None)


def expert_parallel_step_note(ep: int, fused: bool, dp: int = 1, engine: str = "vllm") -> str:
    """The note on how the step cost prices expert parallelism over ``ep`` ranks (``fused``: the fused-MoE kernel
    term prices the routed experts, moe_rows.py; else the token-expert pairs' imbalance, moe_terms.py); ``dp``: vLLM's
    DP ranks in lock-step (dp_lockstep_cost.py), whose MoE layers take every rank's tokens; ``engine`` "sglang": its
    --ep-size (sglang_ep.py: E/ep whole experts on every rank, the standard dispatcher, the same terms)."""
    gemm = ("its GEMMs on its padded rows, n₀·E[P] + √(n₀·Var[P]·(E − n₀)/(E − 1))·√(2 ln r), P = an expert's tokens "
            "padded to BLOCK_SIZE_M (16 for a tuned config), with the GEMM efficiency at its rows per expert"
            if fused else f"its GEMMs × (μ + σ·√(2 ln r))/(T·k/{ep}), μ = T·k·n₀/E token-expert pairs on a fullest "
            "rank, σ² = T·k·(n₀/E)(1 − n₀/E)")
    sg = engine == "sglang"
    tail = ("no all-to-all: with data parallel 1 the TP all-reduce combines the experts' outputs" if dp == 1 else
            f"T the tokens of all {dp} DP ranks, gathered or dispatched as the data-parallel note says" if sg else
            f"T the tokens of all {dp} DP ranks, which each MoE layer all-gathers and reduce-scatters "
            "(allgather_reducescatter: the data-parallel note)")
    flag = (f"SGLang --ep-size {ep}, " + ("--moe-a2a-backend none" if dp == 1 else f"DP attention over {dp} ranks")
            if sg else f"vLLM --enable-expert-parallel, data parallel {dp}")
    return (f"expert parallelism over {ep} ranks ({flag}): each rank holds "
            f"whole experts (n₀ = ⌈E/{ep}⌉ on the fullest, r ranks that full) and reads the ones a step's tokens "
            f"touch; the routed-expert work waits for the busiest rank: {gemm}; and its weight reads × the busiest "
            "rank's touched experts over the mean, min(n₀, n₀p + √(n₀p(1 − p)·(E − n₀)/(E − 1))·√(2 ln r))/(n₀p), "
            f"p = 1 − (1 − k/E)^T (uniform routing, Gaussian extreme-value approximation); {tail}")


def step_term_notes(model: ModelSpec, gpu: GpuSpec, ep: int = 1, moe_config=None, engine: str = "vllm",
                    dp: int = 1) -> list[str]:
    """One line per extra term the roofline prices for ``model`` on ``gpu`` (``ep``: expert-parallel ranks;
    ``moe_config``: the fused-MoE config vLLM runs, moe_config.py; ``engine``: whose FP8 kernel choice the FP8
    line names), with its source; [] when none."""
    notes = []
    if ep > 1 and model.is_moe:
        notes.append(expert_parallel_step_note(ep, fused=moe_layer_count(model) > 0, dp=dp, engine=engine))
    k = fp8_block_kernel(model, gpu)
    if k is not None and engine == "sglang":
        notes.append(sglang_fp8_note(model, gpu, k))
    elif k is not None:
        lo, hi = FP8_BLOCK_EFFICIENCY_RANGE
        r, c = model.quant.block
        notes.append(f"FP8 block-quantized linears ({r}×{c} weight scales): {k.name}, matmuls at the "
                     f"{k.mma_dtype.upper()} peak ({k.source}); the block-scaled GEMM's rate against a per-tensor "
                     f"FP8 GEMM is not applied (assumption {FP8_BLOCK_EFFICIENCY:g}, range {lo:g}–{hi:g})"
                     + ("; the routed experts run Triton's fused MoE in FP8 (fused_moe/oracle/fp8.py, "
                        "experts/triton_moe.py: FP8 from sm89)" if expert_mma_dtype(model, gpu) else ""))
    if model.is_moe and (n := moe_layer_count(model)):
        notes.append(fused_moe_note(n) + (f"; {moe_config.note}" if moe_config is not None else ""))
    sp = sparse_mla_layer(model)
    if sp is not None:
        per_pair = 2 * sp.index_n_heads * (sp.index_head_dim + 1)
        notes.append(f"DeepSeek sparse attention: each layer's indexer scores every cached token per query "
                     f"({sp.index_n_heads} heads × {sp.index_head_dim} in FP8, {per_pair:,} FLOP per pair: quadratic "
                     f"in a prefill, linear in a decode step) and reads its {sp.indexer_bytes_per_token} B/token keys; "
                     f"the MLA attends only the top {sp.index_topk:,} latent entries (vLLM 0.33 deepseek_v2.py "
                     f"Indexer, v1/attention/backends/mla/flashmla_sparse.py)")
    return notes


def sglang_fp8_note(model: ModelSpec, gpu: GpuSpec, vllm_kernel) -> str:
    """The FP8 block-quantized linears' line under SGLang: SGLang's own kernel choice (``sglang_fp8_block_kernel``),
    and, where its MMA precision is not vLLM's, that the roofline prices vLLM's."""
    sk, (r, c) = sglang_fp8_block_kernel(model, gpu), model.quant.block
    if sk is None:
        return (f"FP8 block-quantized linears ({r}×{c} weight scales): SGLang's kernel on {gpu.arch} was not read; "
                f"the roofline assumes vLLM's choice, {vllm_kernel.name}, matmuls at the "
                f"{vllm_kernel.mma_dtype.upper()} peak ({vllm_kernel.source})")
    same = sk.mma_dtype == vllm_kernel.mma_dtype
    return (f"FP8 block-quantized linears ({r}×{c} weight scales): SGLang runs {sk.name} ({sk.source}), matmuls at "
            f"the {sk.mma_dtype.upper()} peak" + ("" if same else (
                f"; the roofline prices vLLM 0.33's choice instead, {vllm_kernel.name} at the "
                f"{vllm_kernel.mma_dtype.upper()} peak: an upper bound on SGLang's step time")))


def fused_moe_note(moe_layers: int) -> str:
    """The line that says how the routed experts of ``moe_layers`` MoE layers are priced (moe_kernel.py)."""
    f = moe_kernel_fit()
    return (f"routed experts: each of the {moe_layers} MoE layers priced by the fused-MoE kernel fit, "
            f"{f.floor_s * 1e6:.1f} µs + max(touched expert bytes / ({f.read_fraction:.3f} × HBM bandwidth), "
            f"GEMM FLOPs on block-padded rows / ({f.gemm_efficiency:.3f} × m/(m + {f.half_tokens:.2f}) × BF16 peak)), "
            f"m the padded rows per expert; fitted to {f.rows} published fused-MoE kernel timings ({f.sources} "
            f"tables of vLLM benchmark_moe.py and SGLang tuning runs on H100, H200 and L40S, random routing): mean "
            f"error {f.err_in:.1%} in-sample, {f.err_loso:.1%} with each table priced by a fit to the others "
            f"(worst row {f.err_loso_max:.0%})")
