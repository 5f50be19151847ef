"""SGLang 0.5.23's expert parallelism in the plan and the step cost (accounting/sglang_ep.py), worked by hand from
DeepSeek-V3's config (bundled ``deepseek-ai--DeepSeek-V3.json``): hidden 7,168, moe_intermediate_size 2,048,
intermediate_size 18,432, 256 routed experts (top 8) and 1 shared expert, first_k_dense_replace 3 of 61 layers (58 MoE
layers), vocab 129,280, FP8 e4m3 weights with an fp32 scale per 128 × 128 block."""

from __future__ import annotations

import math

import pytest

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.accounting.stepcost import StepShape
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model
from kvledger.errors import InputError

H200 = get_gpu("h200-sxm")
V3 = load_model("deepseek-ai/DeepSeek-V3")

# One routed or shared expert projection (gate, up or down): 2,048 × 7,168 = 14,680,064 B of FP8 weights + its
# ⌈2,048/128⌉ × ⌈7,168/128⌉ = 16 × 56 blocks × 4 B = 3,584 B of scales = 14,683,648 B.
PROJ = 2048 * 7168 + 16 * 56 * 4
assert PROJ == 14_683_648
# SGLang --ep-size 8 at --tp 8 (FusedMoE: 256 / 8 = 32 whole experts on every rank, MoE TP 8 // 8 = 1):
# 58 layers × 32 experts × 3 projections × 14,683,648 B = 81,758,552,064 B, the same as a 1/8 slice of all 256.
ROUTED_EP8 = 58 * 32 * 3 * PROJ
assert ROUTED_EP8 == 81_758_552_064 == 58 * 256 * 3 * PROJ // 8
# The rest of one GPU's weights at TP 8 (SGLang's TP split, the shared expert a separate TP-sliced MLP under EP on
# CUDA: deepseek_v2.py shared_experts_fusion_disable_reason):
#   shared experts     58 × 3 × 14,683,648 / 8                                                   =    319,369,344
#   dense MLPs (0–2)   3 × 3 × (18,432 × 7,168 + 144 × 56 × 4 = 132,152,832) / 8                =    148,671,936
#   router gates       58 × (256 × 7,168 × 2 B + 256 × 2 B correction bias), whole               =    212,890,624
#   attention, ×61     q_a_proj 11,012,736 + kv_a_proj_with_mqa 4,129,888 (whole) + q_b_proj 37,757,952 / 8
#                      + kv_b_proj 16,781,312 / 8 + o_proj 117,469,184 / 8 + norms 3,072 + 1,024 + 2 × 14,336
#                      = 36,676,448 per layer                                                    =  2,237,263,328
#   embedding, LM head 2 × 129,280 × 7,168 × 2 B / 8                                            =    463,339,520
#   final norm         7,168 × 2 B                                                               =         14,336
REST = 319_369_344 + 148_671_936 + 212_890_624 + 2_237_263_328 + 463_339_520 + 14_336
WEIGHTS_TP8_EP8 = ROUTED_EP8 + REST
assert WEIGHTS_TP8_EP8 == 85_140_101_152


def _sglang(**kw):
    return build_plan(V3, H200, make_settings(engine="sglang", tp=8, **kw), with_advice=False)


def _weights(plan) -> float:
    return next(d.bytes for d in plan.memory.deductions if d.name == "weights")


def test_deepseek_v3_weights_per_gpu_at_tp8_ep8():
    ep = _sglang(ep_size=8)
    assert _weights(ep) == WEIGHTS_TP8_EP8
    assert _weights(_sglang()) == WEIGHTS_TP8_EP8  # SGLang's EP = TP holds as many bytes as its TP split
    assert "routed experts whole over EP 8: 32 of 256" in next(d.source for d in ep.memory.deductions
                                                                if d.name == "weights")
    assert any(n.startswith("--ep-size 8, SGLang 0.5.23: each MoE layer's 256 routed experts are whole, 32 on every "
                            "GPU") for n in ep.memory.notes)


def test_deepep_holds_the_shared_expert_whole_and_reserves_its_buffers():
    # --moe-a2a-backend deepep: DeepseekV2MLP(parallel_group="replicated") for the shared expert, so each GPU holds
    # it whole: + 58 × 3 × 14,683,648 × (1 − 1/8) = 2,235,585,408 B over the TP split.
    deepep = _sglang(ep_size=8, moe_a2a_backend="deepep")
    assert _weights(deepep) == WEIGHTS_TP8_EP8 + 58 * 3 * PROJ * 7 // 8 == 87_375_686_560
    # The default fraction on an H200 (143,771 MiB): reserve 512 + 1.5 × 8,192 + 2 × 512 (decode graphs, max_bs 512)
    # + 1,536 (MLA prefill graphs) + 8/8 × 1,024 = 16,384 MiB → round(127,387 / 143,771, 3) = 0.886 without DeepEP;
    # with it + 1,024 (prefill graphs) = 17,408 (over the 10 GiB floor) + 2,048 (decode graphs) = 19,456 MiB →
    # round(124,315 / 143,771, 3) = 0.865 (memory_hook.py reserve_for_graph_mb, reserve_for_deepep_a2a_mb).
    assert _sglang(ep_size=8).memory.fraction == 0.886
    assert deepep.memory.fraction == round((143771 - 19456) / 143771, 3) == 0.865
    # the backend sets ep_size to tp_size (overrides.py _a2a_ep_size): no --ep-size needed, the same plan
    assert _weights(_sglang(moe_a2a_backend="deepep")) == _weights(deepep)


def test_the_step_cost_waits_for_the_busiest_ep_rank():
    # One decode token routes k = 8 token-expert pairs; a rank holds 32 of 256 experts (share 1/8), all 8 ranks as
    # full: μ = 8 × 1/8 = 1 pair, σ = √(8 × 1/8 × 7/8) = 0.935414, the busiest of 8 ≈ μ + σ·√(2 ln 8) = 1 + 0.935414
    # × 2.039334 = 2.907622 pairs against the even share 8/8 = 1 (moe_terms.ep_imbalance). Under TP alone: 1.
    shape = StepShape(num_decode_seqs=1, decode_kv_tokens=1024)
    ep = _sglang(ep_size=8).step_cost()
    assert ep.ep == 8 and ep.expert_bytes == ROUTED_EP8
    c = ep.costs(shape)
    assert c.expert_time_factor == pytest.approx(1 + math.sqrt(8 * (1 / 8) * (7 / 8)) * math.sqrt(2 * math.log(8)))
    assert c.expert_time_factor == pytest.approx(2.907622, abs=1e-6)
    # the touched experts' bytes: 8 of 256 touched at one token, 81,758,552,064 × 8/256 = 2,554,954,752 B
    assert c.expert_bytes == pytest.approx(ROUTED_EP8 * 8 / 256)
    tp = _sglang().step_cost()
    assert tp.ep == 1 and tp.costs(shape).expert_time_factor == 1.0


@pytest.mark.parametrize(("kw", "start"), [
    (dict(ep_size=3), "--ep-size 3 with --tp 8: SGLang splits each MoE layer's tp_size GPUs into ep_size groups"),
    (dict(ep_size=4), "--ep-size 4 at --tp 8: SGLang takes it (MoE TP 2 inside each of 4 expert groups), but "
                      "kvledger prices SGLang's EP at ep_size = tp_size only"),
    (dict(moe_a2a_backend="mooncake"), "--moe-a2a-backend mooncake: kvledger plans SGLang's none"),
    (dict(ep_size=8, engine_version="0.5.9"), "--ep-size / --moe-a2a-backend are planned by SGLang 0.5.23's rules"),
])
def test_what_sglang_or_the_plan_does_not_take_is_refused(kw, start):
    with pytest.raises(InputError) as err:
        _sglang(**kw)
    assert str(err.value).startswith(start) and "\n" not in str(err.value)


def test_ep_size_is_sglangs_flag():
    with pytest.raises(InputError, match=r"^--ep-size is SGLang's flag; plan it with --engine sglang"):
        build_plan(V3, H200, make_settings(tp=8, ep_size=8), with_advice=False)


def test_a_tp_fix_carries_ep_size_equal_to_tp():
    # At TP 16 SGLang's --ep-size 8 would leave MoE TP 2 (not priced here), so the fix re-plans --tp 16 --ep-size 16:
    # 256 / 16 = 16 whole experts per GPU, and says so in its flags (before: "--tp 16" alone, re-planned at EP 8,
    # which the plan refuses, so the fix was dropped).
    p = build_plan(V3, H200, make_settings(engine="sglang", tp=8, ep_size=8))
    assert p.advice.options[0].action == "--tp 16 --ep-size 16 --nnodes 2"
