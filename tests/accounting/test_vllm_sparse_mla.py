"""DeepSeek-V3.2 (``index_topk``) under vLLM 0.28 and 0.33: the sparse MLA backend picked per GPU family and KV
dtype, its cache format (fp8_ds_mla 656 B, or the plain latent) and the 64-token blocks the indexer cache forces."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.accounting.vllm_sparse_mla import sparse_mla_choice
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.modelspec import parse_config
from kvledger.errors import EngineRefusalError

CONFIG = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "oracle_configs" / "deepseek_v32.json"


def _v32():
    return parse_config(json.loads(CONFIG.read_text()), source="deepseek_v32")


def _plan(gpu: str, dtype: str, **kw):
    return build_plan(_v32(), get_gpu(gpu), make_settings(tp=8, kv_cache_dtype=dtype, **kw), with_roofline=False)


def test_h200_fp8_is_flashmla_sparse_fp8_ds_mla_in_64_token_blocks():
    # Hopper, fp8: FLASH_ATTN_MLA_SPARSE takes bf16/fp16 only, FLASHMLA_SPARSE takes "fp8" and canonicalises it to
    # fp8_ds_mla: 512 FP8 NoPE + 4 fp32 scales (16 B) + 64 BF16 RoPE (128 B) = 656 B per token per layer.
    # Indexer keys: 128 FP8 + one fp32 scale = 132 B. 61 layers × (656 + 132) = 61 × 788 = 48,068 B/token per GPU
    # (the latent is whole on every rank). Blocks: the indexer cache takes exactly 64 tokens, FLASHMLA_SPARSE
    # multiples of 64 -> 64; a block is 64 × 48,068 = 3,076,352 B.
    p = _plan("H200", "fp8")
    assert p.kv.bytes_per_token == 48_068
    assert p.memory.block_size == 64
    assert p.memory.bytes_per_block == 3_076_352
    assert any("FLASHMLA_SPARSE (fp8_ds_mla latent, 656 B" in n for n in p.memory.notes)


def test_h200_auto_is_flash_attn_mla_sparse_bf16_in_64_token_blocks():
    # auto = bf16: FLASH_ATTN_MLA_SPARSE heads Hopper's sparse list; (512 + 64) × 2 B = 1,152 B latent + 132 B
    # indexer = 1,284 B; × 61 = 78,324 B/token. Block 64 (MultipleOf(64) and the indexer's [64]).
    p = _plan("H200", "auto")
    assert p.kv.bytes_per_token == 78_324
    assert p.memory.block_size == 64
    assert any("FLASH_ATTN_MLA_SPARSE (auto latent" in n for n in p.memory.notes)


def test_b200_fp8_stays_plain_fp8_on_flashinfer_mla_sparse():
    # Blackwell, quantized KV: FLASHINFER_MLA_SPARSE first, which keeps plain fp8 (only FLASHMLA_SPARSE rewrites to
    # fp8_ds_mla): 576 × 1 B + 132 B = 708 B; × 61 = 43,188 B/token. Block lcm(32, 64) = 64.
    p = _plan("B200", "fp8")
    assert p.kv.bytes_per_token == 43_188
    assert p.memory.block_size == 64


def test_blackwell_bf16_prefers_fa4_at_16_heads_per_rank_else_flashmla_sparse():
    m, ver = _v32(), (0, 33, 0)
    assert sparse_mla_choice(m, ver, "sm100", "auto", 8).backend == "FLASH_ATTN_MLA_SPARSE_FA4"  # 128 / 8 = 16 heads
    assert sparse_mla_choice(m, ver, "sm100", "auto", 4).backend == "FLASHMLA_SPARSE"  # 32 heads
    assert sparse_mla_choice(m, ver, "sm90", "fp8_e4m3", 8).backend == "FLASHINFER_MLA_SPARSE_SM90"
    assert sparse_mla_choice(m, ver, "sm120", "auto", 8).packed_entry_bytes == 656  # SM120: auto becomes fp8_ds_mla


def test_unaccepted_dtype_is_refused_and_older_versions_keep_their_rules():
    with pytest.raises(EngineRefusalError, match="fp8_e5m2"):  # a valid CacheDType no backend there takes: exit 3
        _plan("H200", "fp8_e5m2")
    # 0.20 was not read for sparse MLA: the old rule stays (FLASH_ATTN_MLA's 16, plain fp8 576 + 132 B).
    p = _plan("H200", "fp8", engine_version="0.20.0")
    assert (p.kv.bytes_per_token, p.memory.block_size) == (43_188, 16)


def test_vllm_028_picks_as_read_in_its_wheel():
    # 0.28.0's platforms/cuda.py: no FLASHINFER_MLA_SPARSE_SM90 (Hopper's fp8_e4m3 finds no backend) and no FA4 sparse
    # backend (a plain cache at ≤ 16 heads per rank goes to FLASHINFER_MLA_SPARSE); SM120 canonicalises auto to
    # fp8_ds_mla as 0.33 does (mla_attention.py::_canonicalize_sparse_mla_kv_cache_dtype)
    m, ver = _v32(), (0, 28, 0)
    assert sparse_mla_choice(m, ver, "sm100", "auto", 8).backend == "FLASHINFER_MLA_SPARSE"  # 128 / 8 = 16 heads
    assert sparse_mla_choice(m, ver, "sm100", "auto", 4).backend == "FLASHMLA_SPARSE"
    assert sparse_mla_choice(m, ver, "sm90", "fp8", 8).packed_entry_bytes == 656
    with pytest.raises(EngineRefusalError, match="vLLM 0.28 on sm90"):
        sparse_mla_choice(m, ver, "sm90", "fp8_e4m3", 8)
    assert sparse_mla_choice(m, (0, 27, 0), "sm120", "auto", 8) is None  # not read: the plain rule stays


def test_rtx_pro_6000_vllm_028_record_holds_the_packed_cache():
    # LLMServingSim's public vLLM 0.28.0 run of DeepSeek-V3.2-Exp-16L64E (16 layers) on one RTX PRO 6000 Server,
    # kv_cache_dtype auto (benchmarks/data/public-runs/llmservingsim-rtxpro6000-deepseek-v32-16l64e/vllm/meta.json):
    # 49,181 blocks × 64 tokens = 3,147,584 tokens. Packed: 16 × (656 + 132) = 12,608 B/token → 39.68e9 B = 36.96 GiB,
    # which fits the 0.92 × 94.97 = 87.37 GiB budget beside 42.76 GiB of weights; the plain 16 × (1,152 + 132) =
    # 20,544 B/token would need 64.66e9 B = 60.22 GiB, more than the card holds beside them.
    cfg = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "public-runs" / \
        "llmservingsim-rtxpro6000-deepseek-v32-16l64e" / "model" / "config.json"
    m = parse_config(json.loads(cfg.read_text()), source="16L64E")
    p = build_plan(m, get_gpu("RTX PRO 6000 Blackwell Server Edition"),
                   make_settings(engine_version="0.28.0", gpu_memory_utilization=0.92, max_num_seqs=128,
                                 max_num_batched_tokens=2048), with_roofline=False)
    assert p.kv.bytes_per_token == 12_608
    assert p.memory.block_size == 64
    assert 49_181 * 64 * p.kv.bytes_per_token / 2**30 == pytest.approx(36.96, abs=0.005)
    assert 49_181 * 64 * 20_544 / 2**30 > 0.92 * 94.97 - 42.76  # the plain layout cannot be what the record holds


def test_the_packed_cache_is_attended_in_bf16_whatever_the_flag():
    # fp8_ds_mla entries are dequantized to BF16 before the MMAs (FlashMLA's FP8 sparse decode), so attention runs at
    # the BF16 peak: on an RTX PRO 6000 under 0.28 `auto` and `fp8` are the same packed cache and price every step
    # alike; on an H200 fp8 is packed too (FLASHMLA_SPARSE: bf16 attention), while a B200's fp8 stays the plain
    # element layout (FLASHINFER_MLA_SPARSE) and attends at the FP8 peak
    from kvledger.accounting.roofline_breakdown import decode_shape, prefill_shape

    cfg = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "public-runs" / \
        "llmservingsim-rtxpro6000-deepseek-v32-16l64e" / "model" / "config.json"
    m = parse_config(json.loads(cfg.read_text()), source="16L64E")
    gpu = get_gpu("RTX PRO 6000 Blackwell Server Edition")
    auto, fp8 = (build_plan(m, gpu, make_settings(engine_version="0.28.0", kv_cache_dtype=k)).step_cost()
                 for k in ("auto", "fp8"))
    for shape in (decode_shape(128, 1500), prefill_shape(2048, 1000)):
        assert auto.step_time_s(shape) == fp8.step_time_s(shape)
    assert auto.attn_dtype == fp8.attn_dtype == "bf16"
    assert _plan("H200", "fp8").step_cost().attn_dtype == "bf16"
    assert _plan("B200", "fp8").step_cost().attn_dtype == "fp8"
