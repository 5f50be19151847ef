"""SGLang keeps w_kc / w_vc, copies of every MLA layer's kv_b_proj, beside the weight (sglang_mla_copies.py, read in
models/deepseek_v2.py ``post_load_weights`` of 0.4.0–0.5.23); bytes worked by hand from the models' configs."""

from __future__ import annotations

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.accounting.sglang_mla_copies import SGLANG_MLA_COPIES, sglang_mla_copy_bytes
from kvledger.accounting.sglang_rules import parse_sglang_version
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model

R1, LITE = "deepseek-ai/DeepSeek-R1", "deepseek-ai/DeepSeek-V2-Lite"
H200 = "nvidia_h200_sxm"


def _bytes(model: str, version: str, tp: int, gpu: str = H200, **kw) -> int:
    s = make_settings(engine="sglang", engine_version=version, tp=tp, **kw)
    return sglang_mla_copy_bytes(load_model(model), get_gpu(gpu), s, parse_sglang_version(version))[0]


def test_v2_lite_bf16_tp1_by_hand():
    # DeepSeek-V2-Lite: 16 heads, qk_nope 128, v 128, kv_lora_rank 512, bf16, 27 layers. At TP 1 w_kc is
    # 16 × 128 × 512 and w_vc 16 × 128 × 512 elements, × 2 B = 4,194,304 B a layer (the size of kv_b_proj),
    # 113,246,208 B (0.105 GiB) over 27 layers, in every release that keeps kv_b_proj (0.4.0.post1 on).
    for v in ("0.4.0.post1", "0.4.5.post3", "0.4.6.post5", "0.5.23"):
        assert _bytes(LITE, v, 1) == 113_246_208
    # 0.4.0 deletes kv_b_proj after copying it: no bytes more
    assert _bytes(LITE, "0.4.0", 1) == 0


def test_r1_fp8_tp8_by_release():
    # DeepSeek-R1: 128 heads, 16 a rank at TP 8, (128 + 128) × 512 elements a head. 0.4.5.post3 requantizes the
    # 128 × 128-block FP8 kv_b_proj per tensor and copies it in FP8: 16 × 256 × 512 × 1 B = 2,097,152 B a layer,
    # × 61 = 127,926,272 B (0.119 GiB).
    assert _bytes(R1, "0.4.5.post3", 8) == 127_926_272
    assert _bytes(R1, "0.4.6.post1", 8) == 127_926_272  # DeepGEMM's FP8 batched matmul on sm90: still FP8
    # 0.4.6.post2 on, CUDA: dequantized to bfloat16 (block_quant_dequant): × 2 B = 255,852,544 B (0.238 GiB)
    for v in ("0.4.6.post2", "0.4.7", "0.4.8", "0.5.23"):
        assert _bytes(R1, v, 8) == 255_852_544
    assert _bytes(R1, "0.5.23", 8, "nvidia_b200") == 255_852_544  # DeepGEMM's bmm never on Blackwell: bfloat16 too
    # ROCm: per-tensor FP8 requantization in every release
    assert _bytes(R1, "0.5.23", 8, "amd_mi300x") == 127_926_272


def test_dp_attention_holds_more_heads():
    # DP attention 8 × TP 8: each rank's attention is whole (attention TP 1): 128 × 256 × 512 × 2 B × 61
    assert _bytes(R1, "0.5.23", 8, data_parallel_size=8, enable_dp_attention=True) == 128 * 256 * 512 * 2 * 61


def test_plan_row_and_given_weights():
    s = make_settings(engine="sglang", engine_version="0.5.23", tp=8)
    mem = build_plan(load_model(R1), get_gpu(H200), s, with_roofline=False, with_advice=False).memory
    row = next(i for i in mem.deductions if i.name == SGLANG_MLA_COPIES)
    assert row.bytes == 255_852_544 and "post_load_weights" in row.source
    # --weights-memory is SGLang's own "mem usage", which holds the copies: no row
    s = make_settings(engine="sglang", engine_version="0.5.23", tp=8, weights_bytes=82 << 30)
    mem = build_plan(load_model(R1), get_gpu(H200), s, with_roofline=False, with_advice=False).memory
    assert SGLANG_MLA_COPIES not in {i.name for i in mem.deductions}
    # not an MLA model: no row
    s = make_settings(engine="sglang", tp=1)
    mem = build_plan(load_model("Qwen/Qwen3-8B"), get_gpu(H200), s, with_roofline=False, with_advice=False).memory
    assert SGLANG_MLA_COPIES not in {i.name for i in mem.deductions}
