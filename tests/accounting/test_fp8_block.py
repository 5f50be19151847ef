"""FP8 block-quantized GEMMs: vLLM 0.33's kernel per compute capability and the GEMM time worked by hand."""

from __future__ import annotations

import pytest

from kvledger.accounting.fp8_block import FP8_BLOCK_EFFICIENCY, fp8_block_gemm_s, fp8_block_kernel
from kvledger.accounting.roofline import compute_dtype
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model


def test_kernel_by_compute_capability():
    # _POSSIBLE_FP8_BLOCK_KERNELS[CUDA]: DeepGEMM / CUTLASS block FP8 need sm90+, so H200 (sm90) runs FP8 × FP8;
    # L40S (sm89) and A100 (sm80) fall through to Marlin, weight-only, BF16 MMAs. A checkpoint without
    # weight_block_size has no block kernel.
    v3 = load_model("deepseek-ai/DeepSeek-V3")
    assert fp8_block_kernel(v3, get_gpu("H200")).mma_dtype == "fp8"
    assert fp8_block_kernel(v3, get_gpu("L40S")).mma_dtype == "bf16"
    assert fp8_block_kernel(v3, get_gpu("A100")).mma_dtype == "bf16"
    assert fp8_block_kernel(load_model("Qwen/Qwen3-8B"), get_gpu("H200")) is None


def test_roofline_matmul_dtype_follows_the_kernel():
    # Qwen3-32B-FP8 (128×128 blocks) on an L40S: the GPU has FP8 tensor cores, but vLLM 0.33 runs Marlin there,
    # so the matmuls are priced at the BF16 peak; on an H100 at the FP8 peak.
    q = load_model("Qwen/Qwen3-32B-FP8")
    assert compute_dtype(q, get_gpu("L40S")) == "bf16"
    assert compute_dtype(q, get_gpu("H100")) == "fp8"


def test_gemm_time_by_hand():
    # DeepSeek-V3's dense down projection: [m × 18,432] · [18,432 × 7,168].
    # m = 4,096 on an H100 (FP8 1,979 TFLOP/s, 3.35 TB/s) at 70% / 80%, efficiency 0.9:
    #   2 · 4,096 · 7,168 · 18,432 = 1,082,331,758,592 FLOP ÷ (1,979e12 · 0.7 · 0.9) = 0.8681 ms (compute-bound).
    h100, l40s = get_gpu("H100"), get_gpu("L40S")
    assert fp8_block_gemm_s(4096, 7168, 18432, h100, "fp8", 0.7, 0.8, FP8_BLOCK_EFFICIENCY) == pytest.approx(
        1_082_331_758_592 / (1979e12 * 0.7 * 0.9))
    # m = 64 (a decode batch): weights 7,168 · 18,432 = 132,120,576 B + 56 · 144 fp32 scales = 32,256 B, FP8
    #   activations 64 · 18,432 = 1,179,648 B, BF16 output 2 · 64 · 7,168 = 917,504 B: 134,249,984 B ÷ (3.35e12 · 0.8)
    #   = 50.09 µs, above the 12.2 µs of FLOPs: bandwidth-bound.
    assert fp8_block_gemm_s(64, 7168, 18432, h100, "fp8", 0.7, 0.8) == pytest.approx(134_249_984 / (3.35e12 * 0.8))
    # L40S through Marlin (BF16 MMAs, 362.05 TFLOP/s, 0.864 TB/s): m = 4,096 takes 1,082,331,758,592 ÷
    #   (362.05e12 · 0.7) = 4.271 ms, twice the 2.135 ms its FP8 peak would give.
    assert fp8_block_gemm_s(4096, 7168, 18432, l40s, "bf16", 0.7, 0.8) == pytest.approx(
        1_082_331_758_592 / (362.05e12 * 0.7))


def test_moe_experts_on_ada_multiply_in_fp8_beside_marlin_linears():
    # Qwen3-30B-A3B-FP8 on an L40S (BF16 362.05, FP8 733 TFLOP/s at 70%, 864 GB/s), TP 1, an 8,192-token prefill chunk.
    # Routed experts: 128 × 48 layers × 3 × 2,048 × 768 = 28,991,029,248 parameters, 8/128 of them per token:
    # 1,811,939,328 → 2 × 1,811,939,328 × 8,192 = 29,686,813,949,952 FLOP on the FP8 Triton fused MoE
    # (fused_moe/oracle/fp8.py; triton_moe.py supports 128-block FP8 from sm89). All matmuls: 2 × 2,730,702,848 ×
    # 8,192 + the LM head 622,329,856 = 44,740,457,791,488 FLOP, so 15,053,643,841,536 on Marlin's BF16 MMAs:
    # 15.0536e12 / 253.435e12 = 59.40 ms (dense weights 1.554 GB ÷ 691.2 GB/s = 2.2 ms, under it).
    # The experts are FP8 (their MMA peak is the FP8 one) but are priced by the fused-MoE kernel fit (moe_kernel.py),
    # which prices FP8 and BF16 experts at the BF16 peak: its own L40S table is this FP8 kernel at this shape, and an
    # FP8-peak variant fits the tables worse. Per MoE layer: t0 + max(touched bytes / (β·BW), FLOPs_pad / (η·P16)):
    #   bytes: 28,991,029,248 FP8 + 128×128-block FP32 scales (4/16,384 B per weight) = 28,998,107,136 B, all touched
    #     (1 − (15/16)^8192 = 1): 28.998e9 / (0.860 × 864e9) = 39.0 ms;
    #   FLOPs: 8,192 > 128 → BLOCK_M 64, 543.27 padded rows per expert (mean 512, σ 21.9: 64 × 8.49):
    #     2 × 1,811,939,328 × 128 × 543.27 / 8 = 31.50e12 at η∞·543.27/(543.27 + 5.40) = 0.3310 × 0.9902 = 0.3277
    #     of 362.05e12 → 265.5 ms — compute-bound; + 48 × 42.6 µs = 2.05 ms → 267.5 ms.
    from kvledger.accounting.kvcache import kv_ledger
    from kvledger.accounting.moe_kernel import moe_kernel_fit, padded_rows_per_expert
    from kvledger.accounting.roofline import RooflineStepCost
    from kvledger.accounting.roofline_breakdown import prefill_shape

    m, g = load_model("Qwen/Qwen3-30B-A3B-FP8"), get_gpu("L40S")
    rc = RooflineStepCost(m, g, kv_ledger(m, "auto", 1), 1)
    assert rc.expert_peak_flops == 733e12 and rc.peak_flops == 362.05e12  # FP8 experts beside BF16 Marlin linears
    c = rc.costs(prefill_shape(8192))
    assert (c.matmul_flops, c.expert_flops) == (44_740_457_791_488, 29_686_813_949_952)
    assert c.expert_bytes == 28_998_107_136 == 28_991_029_248 * (1 + 4 / 16384)
    f, rows = moe_kernel_fit(), padded_rows_per_expert(8192, 8, 128)
    moe = 48 * f.floor_s + 2 * 1_811_939_328 * 128 * rows / 8 / (f.gemm_efficiency * rows / (rows + f.half_tokens)
                                                               * 362.05e12)
    assert moe * 1e3 == pytest.approx(267.5, abs=0.1) and c.moe_kernel_s == pytest.approx(moe, rel=1e-12)
    dense = 15_053_643_841_536 / (362.05e12 * 0.7)
    assert dense == pytest.approx(0.05940, rel=1e-3)
    assert rc.time_s(c) == pytest.approx(dense + moe + rc.attention_s(c), rel=1e-12)
