"""SGLang and TensorRT-LLM pools, worked by hand from their rules (engines.md §3, §4)."""

from __future__ import annotations

from kvledger.accounting.memory import sglang_mem_fraction_static
from kvledger.accounting.plan import build_plan
from kvledger.accounting.plan_other import trtllm_bytes_per_token
from kvledger.accounting.settings import make_settings
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model

H100 = get_gpu("h100")
LLAMA8 = load_model("meta-llama/Llama-3.1-8B")


def test_sglang_default_fraction_and_token_pool_on_h100():
    # reserved = 512 + 1.5 × 8,192 (chunked_prefill_size) + (1/8) × 1,024 + 2 × 256 (cuda graph bs) = 13,440 MiB
    # (above the 10 GiB floor); fraction = round((81,559 − 13,440) / 81,559, 3) = round(0.83521, 3) = 0.835.
    frac, _ = sglang_mem_fraction_static(81_559, 1, 8192, 256)
    assert frac == 0.835
    p = build_plan(LLAMA8, H100, make_settings(engine="sglang"), with_roofline=False)
    # free before load = 81,120 MiB − 0.13 GiB = 85,060,485,120 − 139,586,437 = 84,920,898,683 B;
    # available = 84,920,898,683 × 0.835 − 16,060,522,496 (weights) = 54,848,427,904 B;
    # #tokens = floor(54,848,427,904 / 131,072) = 418,460; K = V = 418,460 × 65,536 B = 25.54 GiB (SGLang says "GB").
    assert (p.memory.fraction, p.memory.available_kv_bytes, p.memory.pool_tokens) == (0.835, 54_848_427_904, 418_460)
    assert p.memory.printed_lines == ("KV Cache is allocated. #tokens: 418460, K size: 25.54 GB, V size: 25.54 GB",)
    # Page size 1: an 8,192-token request needs 8,192 slots → floor(418,460 / 8,192) = 51 whole requests.
    assert p.row_at(8192).max_requests == 51


def test_trtllm_pool_on_h100():
    # free after the dry run = 85,060,485,120 − 16,060,522,496 (weights) − 939,524,096 (8,192 tokens × (2·4,096 +
    # 48·128 + 3·14,336) × 2 B) − 139,586,437 = 67,920,852,091 B; × 0.9 = 61,128,766,881 B; ÷ 131,072 B/token =
    # 466,375 tokens; // 32 = 14,574 blocks; an 8K request is 256 blocks → 14,574 / 256 = 56.93x.
    p = build_plan(LLAMA8, H100, make_settings(engine="trtllm"), with_roofline=False)
    assert (p.memory.available_kv_bytes, p.memory.pool_tokens, p.memory.num_gpu_blocks) == (61_128_766_881, 466_375, 14_574)
    assert round(p.row_at(8192).max_concurrency, 2) == 56.93


def test_trtllm_per_token_estimate_divides_heads_without_rounding_up():
    # get_cache_size_per_token: 80 layers × 2 × ((128 × 8) // 16) × 2 B = 20,480 B at TP 16 — half a head per GPU,
    # where vLLM keeps one whole head per GPU (40,960 B).
    assert trtllm_bytes_per_token(load_model("meta-llama/Llama-3.1-70B"), 16, 2) == 20_480
