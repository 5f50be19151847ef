"""vLLM 0.10.2–0.14.1's MLA block on Blackwell-generation GPUs (accounting/vllm_mla_blackwell.py).

Read in platforms/cuda.py ``CudaPlatform.check_and_update_config``: 0.10.2, 0.11.0, 0.11.2 and 0.12.0 default MLA to
CUTLASS_MLA and force 128-token blocks under ``is_device_capability(100)``, SM 10.0 exactly; elsewhere the FlashMLA
branch forces 64 only where ``get_device_capability()[0] == 9`` (attention/ops/flashmla.py), so SM 10.3 (B300) and
12.0 (RTX PRO 6000) keep 16. 0.13.0–0.14.1 test ``is_device_capability_family(100)``: SM 10.3 gets 128 too.
0.15.0, 0.16.0, 0.17.1 first test the family with ``qk_nope_head_dim == 128`` for FLASHINFER_MLA, whose check
(``block_size != 32 and block_size % 64 != 0``) forces 16 to 64; other widths fall back to CUTLASS_MLA's 128. 0.18.0
and 0.18.1 force nothing: the selector's FLASHINFER_MLA takes 32 (kernel sizes [32, 64]) for ``qk_nope_head_dim`` 64 or
128, else CUTLASS_MLA's only size, 128.
"""

from __future__ import annotations

import pytest

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.accounting.vllm_mla_blackwell import blackwell_mla_block
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model


@pytest.mark.parametrize("ver,capability,block", [
    ((0, 10, 2), 100, 128), ((0, 11, 0), 100, 128), ((0, 12, 0), 100, 128),  # SM 10.0: CUTLASS_MLA
    ((0, 11, 0), 103, 16), ((0, 12, 0), 103, 16),  # SM 10.3 fails is_device_capability(100) and FlashMLA's major 9
    ((0, 13, 0), 103, 128), ((0, 14, 1), 103, 128),  # the family test admits 10.3
    ((0, 11, 0), 120, 16), ((0, 14, 1), 120, 16),  # SM 12.0: neither test, nor FlashMLA
])
def test_the_capability_tests_by_release(ver, capability, block):
    assert blackwell_mla_block(ver, capability)[0] == block


@pytest.mark.parametrize("ver,capability,nope,block", [
    ((0, 15, 0), 100, 128, 64), ((0, 16, 0), 103, 128, 64), ((0, 17, 1), 100, 128, 64),  # FLASHINFER_MLA: 16 → 64
    ((0, 15, 0), 100, 192, 128), ((0, 17, 1), 103, 64, 128),  # the kernel test fails: CUTLASS_MLA
    ((0, 14, 1), 100, 128, 128),  # before 0.15 the width is not tested: CUTLASS_MLA
    ((0, 16, 0), 120, 128, 16),  # SM 12.0 is outside the family and FlashMLA's SM 9.x
    ((0, 18, 0), 100, 192, 128), ((0, 18, 1), 103, 256, 128),  # 0.18 selector: FLASHINFER_MLA refuses, CUTLASS_MLA
    # 0.19.0 and 0.33.0: FLASHINFER_MLA admits 64, 128, 192 only (supports_combination), so a width of 256 or 96 falls
    # to CUTLASS_MLA, kernel block [128] (0.33.0's TOKENSPEED_MLA between them takes qk_nope_head_dim 128 only)
    ((0, 19, 0), 100, 256, 128), ((0, 33, 0), 103, 96, 128),
])
def test_the_qk_nope_head_dim_test_by_release(ver, capability, nope, block):
    assert blackwell_mla_block(ver, capability, nope)[0] == block


@pytest.mark.parametrize("ver,capability,nope", [((0, 10, 1), 100, 128), ((0, 19, 0), 100, 192), ((0, 12, 0), 90, 128),
                                                 ((0, 33, 0), 100, 192), ((0, 19, 0), 120, 256),
                                                 ((0, 12, 0), None, 128), ((0, 18, 0), 100, 128),
                                                 ((0, 18, 0), 100, 64), ((0, 18, 0), 120, 192)])
def test_outside_the_releases_and_gpus_read_it_says_nothing(ver, capability, nope):
    # 0.18 with a width FLASHINFER_MLA takes (32) or on SM 12.0 (16): vllm_rules.default_block_size decides.
    assert blackwell_mla_block(ver, capability, nope) is None


@pytest.mark.parametrize("gpu,version,block", [("b200", "0.11.0", 128), ("b300", "0.11.0", 16), ("b300", "0.13.0", 128),
                                               ("rtx-pro-6000", "0.12.0", 16), ("h100", "0.12.0", 64),
                                               ("b200", "0.16.0", 64), ("b300", "0.17.1", 64),  # qk_nope_head_dim 128
                                               ("rtx-pro-6000", "0.16.0", 16), ("b200", "0.18.0", 32)])
def test_the_plan_takes_the_block(gpu, version, block):
    s = make_settings(engine_version=version, max_model_len=8_192)
    p = build_plan(load_model("deepseek-ai/DeepSeek-V2-Lite"), get_gpu(gpu), s, with_roofline=False)
    assert p.memory.block_size == block


@pytest.mark.parametrize("version,block", [("0.14.1", 128), ("0.16.0", 128), ("0.17.1", 128), ("0.18.0", 128),
                                           ("0.19.0", 32)])
def test_glm_4_7_flash_qk_nope_192_takes_cutlass_mla_on_b200(tmp_path, version, block):
    # GLM-4.7-Flash (model_type glm4_moe_lite): transformers' Glm4MoeLiteConfig defaults (hf_config_defaults.json) give
    # qk_nope_head_dim 192, kv_lora_rank 512, qk_rope_head_dim 64, 47 layers. 0.15.0–0.17.1 want 128 for FLASHINFER_MLA
    # and 0.18 admits 64 or 128, so CUTLASS_MLA: 128; 0.19.0's FLASHINFER_MLA admits 192: its preferred 32. Block bytes:
    # 47 × (512 + 64) × 2 B = 54,144 B per token, × the block.
    config = '{"model_type": "glm4_moe_lite", "architectures": ["Glm4MoeLiteForCausalLM"]}'
    (tmp_path / "config.json").write_text(config)
    model = load_model(str(tmp_path))
    assert model.layers[0].qk_nope_head_dim == 192
    p = build_plan(model, get_gpu("b200"), make_settings(engine_version=version, max_model_len=8_192),
                   with_roofline=False)
    assert (p.memory.block_size, p.memory.bytes_per_block) == (block, 54_144 * block)
