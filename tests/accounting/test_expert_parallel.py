"""vLLM's --enable-expert-parallel with data parallel 1: whole experts over the TP ranks (the busiest rank's weights),
the step's expert work waiting for the busiest rank, and no all-to-all. Values worked by hand in the comments."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from kvledger.accounting.plan import build_plan
from kvledger.accounting.roofline import RooflineStepCost
from kvledger.accounting.roofline_breakdown import decode_shape, prefill_shape
from kvledger.accounting.settings import make_settings
from kvledger.accounting.tp_comm import link_bytes_per_s
from kvledger.accounting.weightmem import weight_bytes_per_gpu
from kvledger.catalog.expert_placement import expert_share, local_experts
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.loading import loaded_weights
from kvledger.catalog.models import load_model
from kvledger.catalog.modelspec import parse_config
from kvledger.errors import InputError
from kvledger.jsonable import to_jsonable
from kvledger.units import MiB

MIXTRAL = "mistralai/Mixtral-8x7B-v0.1"
ORACLE = Path(__file__).parents[2] / "benchmarks" / "data" / "oracle_configs"


def _qwen2_moe():
    """transformers' Qwen2MoeConfig defaults (Qwen1.5-MoE-A2.7B's shape): 60 routed experts, top-4, 24 layers."""
    return parse_config(json.loads((ORACLE / "qwen2_moe.json").read_text()), source="transformers default qwen2_moe")


def _plan(model, tp, ep, **kw):
    s = make_settings(tp=tp, max_model_len=8192, enable_expert_parallel=ep, **kw)
    return build_plan(model, get_gpu("H100"), s, with_advice=False)


def test_linear_placement_as_vllm_determine_expert_map():
    # fused_moe/layer.py determine_expert_map: E // ep each, the first E % ep ranks one more
    assert [local_experts(60, 8, r) for r in range(8)] == [8, 8, 8, 8, 7, 7, 7, 7]
    assert [local_experts(8, 4, r) for r in range(4)] == [2, 2, 2, 2]
    assert local_experts(60, 1) == 60


def test_mixtral_at_tp4_holds_the_same_expert_bytes_whole_or_sliced():
    # 8 experts over 4 ranks: 2 whole experts = 2/8 = 1/4 of the expert bytes, the same as a 1/4 slice of each
    m = load_model(MIXTRAL)
    assert expert_share(m, 4, 4) == 1 / 4
    assert loaded_weights(m, tp=4, ep=4).bytes == loaded_weights(m, tp=4).bytes
    off, on = _plan(m, 4, False), _plan(m, 4, True)
    # ... but the fused-MoE workspaces take the whole expert's intermediate (I = 14,336, not I/TP = 3,584; the latest
    # vLLM's kept workspaces, M × top-2 × (max(I_local, h) + max(2·I_local, h)) × 2 B at M = 8,192, h = 4,096):
    # 8,192 × 2 × ((14,336 + 28,672) − (4,096 + 7,168)) × 2 B = 1,040,187,392 B less KV, which at 16 tokens ×
    # 2 (K,V) × 32 layers × 2 KV heads per GPU × 128 × 2 B = 524,288 B a block is exactly 1,984 blocks
    assert off.memory.num_gpu_blocks - on.memory.num_gpu_blocks == 1_040_187_392 // 524_288 == 1_984
    assert any("EP 4 over the TP ranks" in n and "2 experts on each" in n for n in on.memory.notes)
    assert not any("expert-parallel" in n for n in off.memory.notes)


def test_sixty_experts_at_tp8_put_eight_whole_experts_on_rank_0():
    q = _qwen2_moe()
    assert (q.num_experts, q.experts_per_token) == (60, 4)
    # experts per layer: 60 × 3 × 2,048 × 1,408 = 519,045,120 weights × 2 B = 1,038,090,240 B; × 24 layers =
    # 24,914,165,760 B. TP 8 slices every expert: 1/8 = 7.5 experts' worth; EP 8 puts ceil(60/8) = 8 whole experts on
    # rank 0: × (8/60) / (1/8) = 16/15, i.e. + 24,914,165,760 × (8/60 − 1/8) = + 207,618,048 B
    experts = 24 * 60 * 3 * 2048 * 1408 * 2
    assert experts == 24_914_165_760
    tp_w, ep_w = weight_bytes_per_gpu(q, 8)[0], weight_bytes_per_gpu(q, 8, ep=8)[0]
    assert ep_w - tp_w == pytest.approx(experts * (8 / 60 - 1 / 8)) == pytest.approx(207_618_048)
    assert (ep_w - tp_w) / (experts / 8) == pytest.approx(16 / 15 - 1)
    # as vLLM allocates them (the caching allocator, loading.py): per layer the fused w13 is 2 × 1,408 × 2,048 × 2 B
    # per expert, w2 half that. TP 8: w13 60/8 × 5.5 MiB = 82.5 MiB (a 84 MiB segment, 1.5 MiB left: split off, so
    # 82.5 counted), w2 41.25 MiB (a 42 MiB segment, 0.75 MiB left: kept, 42 counted) = 124.5 MiB; EP 8: 8 × 5.5 = 88
    # and 8 × 2.75 = 44 MiB = 132 MiB. + 7.5 MiB × 24 layers = 180 MiB on rank 0
    tp_l, ep_l = loaded_weights(q, tp=8), loaded_weights(q, tp=8, ep=8)
    assert ep_l.bytes - tp_l.bytes == 180 * MiB
    assert "routed experts whole over EP 8: 8 of 60 on rank 0" in ep_l.how
    off, on = _plan(q, 8, False), _plan(q, 8, True)
    assert on.memory.available_kv_bytes < off.memory.available_kv_bytes
    assert any("8 experts on the first 4, 7 on the others" in n for n in on.memory.notes)


def _imbalance(T: int, k: int, g: int) -> float:
    """By hand: μ = T·k/g, σ² = T·k·(1/g)(1 − 1/g), busiest rank ≈ μ + σ·√(2 ln g)."""
    mu, sigma = T * k / g, math.sqrt(T * k * (1 / g) * (1 - 1 / g))
    return (mu + sigma * math.sqrt(2 * math.log(g))) / mu


def test_a_decode_step_waits_for_the_busiest_rank_and_pays_no_all_to_all():
    m = load_model(MIXTRAL)
    off, on = _plan(m, 4, False).step_cost(), _plan(m, 4, True).step_cost()
    assert (off.ep, on.ep) == (1, 4)
    # T = 64 decode tokens, top-2 of 8 over 4 ranks: 128 pairs, μ = 32, σ = √(128 · 1/4 · 3/4) = √24 = 4.899,
    # √(2 ln 4) = 1.6651: (32 + 8.1573) / 32 = 1.25492
    assert _imbalance(64, 2, 4) == pytest.approx(1.25492, abs=1e-5)
    c_off, c_on = off.costs(decode_shape(64, 1000)), on.costs(decode_shape(64, 1000))
    assert c_on.expert_time_factor == pytest.approx(1.25492, abs=1e-5)
    assert c_on.all_to_all_s == 0.0  # data parallel 1: no dispatch/combine, the TP all-reduce combines
    assert c_on.allreduce_s == c_off.allreduce_s
    # the mean rank's expert FLOPs are TP's: 32 layers × 8 × 3 × 4,096 × 14,336 = 45,097,156,608 expert weights,
    # × 2/8 per token, / 4 ranks = 2,818,572,288; × 2 FLOP × 64 tokens = 360,777,252,864 FLOP (within the same matmul
    # FLOPs as without EP). Each rank's expert bytes (2 whole of 8) are TP's 1/4 too: the same weight bytes read
    assert c_on.expert_flops == 360_777_252_864 and c_on.matmul_flops == c_off.matmul_flops
    assert c_on.weight_bytes == c_off.weight_bytes
    p = on.peak_flops * on.flops_fraction
    expert_s = c_on.expert_flops * c_on.expert_time_factor / p
    assert expert_s == pytest.approx(360_777_252_864 / p * 1.25492, rel=1e-5)  # 0.654 ms at 0.7 × 989 TFLOP/s
    # a compute-bound prefill chunk of 8,192 tokens: the routed experts are priced by the fused-MoE kernel term
    # (moe_kernel.py), 32 × t0 + the grouped GEMMs' time G = FLOPs_pad / (η(m)·P16), FLOPs_pad = 2·W·m (W the GPU's
    # expert weights, the same under TP 4 and EP 4, m the padded rows per expert), η(m) = η∞·m/(m + m½): so
    # G = 2·W·(m + m½)/(η∞·P16), and EP's busiest rank pays G_TP × (m_b + m½)/(m_TP + m½).
    # Rows: an expert's count c ~ Bin(8192, 2/8): mean 2,048, σ² = 1,536. TP 4 runs the tuned E=8,N=3584 config
    # (16-row blocks, moe_rows.tuned_block): m_TP = E[⌈c/16⌉·16] ≈ 2,048 + 7.5. EP 4 runs the default E=2,N=14336
    # (8,192 > 2 local experts → 64-row blocks): E[P] = 2,079.50 (≈ 2,048 + 31.5), Var[P] = 1,881.2 (≈ 1,536 + 64²/12);
    # a rank holds n₀ = 2 of the 8 experts, the busiest of 4 ranks ≈ 2 × 2,079.50 + √(2 × 1,881.2 × 6/7) × √(2 ln 4)
    # = 4,159.0 + 56.78 × 1.6651 = 4,253.55 rows, m_b = 2,126.78 per expert.
    from kvledger.accounting.moe_kernel import moe_kernel_fit
    from kvledger.accounting.moe_rows import busiest_rank_rows, padded_rows_moments

    big = prefill_shape(8192)
    c, c0 = on.costs(big), off.costs(big)
    mean, var = padded_rows_moments(8192, 2, 8, 2)
    assert (mean, var) == pytest.approx((2079.50, 1881.2), abs=0.05)
    m_b, m_tp = busiest_rank_rows(8192, 2, 8, 4), padded_rows_moments(8192, 2, 8, 0, 16)[0]
    assert m_b == pytest.approx(2126.78, abs=0.01) and m_tp == pytest.approx(2055.5, abs=0.1)
    # Each term is then × the tuned-or-default config factor vLLM's lookup gives (moe_config.py): TP 4 tuned (×1),
    # EP 4 default (×1.0315)
    f, f_off, f_on = moe_kernel_fit(), off.moe_config.factor, on.moe_config.factor
    assert (off.moe_config.tuned, on.moe_config.tuned, f_off) == (True, False, 1.0)
    gemm_s = c0.moe_kernel_s / f_off - 32 * f.floor_s
    on_s = f_on * (32 * f.floor_s + gemm_s * (m_b + f.half_tokens) / (m_tp + f.half_tokens))
    assert c.moe_kernel_s == pytest.approx(on_s, rel=1e-9)
    assert on.step_time_s(big) - off.step_time_s(big) == pytest.approx(on_s - c0.moe_kernel_s)


def test_the_all_to_all_is_charged_only_when_asked():
    m = load_model(MIXTRAL)
    plan = _plan(m, 4, True)
    rc = RooflineStepCost(plan.model, plan.gpu, plan.kv, 4, ep=4, all_to_all=True)
    # 2·T·k·hidden·2 B·(g − 1)/g = 2 · 64 · 2 · 4,096 · 2 · 3/4 = 1,572,864 B over the all-reduce's link
    assert rc.costs(decode_shape(64, 1000)).all_to_all_s == pytest.approx(1_572_864 / link_bytes_per_s(plan.gpu, None))
    assert RooflineStepCost(plan.model, plan.gpu, plan.kv, 4, ep=4).costs(decode_shape(64, 1000)).all_to_all_s == 0


def test_flag_off_leaves_the_settings_json_as_before_and_tp1_is_a_no_op():
    assert "enable_expert_parallel" not in to_jsonable(make_settings(tp=4))
    assert to_jsonable(make_settings(tp=4, enable_expert_parallel=True))["enable_expert_parallel"] is True
    m = load_model(MIXTRAL)
    one = _plan(m, 1, True)
    assert one.step_cost().ep == 1 and one.memory.num_gpu_blocks == _plan(m, 1, False).memory.num_gpu_blocks
    assert any("changes nothing at TP 1" in n for n in one.memory.notes)


def test_refused_for_a_dense_model_and_for_sglang():
    with pytest.raises(InputError, match="no routed experts"):
        _plan(load_model("Qwen/Qwen3-8B"), 2, True)
    # SGLang's own flag is --ep-size, now planned (accounting/sglang_ep.py): the refusal names it at the same TP
    with pytest.raises(InputError, match=r"^--enable-expert-parallel is vLLM's flag; SGLang's is --ep-size: pass "
                                         r"--ep-size 4 \(experts whole over the TP GPUs\) instead$"):
        _plan(load_model(MIXTRAL), 4, True, engine="sglang")


def test_the_busiest_rank_reads_more_expert_weights_at_small_batches():
    from kvledger.accounting.moe_terms import ep_imbalance, ep_read_imbalance

    # one decode token, top-8 of 128 experts over 8 ranks (16 each): p = 8/128 = 0.0625 of the experts touched; a
    # rank's 16 of the 128 hold a hypergeometric count: mean μ = 1, σ² = 16 · 0.0625 · 0.9375 · (128 − 16)/127 =
    # 0.826772, σ = 0.909270; the busiest of 8 ≈ μ + σ·√(2 ln 8) = 1 + 0.909270 · 2.03933 = 2.85430 experts' weights,
    # where TP reads every touched expert's 1/8 (1 expert's worth)
    assert ep_read_imbalance(1, 8, 128, 8) == pytest.approx(2.85430, abs=1e-5)
    # 64 tokens: p = 1 − (120/128)^64 = 0.983921, μ = 15.74273 ≥ 16 − σ·√(2 ln 8): the busiest reads all 16, ÷ μ
    assert ep_read_imbalance(64, 8, 128, 8) == pytest.approx(16 / 15.74273, abs=1e-5)
    assert ep_read_imbalance(64, 8, 128, 1) == 1.0
    # uneven placement (vLLM determine_expert_map: ⌈E/ep⌉ on the first E mod ep ranks): Mixtral's 8 experts over 16
    # ranks, one each on 8: T = 64, 128 pairs, a full rank's share 1/8: μ = 16, σ = √(128 · 1/8 · 7/8) = √14; the
    # busiest of 8 ≈ 16 + 3.74166 · 2.03933 = 23.6305 pairs against TP's even 128/16 = 8: 2.95381
    assert ep_imbalance(64, 2, 16, 8) == pytest.approx(2.95381, abs=1e-5)
    # 60 experts over 8 ranks, 8 on the first 4: top-4, T = 64, 256 pairs, share 8/60: μ = 34.1333,
    # σ = √(256 · 0.133333 · 0.866667) = 5.43895, √(2 ln 4) = 1.66511: 43.1898 / (256/8) = 1.34968
    assert ep_imbalance(64, 4, 8, 60) == pytest.approx(1.34968, abs=1e-5)
    assert ep_imbalance(64, 2, 4, 8) == ep_imbalance(64, 2, 4)  # divisible: the even-share formula


def test_expert_parallel_decode_costs_more_at_small_batches_and_the_same_at_large_ones():
    # Qwen3-235B-A22B at TP 8 on H200 (128 experts, top-8): a bandwidth-bound decode step reads the busiest rank's
    # touched experts, so EP costs more at a few sequences and nothing at many (every rank touches all 16 of its
    # experts); the step never shrinks as the batch grows
    m, gpu = load_model("Qwen/Qwen3-235B-A22B"), get_gpu("H200")
    off = build_plan(m, gpu, make_settings(tp=8, contexts=(2048,)), with_advice=False).step_cost()
    on = build_plan(m, gpu, make_settings(tp=8, contexts=(2048,), enable_expert_parallel=True),
                    with_advice=False).step_cost()
    steps = [(off.step_time_s(decode_shape(b, 2048 * b)), on.step_time_s(decode_shape(b, 2048 * b)))
             for b in (1, 2, 4, 8, 16, 256)]
    assert all(e > t * 1.15 for t, e in steps[:5])  # ≥ 15% dearer at 1–16 sequences
    assert steps[-1][1] == pytest.approx(steps[-1][0], rel=1e-3)  # the same at 256
    assert all(a[1] < b[1] for a, b in zip(steps, steps[1:]))  # monotone in the batch


def test_tp16_with_ep_over_two_nodes_runs_no_all_to_all_and_any_asked_for_crosses_the_nics():
    # vLLM 0.33 at TP 16 + EP, DP 1: use_all2all_kernels needs dp_size > 1, the TP all-reduce combines the experts'
    # outputs — priced over the two nodes' NICs (8 × 50 GB/s = 400 GB/s, +25.0 µs a call: test_tp_network.py); the
    # plan's roofline prices no all-to-all
    from kvledger.catalog.gpus import get_gpu

    m, gpu = load_model("deepseek-ai/DeepSeek-V3"), get_gpu("H100")
    plan = build_plan(m, gpu, make_settings(tp=16, enable_expert_parallel=True), with_advice=False)
    rc = plan.step_cost()
    assert rc.ep == 16 and rc.link_bytes_per_s == 400e9 and rc.allreduce_span.nodes == 2
    assert rc.costs(decode_shape(64, 1000)).all_to_all_s == 0.0
    # asked for (all_to_all=True) over the same two nodes: 2·T·k·hidden·2 B·(g − 1)/g = 2 · 64 · 8 · 7,168 · 2 · 15/16
    # = 13,762,560 B over the TP group's 400 GB/s NIC-bound link (not NVLink's 450 GB/s): 34.4064 µs
    forced = RooflineStepCost(plan.model, gpu, plan.kv, 16, ep=16, all_to_all=True, tp_nodes=2)
    assert forced.costs(decode_shape(64, 1000)).all_to_all_s == pytest.approx(13_762_560 / 400e9)
