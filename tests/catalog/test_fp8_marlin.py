"""FP8 block-quantized weights under vLLM's Marlin kernel (catalog/fp8_marlin.py): the block scales are repacked to
one served-dtype scale per 128 inputs of each output row (marlin_utils_fp8.py prepare_fp8_layer_for_marlin), which
"Model loading took" counts."""

from __future__ import annotations

from kvledger.catalog.fp8_marlin import fp8_marlin_applies
from kvledger.catalog.loading import loaded_weights
from kvledger.catalog.models import load_model

V033, V019 = (0, 33, 0), (0, 19, 0)
ROUNDING = 4 * 64 * 512  # 4 fused linears × 64 layers, each scale tensor < 10 MiB rounds up to 512 B (one each way)


def test_qwen3_32b_fp8_on_ampere_holds_its_scales_at_64_times_the_bytes():
    # Qwen3-32B: hidden 5,120, q 64 × 128 = 8,192, k/v 8 × 128 = 1,024 each, intermediate 25,600, 64 layers.
    # Marlin scales, N × K/128 × 2 B per layer: qkv 10,240 × 40 × 2 = 819,200; o 5,120 × 64 × 2 = 655,360;
    # gate_up 51,200 × 40 × 2 = 4,096,000; down 5,120 × 200 × 2 = 2,048,000 → 7,618,560 B.
    # Checkpoint fp32 block scales: (3,200 + 2,560 + 16,000 + 8,000) blocks × 4 B = 119,040 B per layer.
    # (7,618,560 − 119,040) × 64 = 479,969,280 B more on sm80 (A100) than on sm90 (H100).
    m = load_model("Qwen/Qwen3-32B-FP8")
    hopper = loaded_weights(m, gpu_arch="sm90", engine_version=V033)
    for v in (V019, V033):
        ampere = loaded_weights(m, gpu_arch="sm80", engine_version=v)
        assert abs(ampere.bytes - hopper.bytes - 479_969_280) <= ROUNDING
        assert "FP8 block scales repacked for Marlin on sm80 (bfloat16" in ampere.how
    assert "Marlin" not in hopper.how
    # Ada (sm89): 0.19 runs W8A8BlockFp8LinearOp on the block scales as they are; 0.26+ reaches Marlin
    assert loaded_weights(m, gpu_arch="sm89", engine_version=V019).bytes == hopper.bytes
    assert abs(loaded_weights(m, gpu_arch="sm89", engine_version=V033).bytes - hopper.bytes - 479_969_280) <= ROUNDING


def test_fp8_moe_experts_take_marlin_below_sm89_only():
    # Qwen3-30B-A3B-FP8: 48 layers × 128 experts, hidden 2,048, moe_intermediate 768. Per expert, Marlin scales
    # w13 (2 × 768) × 2,048/128 × 2 B = 49,152 and w2 2,048 × 768/128 × 2 B = 24,576 against fp32 blocks
    # (12 × 16 + 16 × 6) × 4 B = 1,152: (73,728 − 1,152) × 128 × 48 = 445,906,944 B of experts on sm80, none on
    # sm89 (Triton's FP8 fused MoE keeps the block scales); the attention linears add the same on both from 0.26.
    m = load_model("Qwen/Qwen3-30B-A3B-FP8")
    h = loaded_weights(m, gpu_arch="sm90", engine_version=V033).bytes
    ada = loaded_weights(m, gpu_arch="sm89", engine_version=V033).bytes - h
    ampere = loaded_weights(m, gpu_arch="sm80", engine_version=V033).bytes - h
    assert abs(ampere - ada - 445_906_944) <= 2 * 48 * 512
    # attention per layer: qkv (4,096 + 2 × 512) × 16 × 2 = 163,840, o 2,048 × 32 × 2 = 131,072 against
    # (40 × 16 + 16 × 32) × 4 = 4,608 → 290,304 × 48 = 13,934,592 B on Ada
    assert abs(ada - 13_934_592) <= 2 * 48 * 512
    expert = next(w for w in m.weights if w.expert)
    assert fp8_marlin_applies(m.quant, expert, "sm80", V033) and not fp8_marlin_applies(m.quant, expert, "sm80", V033,
                                                                                         rocm=True)
