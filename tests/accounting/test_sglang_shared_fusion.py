"""SGLang 0.4.5.post2–0.4.6.post5 clone DeepSeek-V3/R1's shared expert tp_size times into the fused MoE
(sglang_shared_fusion.py), checked on llm-ie-benchmarks' DeepSeek-R1 TP 8 start-ups on 8 × H200 (commit d709dba,
sgl/logs/sgl-0.4.5.post2-deepseek-r1.log and sgl-0.4.5.post3-deepseek-r1.log)."""

from __future__ import annotations

from kvledger.accounting import notes as N
from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.accounting.sglang_load import sglang_rank_tensors
from kvledger.accounting.sglang_mla_copies import SGLANG_MLA_COPIES
from kvledger.accounting.sglang_rules import parse_sglang_version
from kvledger.accounting.sglang_shared_fusion import (
    SGLANG_SHARED_COPIES,
    sglang_shared_copies,
    sglang_shared_fusion_bytes,
)
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model

GiB = 1 << 30
R1 = "deepseek-ai/DeepSeek-R1"


def _memory(version: str, gpu: str = "nvidia_h200_sxm", tp: int = 8, **kw):
    s = make_settings(engine="sglang", engine_version=version, tp=tp, **kw)
    return build_plan(load_model(R1), get_gpu(gpu), s, with_roofline=False, with_advice=False).memory


def test_r1_tp8_copies_bytes_by_hand():
    # One shared expert (moe_intermediate_size 2,048, hidden 7,168, FP8 e4m3 with fp32 scales per 128 × 128 block):
    # gate and up 2,048 × 7,168 × 1 B + 16 × 56 × 4 B each, down 7,168 × 2,048 × 1 B + 56 × 16 × 4 B
    # = 3 × 14,680,064 + 3 × 3,584 = 44,050,944 B a layer; 58 MoE layers (61 − first_k_dense_replace 3)
    # = 2,554,954,752 B. Eight copies each sliced 1/8 = one whole expert a GPU where the unfused MLP holds 1/8:
    # 7/8 × 2,554,954,752 = 2,235,585,408 B (2.082 GiB).
    extra, how = sglang_shared_fusion_bytes(load_model(R1), 8, 8)
    assert extra == 2_235_585_408
    assert "58 MoE layers" in how


def test_fused_layout_drops_the_shared_mlp_tensors():
    # Fused, the shared expert's four per-rank tensors a layer (gate_up values and scales, down values and scales)
    # join the experts' w13/w2: 58 × 4 = 232 fewer tensors, and the experts' tensors grow by 8 × 1/8 shared expert.
    m = load_model(R1)
    apart, fused = sglang_rank_tensors(m, 8), sglang_rank_tensors(m, 8, 8)
    assert len(apart) - len(fused) == 58 * 4
    assert sum(fused) - sum(apart) == 2_235_585_408


def test_llm_ie_r1_tp8_h200_load_and_pool():
    # Both logs print "Shared experts fusion optimization is enabled", fused-MoE configs for E=264 (256 + 8), and
    # on every rank "Load weight end. ... mem usage=81.64 GB" (GiB). Computed: weights 79.293 + RoPE 0.039 + segment
    # tails 0.119 + copies 2.082 + MLA w_kc/w_vc copies 0.119 (FP8 in 0.4.5.post3: sglang_mla_copies.py) + the
    # measured load overhead 0.065 = 81.717 GiB, +0.09 % (81.598 without the MLA copies; 79.516 without the shared
    # copies, the 2.1 GiB the pool was planned too large by).
    mem = _memory("0.4.5.post3")
    items = {i.name: i for i in mem.deductions}
    load = [items[k] for k in ("weights", N.SGLANG_ROPE_BUFFER, N.SGLANG_SEGMENT_TAILS, SGLANG_SHARED_COPIES,
                               SGLANG_MLA_COPIES, N.SGLANG_LOAD_EXTRA)]
    assert abs(sum(i.bytes for i in load) / GiB - 81.717) < 0.001
    assert sum(i.low_bytes for i in load) / GiB <= 81.64 <= sum(i.high_bytes for i in load) / GiB
    # 0.4.5.post3 (mem_fraction_static 0.9074083, "KV Cache is allocated. #tokens: 654280"): SGLang's
    # profile_max_num_token on the printed figures, (55.60 − 137.24 × (1 − 0.9074083)) GiB / 70,272 B = 655,355
    # tokens; the plan (free before load 137.29 GiB, load 81.717) gives 654,929, +0.10 % (656,750, +0.38 %, without
    # the MLA copies: 127,926,272 B / 70,272 B = 1,820.4 tokens fewer; 688,205, +5.2 %, without the shared copies).
    assert mem.pool_tokens == 654_929
    lo, hi = mem.ranges["pool_tokens"]
    assert lo <= 654_280 <= hi
    # 0.4.5.post2 (mem_fraction_static 0.81, max_total_num_tokens=448804): (55.60 − 137.24 × 0.19) GiB / 70,272 B
    # = 451,117 on the printed figures; the plan 450,587, +0.40 % (452,407, +0.80 %, without the MLA copies; 483,862,
    # +7.8 %, without the shared copies).
    old = _memory("0.4.5.post2")
    assert old.fraction == 0.81 and old.pool_tokens == 450_587
    lo, hi = old.ranges["pool_tokens"]
    assert lo <= 448_804 <= hi


def test_the_releases_and_gpus_that_fuse_tp_copies():
    m, h200, s = load_model(R1), get_gpu("nvidia_h200_sxm"), make_settings(engine="sglang", tp=8)

    def copies(version: str, gpu=h200, settings=s) -> int:
        return sglang_shared_copies(m, gpu, settings, parse_sglang_version(version))

    # default n_share_experts_fusion 0 is not None: 0.4.5 and 0.4.5.post1 keep the shared MLP apart
    assert copies("0.4.5") == copies("0.4.5.post1") == 0
    assert copies("0.4.5.post2") == copies("0.4.6") == copies("0.4.6.post5") == 8
    # 0.4.7 on (0.5.23 read) fuse one copy sliced over TP: the unfused bytes
    assert copies("0.4.7") == copies("0.5.23") == 0
    # capability below 9.0 (A100) keeps it apart; ROCm reports gfx9 as 9.x until _is_cuda joins the check (0.4.6.post4)
    assert copies("0.4.5.post3", get_gpu("nvidia_a100_80gb_sxm")) == 0
    assert copies("0.4.6.post3", get_gpu("amd_mi300x")) == 8
    assert copies("0.4.6.post4", get_gpu("amd_mi300x")) == 0
    assert copies("0.4.5.post3", settings=make_settings(engine="sglang", tp=1)) == 0
    assert sglang_shared_copies(load_model("deepseek-ai/DeepSeek-V2-Lite"), h200, s,
                                parse_sglang_version("0.4.5.post3")) == 0


def test_given_weights_take_no_copies_row():
    # --weights-memory is SGLang's own "mem usage", which already holds the copies
    mem = _memory("0.4.5.post3", weights_bytes=int(81.64 * GiB))
    assert SGLANG_SHARED_COPIES not in {i.name for i in mem.deductions}
