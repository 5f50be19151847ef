"""MLA's default KV block size on Hopper by vLLM release, checked against printed DeepSeek-R1 H200 start-ups."""

from __future__ import annotations

import pytest

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.accounting.vllm_mla_fp8 import hopper_mla_fp8_block
from kvledger.accounting.vllm_rules import default_block_size, printed_capacity_lines
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model
from kvledger.errors import EngineRefusalError


def test_hopper_mla_block_is_64_up_to_017_and_16_from_018():
    # platforms/cuda.py::check_and_update_config forces block_size 64 for FlashMLA when no backend is given (0.11,
    # 0.14.1, 0.16.0, 0.17.0); 0.18.0 drops the forcing and takes FLASH_ATTN_MLA's preferred 16.
    for ver in ((0, 11, 2), (0, 14, 1), (0, 15, 0), (0, 16, 0), (0, 17, 0)):
        assert default_block_size(ver, True, "sm90")[0] == 64
    for ver in ((0, 18, 0), (0, 19, 0), (0, 33, 0)):
        assert default_block_size(ver, True, "sm90")[0] == 16
    assert default_block_size((0, 16, 0), False, "sm90")[0] == 16  # not MLA: the default 16
    # Blackwell from 0.18: FLASHINFER_MLA's kernel sizes are [32, 64] and 16 is not one, so get_preferred_block_size
    # takes the smallest, 32 (0.18.0 update_block_size_for_backend).
    assert default_block_size((0, 18, 0), True, "sm100")[0] == 32


def test_deepseek_v3_b200_016_forces_flashinfer_mla_64():
    # vLLM 0.16.0 platforms/cuda.py check_and_update_config: SM 10.0 is in is_device_capability_family(100), the model
    # is dense and its qk_nope_head_dim is 128, so FLASHINFER_MLA; block 16 is neither 32 nor a multiple of 64, so it is
    # forced to 64 (not FLASHINFER_MLA's 32 of 0.18, nor CUTLASS_MLA's 128). Page: 61 layers × (512 + 64) × 2 B =
    # 70,272 B per token; × 64 tokens = 4,497,408 B per block.
    s = make_settings(tp=8, engine_version="0.16.0", max_model_len=8_192)
    p = build_plan(load_model("deepseek-ai/DeepSeek-V3"), get_gpu("B200"), s, with_roofline=False)
    assert (p.memory.block_size, p.memory.bytes_per_block) == (64, 4_497_408)


def test_printed_deepseek_r1_h200_concurrency_needs_those_block_sizes():
    # vme_startups.csv, DeepSeek-R1 FP8 at TP 8 on H200, max_model_len 10,000.
    # 0.16.0 (record 676eb1c0): 658,112 tokens = 10,283 blocks of 64; a request needs cdiv(10,000, 64) = 157 blocks:
    # 10,283 / 157 = 65.497 -> "65.50x" as printed (with 16-token blocks: 41,132 / 625 = 65.81x, not printed).
    assert printed_capacity_lines((0, 16, 0), 10_283, 64, 1, 10_000, 157) == [
        "GPU KV cache size: 658,112 tokens", "Maximum concurrency for 10,000 tokens per request: 65.50x"]
    # 0.18.0 (record 0c1eeef2): 654,048 tokens = 40,878 blocks of 16; cdiv(10,000, 16) = 625: 40,878 / 625 = 65.4048
    # -> "65.40x"; tokens printed as int(65.4048 x 10,000) = 654,048.
    assert printed_capacity_lines((0, 18, 0), 40_878, 16, 1, 10_000, 625) == [
        "GPU KV cache size: 654,048 tokens", "Maximum concurrency for 10,000 tokens per request: 65.40x"]


def test_hopper_fp8_kv_skips_flash_attn_mla_for_flashmla_64():
    # 0.18.0/0.19.0/0.26.0/0.27.0/0.33.0: FlashAttnMLABackend.supported_kv_cache_dtypes = auto, float16, bfloat16, so
    # the sm90 MLA priority list (FLASH_ATTN_MLA, FLASHMLA, ...) falls to FLASHMLA, whose kernels take [64] only.
    for ver in ((0, 18, 0), (0, 19, 0), (0, 33, 0)):
        for dtype in ("fp8", "fp8_e4m3"):
            block, why = hopper_mla_fp8_block(ver, "sm90", dtype)
            assert block == 64 and "FLASHMLA" in why and "FLASH_ATTN_MLA is skipped" in why
    assert hopper_mla_fp8_block((0, 33, 0), "sm90", "auto") is None  # bf16 KV: FLASH_ATTN_MLA's 16 stands
    assert hopper_mla_fp8_block((0, 17, 0), "sm90", "fp8") is None  # ≤0.17: 64 forced whatever the dtype
    assert hopper_mla_fp8_block((0, 33, 0), "sm100", "fp8") is None  # Blackwell: FLASHINFER_MLA takes fp8 (32)
    with pytest.raises(EngineRefusalError, match="no MLA attention backend on Hopper"):
        hopper_mla_fp8_block((0, 33, 0), "sm90", "fp8_e5m2")  # FLASHMLA and TRITON_MLA list fp8, fp8_e4m3 only


def test_deepseek_v3_h200_fp8_kv_plans_blocks_of_64():
    # fp8 page per token over 61 MLA layers: 61 × (512 + 64) × 1 B = 35,136 B; 64-token block: 64 × 35,136 =
    # 2,248,704 B (four times the 16-token 562,176 B), so 42.26 GiB gives a quarter of 80,708 blocks: 20,177.
    p = build_plan(load_model("deepseek-ai/DeepSeek-V3"), get_gpu("H200"), make_settings(tp=8, kv_cache_dtype="fp8"),
                   with_roofline=False)
    assert (p.memory.block_size, p.memory.bytes_per_block, p.memory.num_gpu_blocks) == (64, 2_248_704, 20_177)
