"""KV bytes per token, per request and per GPU under TP, for every attention layout (golden values with their
arithmetic)."""

from __future__ import annotations

import pytest

from kvledger.accounting.kvcache import kv_ledger
from kvledger.catalog.models import load_model
from kvledger.errors import InputError
from kvledger.units import GiB, KiB, MiB


@pytest.mark.parametrize("name,bytes_per_token", [
    ("meta-llama/Llama-3.1-8B", 131_072),     # 2 × 32 layers × 8 KV heads × 128 × 2 B = 128 KiB
    ("meta-llama/Llama-3.1-70B", 327_680),    # 2 × 80 × 8 × 128 × 2 = 320 KiB
    ("meta-llama/Llama-3.1-405B", 516_096),   # 2 × 126 × 8 × 128 × 2 = 504 KiB
    ("meta-llama/Llama-2-7b-hf", 524_288),    # MHA: 2 × 32 × 32 × 128 × 2 = 512 KiB
    ("Qwen/Qwen3-32B", 262_144),              # head_dim 128 ≠ 5120/64: 2 × 64 × 8 × 128 × 2 = 256 KiB
    ("microsoft/phi-4", 204_800),             # 2 × 40 × 10 × 128 × 2 = 200 KiB
    ("deepseek-ai/DeepSeek-V3", 70_272),      # MLA: 61 × (512 + 64) × 2, no K/V factor 2
    ("openai/gpt-oss-20b", 49_152),           # all 24 layers in window: 2 × 24 × 8 × 64 × 2 = 48 KiB
    ("google/gemma-2-9b-it", 344_064),        # all 42 layers in window: 2 × 42 × 8 × 256 × 2 = 336 KiB
])
def test_bytes_per_token_bf16(name, bytes_per_token):
    assert kv_ledger(load_model(name)).bytes_per_token_model == bytes_per_token


def test_one_128k_request_of_the_8b_is_exactly_16_gib():
    # 131,072 tokens × 131,072 B/token = 2^34 B = 16 GiB
    assert kv_ledger(load_model("meta-llama/Llama-3.1-8B")).bytes_per_request(131_072) == 16 * GiB


def test_fp8_halves_the_bytes():
    kv = kv_ledger(load_model("meta-llama/Llama-3.1-8B"), "fp8")
    assert (kv.elem_bytes, kv.bytes_per_token) == (1, 65_536)


def test_tp_divides_kv_heads_until_one_per_gpu():
    m = load_model("meta-llama/Llama-3.1-70B")
    # 8 KV heads: TP 4 → 2 heads/GPU: 2 × 80 × 2 × 128 × 2 = 81,920; TP 8 → 1 head: 40,960; TP 16 would need
    # 64 attention heads / 16 = 4 per GPU and 8 KV heads replicated → still 1 head per GPU: 40,960.
    assert [kv_ledger(m, tp=t).bytes_per_token for t in (1, 4, 8, 16)] == [327_680, 81_920, 40_960, 40_960]
    assert any("replicated" in n for n in kv_ledger(m, tp=16).notes)


def test_mla_latent_is_whole_on_every_rank():
    m = load_model("deepseek-ai/DeepSeek-V3")
    assert kv_ledger(m, tp=1).bytes_per_token == kv_ledger(m, tp=8).bytes_per_token == 70_272
    assert kv_ledger(m, "fp8").bytes_per_token == 35_136  # 61 × 576 × 1


def test_heads_versus_kv_heads_warning_gives_the_classic_error():
    # Using 32 attention heads instead of 8 KV heads: 4× (512 KiB); for the 70B 64 vs 8: 8× (2,560 KiB).
    n8 = kv_ledger(load_model("meta-llama/Llama-3.1-8B")).notes[0]
    n70 = kv_ledger(load_model("meta-llama/Llama-3.1-70B")).notes[0]
    assert "524,288 B/token (512 KiB), 4× too high" in n8
    assert "2,621,440 B/token (2,560 KiB), 8× too high" in n70


def test_sliding_window_caps_per_request_bytes():
    kv = kv_ledger(load_model("openai/gpt-oss-20b"))
    # 12 full layers × 2 × 8 × 64 × 2 = 24,576 B/token, uncapped; 12 sliding layers the same but at most 128 tokens.
    # At 8,192 tokens: 24,576 × 8,192 + 24,576 × 128 = 201,326,592 + 3,145,728 = 204,472,320 B.
    assert kv.growing_bytes_per_token == 24_576
    assert kv.bytes_per_request(8192) == 204_472_320
    mistral = kv_ledger(load_model("mistralai/Mistral-7B-v0.1"))
    assert mistral.bytes_per_request(32_768) == 512 * MiB  # window 4096 × 128 KiB


def test_state_layers_hold_fixed_bytes_per_sequence():
    # Qwen3-Next: 36 DeltaNet layers × (32 × 128 × 128 recurrent + 8192 × 3 conv) × 2 B = 36 MiB + 1.6875 MiB;
    # 12 attention layers × 2 × 2 KV heads × 256 × 2 B = 24 KiB/token.
    q = kv_ledger(load_model("Qwen/Qwen3-Next-80B-A3B-Thinking"))
    assert q.state_bytes_per_seq == 36 * MiB + 1.6875 * MiB and q.bytes_per_token == 24 * KiB
    # Nemotron-H: 54 Mamba-2 layers × (256 × 64 × 256 + 20,480 × 3) × 2 B = 432 MiB + 6.328 MiB; 10 attention layers: 40
    # KiB/token.
    n = kv_ledger(load_model("nvidia/Nemotron-H-56B-Base-8K"))
    assert n.state_bytes_per_seq == 54 * (4_194_304 + 61_440) * 2 and n.bytes_per_token == 40 * KiB
    # Jamba: 28 Mamba layers × (8192 × 16 + 8192 × 3) × 2 B = 7 MiB + 1.3125 MiB; 4 attention layers: 16 KiB/token.
    j = kv_ledger(load_model("ai21labs/Jamba-v0.1"))
    assert j.state_bytes_per_seq == 7 * MiB + 1.3125 * MiB and j.bytes_per_token == 16 * KiB
    # fp32 recurrent state doubles the SSM part only: 72 MiB + 1.6875 MiB.
    assert kv_ledger(load_model("Qwen/Qwen3-Next-80B-A3B-Thinking"),
                     mamba_ssm_cache_dtype="float32").state_bytes_per_seq == 72 * MiB + 1.6875 * MiB


def test_impossible_tp_and_dtype_are_refused():
    with pytest.raises(InputError, match="40 attention heads, not divisible by 3"):
        kv_ledger(load_model("microsoft/phi-4"), tp=3)
    with pytest.raises(InputError, match="10 KV heads can be neither split"):
        kv_ledger(load_model("microsoft/phi-4"), tp=4)
    with pytest.raises(InputError, match="not supported"):
        kv_ledger(load_model("microsoft/phi-4"), "int3")
