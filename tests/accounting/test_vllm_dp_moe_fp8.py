"""FP8 hidden states gathered before the MoE all-gather under DP + EP (vllm_dp_moe.dispatch_bytes): vLLM 0.19's
``naive_dp_ep.py::_quantize_and_setup_dispatch`` quantizes the rows before ``dispatch`` unless the experts kernel
``expects_unquantized_inputs`` (FlashInfer CUTLASS with block FP8, first on Hopper under EP)."""

from __future__ import annotations

from dataclasses import replace

from kvledger.accounting.vllm_all2all import All2AllChoice
from kvledger.accounting.vllm_dp_moe import dispatch_bytes, dp_moe_words, gathered_hidden_bytes
from kvledger.catalog.models import load_model

V19 = (0, 19, 0)


def test_block_fp8_gathered_at_one_byte_plus_scales_off_hopper():
    m = load_model("Qwen/Qwen3-30B-A3B-FP8")  # 128×128 block FP8, hidden 2,048, bf16 activations
    # DP 2 × EP at 8,192 tokens: 16,384 rows gathered. On SM 8.9 (Triton FP8): 2,048 × 1 B + ⌈2,048/128⌉ = 16 fp32
    # block scales = 64 B → 2,112 B a row → 16,384 × 2,112 = 34,603,008 B
    assert gathered_hidden_bytes(m, 8192, 2, 2, None, V19, "sm89") == 34_603_008
    # Hopper: FlashInfer CUTLASS defers the quantization, bf16 rows: 16,384 × 2,048 × 2 = 67,108,864 B
    assert gathered_hidden_bytes(m, 8192, 2, 2, None, V19, "sm90") == 67_108_864
    # before 0.19 (not read for it) and with another all2all backend: the model dtype as before
    assert gathered_hidden_bytes(m, 8192, 2, 2, None, (0, 18, 0), "sm89") == 67_108_864
    ht = All2AllChoice("deepep_high_throughput", "deepep_high_throughput", "routed", "x")
    assert dispatch_bytes(m, V19, "sm89", ht)[0] == 4096
    assert "2048 × 1 B + 64 B of block scales" in dp_moe_words(m, 8192, 2, 2, None, V19, "sm89")


def test_per_tensor_fp8_gathered_at_one_byte():
    m = load_model("Qwen/Qwen3-30B-A3B-FP8")
    per_tensor = replace(m, quant=replace(m.quant, block=None))
    # per-tensor FP8: no kernel defers it, a static scale is not gathered: 16,384 × 2,048 × 1 B = 33,554,432 B, on
    # Hopper too; below SM 8.9 (Marlin, weight-only FP8) the rows stay bf16
    assert gathered_hidden_bytes(per_tensor, 8192, 2, 2, None, V19, "sm90") == 33_554_432
    assert gathered_hidden_bytes(per_tensor, 8192, 2, 2, None, V19, "sm80") == 67_108_864
    # no DP (EP alone) gathers nothing
    assert gathered_hidden_bytes(per_tensor, 8192, 1, 2, None, V19, "sm90") == 0.0
