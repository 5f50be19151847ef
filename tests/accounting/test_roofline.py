"""Roofline: ridge points, where weight matmuls and whole decode steps turn compute-bound, and the StepCostModel
contract."""

from __future__ import annotations

import numpy as np
import pytest

from kvledger.accounting.kvcache import kv_ledger
from kvledger.accounting.plan import build_plan
from kvledger.accounting.roofline import RooflineStepCost
from kvledger.accounting.settings import make_settings
from kvledger.accounting.stepcost import StepCostModel, StepShape, decode_steps_by_loop
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model

H100 = get_gpu("h100")


def roof(name, gpu=H100, **kw):
    return build_plan(load_model(name), gpu, make_settings(**kw), with_advice=False).roofline


def test_llama8b_on_h100():
    r = roof("meta-llama/Llama-3.1-8B", contexts=(16, 8192))
    # ridge = 989.5e12 / 3.35e12 = 295.37 FLOP/B.
    assert r.ridge_flops_per_byte == pytest.approx(295.37, abs=0.01)
    # Per token: 2 × 7,504,924,672 FLOP (all matmul weights incl. lm_head, excluding the embedding table) against
    # 15,009,849,344 B of weights read once per step → intensity = tokens; crosses 295.37 at 296 tokens.
    assert r.weight_matmul_crossover_tokens == 296
    # Decode attention: 32 layers × 4 × 32 heads × 128 = 524,288 FLOP per (query, key) over 131,072 B of KV = 4.0
    # FLOP/B.
    assert r.decode_attention_intensity == pytest.approx(4.0)
    # Whole decode step at 16 tokens of context: b × (15,009,849,344 + 524,288 × 16) / 989.5e12 ≥
    # (15,009,849,344 + b × 131,072 × 16) / 3.35e12  ⇔  b ≥ 4.4805e-3 / 1.45516e-5 = 307.9 → 308.
    # At 8,192 tokens each sequence adds 1 GiB of KV reads for 4.3 GFLOP: never compute-bound.
    assert r.decode_compute_bound_batch == {16: 308, 8192: None}
    assert r.prefill["bound"] == "compute"
    # Batch 1 at 8,192 tokens: 1 GiB of KV read against 15,009,849,344 B of weights → KV share 6.68%.
    one = next(row for row in r.decode if row.batch == 1 and row.context_tokens == 8192)
    assert one.bound == "memory" and one.kv_bytes_share == pytest.approx(2**30 / (2**30 + 15_009_849_344), rel=1e-9)


def test_h200_ridge_and_fp8_weights():
    assert roof("meta-llama/Llama-3.1-8B", get_gpu("h200")).ridge_flops_per_byte == pytest.approx(206.15, abs=0.01)
    # FP8 weights with FP8 matmuls: ridge 1979/3.35 = 590.7 FLOP/B, 1 B per weight → crossover ≈ 590.7 / 2 ≈ 295;
    # the bf16 lm_head/embedding bytes push it slightly higher.
    r = roof("Qwen/Qwen3-32B-FP8", max_model_len=8192)
    assert r.compute_dtype == "fp8" and 295 <= r.weight_matmul_crossover_tokens <= 310


def test_moe_crosses_later_than_dense():
    # Each expert sees ≈ tokens × k / E: Mixtral (top-2 of 8) needs ≈ 4× the tokens, Qwen3-30B-A3B (8 of 128) ≈ 16×,
    # less the always-read attention and shared weights.
    # 87 GiB: TP 2
    assert 1000 < roof("mistralai/Mixtral-8x7B-v0.1", max_model_len=8192, tp=2).weight_matmul_crossover_tokens < 295 * 4
    assert 2500 < roof("Qwen/Qwen3-30B-A3B", max_model_len=8192).weight_matmul_crossover_tokens < 295 * 16


@pytest.mark.parametrize("name", ["meta-llama/Llama-3.1-8B", "openai/gpt-oss-20b", "Qwen/Qwen3-Next-80B-A3B-Thinking"])
def test_vectorised_decode_matches_the_per_step_cost(name):
    m = load_model(name)
    rc = RooflineStepCost(m, H100, kv_ledger(m), cpu_overhead_s=0.002)
    assert isinstance(rc, StepCostModel)
    fast = rc.decode_steps_s(37, 37 * 100, 300)
    assert np.allclose(fast, decode_steps_by_loop(rc, 37, 37 * 100, 300), rtol=1e-12)
    assert rc.step_time_s(StepShape()) == 0.0


def test_float32_says_its_matmuls_are_priced_at_the_bf16_peak():
    # --dtype float32: the catalog has no FP32 throughput, so the roofline prices the matmuls at the BF16 tensor peak
    # (989.5 TFLOP/s on an H100 SXM, ridge 295.37 FLOP/B as for bf16) and says that this under-states the step time.
    r = roof("meta-llama/Llama-3.1-8B", dtype="float32")
    assert r.ridge_flops_per_byte == pytest.approx(295.37, abs=0.01)
    assert any(n.startswith("dtype float32: matmuls are priced at the GPU's BF16 tensor-core peak") for n in r.notes)
    assert not any("float32" in n for n in roof("meta-llama/Llama-3.1-8B").notes)


def test_host_terms_add_a_fixed_and_a_per_sequence_time_to_each_step():
    # Llama-3.1-8B on one H100 at 0.7/0.8 of peak: a decode step of 10 sequences reading 20,000 KV tokens costs
    # base = time_s(costs) without host terms; with host_step_s = 1 ms and host_seq_s = 20 µs the step is
    # base + 1 ms + 10 × 20 µs = base + 1.2 ms, in series with the GPU (not hidden under async scheduling's overlap,
    # which only hides cpu_overhead_s). A prefill step of 1 sequence adds 1 ms + 20 µs.
    m, g = load_model("meta-llama/Llama-3.1-8B", allow_hub=False), get_gpu("H100")
    kv = build_plan(m, g, make_settings(), with_roofline=False, with_advice=False).kv
    plain = RooflineStepCost(m, g, kv, 1)
    host = RooflineStepCost(m, g, kv, 1, host_step_s=1e-3, host_seq_s=2e-5)
    dec = StepShape(0, 0, 0, 0.0, 10, 20_000)
    pre = StepShape(2_000, 1, 2_000, 2_001_000.0, 0, 0)
    assert host.costs(dec).host_s == pytest.approx(1.2e-3, abs=1e-15)
    assert host.step_time_s(dec) - plain.step_time_s(dec) == pytest.approx(1.2e-3, rel=1e-9)
    assert host.step_time_s(pre) - plain.step_time_s(pre) == pytest.approx(1.02e-3, rel=1e-9)
    over = RooflineStepCost(m, g, kv, 1, host_step_s=1e-3, host_seq_s=2e-5, cpu_overhead_s=1e-3, overlap_cpu=True)
    # the overlapped 1 ms CPU overhead hides under a GPU step of several ms; the host time does not
    assert over.step_time_s(dec) == host.step_time_s(dec)
    assert plain.costs(dec).host_s == 0.0


def test_the_plan_prefill_row_states_the_all_reduce_its_times_include():
    # fresh-user trial: Llama-3.1-70B at TP 4 on H100 printed "513.53 ms … 302.4 TFLOP …; lower bound 382.56 ms",
    # and 302.4 TFLOP at 70% of 989.5 TFLOP/s is 436.6 ms: the missing 76.98 ms is the TP all-reduces, in both times.
    # 302.4e12 / 989.5e12 = 305.6 ms + 76.98 = 382.6 ms; 302.4e12 / 692.65e12 = 436.6 ms + 76.98 = 513.5 ms.
    from kvledger.accounting.plan import build_plan

    m, g = load_model("meta-llama/Llama-3.1-70B", allow_hub=False), get_gpu("H100")
    pf = build_plan(m, g, make_settings(tp=4), with_advice=False).roofline.prefill
    assert pf["allreduce_s"] == pytest.approx(0.07698, abs=1e-5)
    assert pf["step_s_lower_bound"] == pytest.approx(pf["flops"] / 989.5e12 + pf["allreduce_s"], rel=1e-9)
    assert pf["step_s"] == pytest.approx(pf["flops"] / (0.7 * 989.5e12) + pf["allreduce_s"], rel=1e-9)


def test_moe_crossover_note_gives_the_figures_that_make_it():
    # DeepSeek-V3 (FP8 block-quantized) at TP 8 on an H200: ridge = 1,979e12 FP8 FLOP/s ÷ 4.8e12 B/s = 412.29 FLOP/B.
    # Matmul FLOPs per token per GPU: the 37,552,297,472 active params less the embedding and the untied lm_head
    # (129,280 × 7,168 = 926,679,040 each) = 35,698,939,392, × 2 ÷ TP 8 = 8,924,734,848, + the head's
    # 2 × 926,679,040 ÷ 8 = 231,669,760 → 9,156,404,608 FLOP (9.16 GFLOP).
    # At ~3,800 tokens a layer's 256 experts are all touched (1 − (1 − 8/256)^3800 ≈ 1), so the step reads every
    # weight on the GPU: the plan's 85.42 GB less the RoPE buffer (0.02 GB), the bf16 W_UK/W_UV copies (0.26 GB)
    # and the embedding table (not read whole; 0.23 GB) = 84.91 GB.
    # Crossover: 412.29 × 84.91e9 ÷ 9.1564e9 = 3,823.3 → the first whole batch, 3,824. The old parenthetical,
    # "ridge × bytes-per-weight / 2, × experts/top-k", gives 412.29 × 1 / 2 × 256/8 = 6,597, not the figure printed.
    r = roof("deepseek-ai/DeepSeek-V3", gpu=get_gpu("h200"), tp=8, contexts=(2048,))
    assert r.ridge_flops_per_byte == pytest.approx(412.29, abs=0.01)
    assert r.weight_matmul_crossover_tokens == 3824
    note = next(n for n in r.notes if n.startswith("weight matmuls turn compute-bound"))
    assert ("(ridge 412.3 FLOP/B × 84.91 GB of weights read per GPU ÷ 9.16 GFLOP of matmuls per token: at that batch "
            "the step touches every expert") in note
    assert "experts/top-k" not in note
    # a dense model keeps the dense rule: Llama-3.1-8B, 2 B per weight, 295.37 × 2 / 2 = 296 tokens
    dense = roof("meta-llama/Llama-3.1-8B", contexts=(2048,))
    assert "≈ 296 tokens per step (ridge × bytes-per-weight / 2)" in dense.notes[1]
