"""The prefill/decode split of step time (accounting/step_split.py): the rule by hand, the vectorised roofline against
the scalar one, the buffered sum against a plain one, and a small simulation whose steps are priced by hand."""

from __future__ import annotations

import numpy as np
import pytest

from kvledger.accounting.step_split import PrefillTime, gpu_time_split, prefill_part_s
from kvledger.accounting.stepcost import FixedStepCost, step_pricer
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.dynamics.simulator import EngineConfig, simulate

FIXED = FixedStepCost(per_step_s=0.01, per_token_s=0.001)


def test_mixed_step_split_by_hand():
    # a 100-token chunk beside 10 decodes: the step costs 0.01 + 110 × 0.001 = 0.12 s; alone the chunk costs
    # 0.01 + 0.100 = 0.11 s and the decodes 0.01 + 0.010 = 0.02 s → prefill part 0.12 × 0.11 / 0.13 = 0.1015385 s
    price = step_pricer(FIXED)
    assert price(100, 1, 100, 5050.0, 10, 500) == pytest.approx(0.12)
    assert prefill_part_s(price, 100, 1, 100, 5050.0, 10, 500, 0.12) == pytest.approx(0.12 * 0.11 / 0.13, rel=1e-12)
    assert prefill_part_s(price, 100, 1, 100, 5050.0, 0, 0, 0.11) == 0.11  # pure prefill: all of it
    assert prefill_part_s(price, 0, 0, 0, 0.0, 10, 500, 0.02) == 0.0  # pure decode: none of it


def test_gpu_time_split_weights_replicas_by_gpus():
    # prefill pool 1 replica × 2 GPUs busy 3 s (all prefill); decode pool 1 × 4 GPUs busy 5 s, 1 s of it prefill
    # → prefill GPU-s = 2·3 + 4·1 = 10 of 2·3 + 4·5 = 26 → share 10/26
    d = gpu_time_split([(3.0, 3.0, 2), (1.0, 5.0, 4)], "fixed")
    assert (d["prefill_gpu_s"], d["gpu_s"], d["decode_gpu_s"]) == (10.0, 26.0, 16.0)
    assert d["prefill_share"] == pytest.approx(10 / 26)
    assert gpu_time_split([(0.0, 0.0, 1)], "fixed")["prefill_share"] == 0.0


def _llama_roofline(tp=1, model="meta-llama/Llama-3.1-8B", cpu=None):
    from kvledger.accounting.plan import build_plan
    from kvledger.accounting.settings import PlanSettings
    from kvledger.catalog.gpus import get_gpu
    from kvledger.catalog.models import load_model

    p = build_plan(load_model(model, allow_hub=False), get_gpu("H100-SXM"), PlanSettings(tp=tp), with_advice=False)
    return p.step_cost(cpu_overhead_s=cpu)


def test_roofline_mixed_step_split_by_hand():
    # Llama-3.1-8B on H100 (989.5 TFLOP/s bf16 × 0.7, 3.35 TB/s × 0.8): a 2048-token chunk from scratch beside 64
    # decodes of 1000 KV tokens each. Matmul FLOPs: prefill 2 × 6,979,588,096 × 2048 + LM head 1,050,673,152 × 1
    # = 28,589,443,514,368; decode 2 × 6,979,588,096 × 64 + 1,050,673,152 × 64 = 960,630,358,016. Matmul term
    # max(29.55e12 / 692.65e12 = 42.663 ms, 15.01 GB weights / 2.68 TB/s = 5.601 ms) = 42.663 ms, compute-bound:
    # prefill's part = 28.589e12 / 692.65e12 = 41.2755 ms. Attention: 1.1336e12 FLOPs / 692.65e12 = 1.637 ms <
    # KV bytes 131,072 × (2048 + 64,000) = 8.657 GB / 2.68 TB/s = 3.2302 ms, bytes-bound: prefill's part
    # 3.2302 × 2048 × 131,072 / 8.657e9 = 0.1002 ms. Step 45.8928 ms; prefill 41.3757 ms = 0.90158 of it.
    from kvledger.accounting.step_split import roofline_prefill_fraction_one
    from kvledger.accounting.stepcost import StepShape

    rc = _llama_roofline()
    shape = StepShape(2048, 1, 2048, 2048 * 2049 / 2, 64, 64_000)
    assert rc.step_time_s(shape) == pytest.approx(45.8928e-3, rel=1e-5)
    assert roofline_prefill_fraction_one(rc, shape) == pytest.approx(41.3757 / 45.8928, rel=1e-5)


@pytest.mark.parametrize("model,tp,cpu", [("meta-llama/Llama-3.1-8B", 1, None), ("meta-llama/Llama-3.1-8B", 2, 0.004),
                                          ("Qwen/Qwen3-30B-A3B", 1, None)])
def test_vectorised_roofline_split_is_the_scalar_one(model, tp, cpu):
    from kvledger.accounting.step_split import roofline_prefill_fraction, roofline_prefill_fraction_one
    from kvledger.accounting.stepcost import StepShape

    rc = _llama_roofline(tp, model=model, cpu=cpu)
    rng = np.random.default_rng(7)
    n = 200
    pf_seqs = rng.integers(1, 4, n)
    pf_tok = rng.integers(1, 4096, n)
    ctx = rng.integers(0, 2048, n)
    pf_kv, pairs = pf_tok + ctx, pf_tok * ctx + pf_tok * (pf_tok + 1) / 2.0
    dec = rng.integers(0, 300, n)
    dec_kv = dec * rng.integers(1, 4000, n)
    got = roofline_prefill_fraction(rc, *(a.astype(np.float64) for a in (pf_tok, pf_seqs, pf_kv, pairs, dec, dec_kv)))
    want = [roofline_prefill_fraction_one(rc, StepShape(int(a), int(b), int(c), float(d), int(e), int(f)))
            for a, b, c, d, e, f in zip(pf_tok, pf_seqs, pf_kv, pairs, dec, dec_kv)]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=0.0)
    assert ((got > 0) & (got <= 1)).all() and (got[dec == 0] == 1).all()


def test_buffered_sum_is_the_sum_of_step_parts():
    # more mixed steps than one buffer holds: the folded (numpy) parts add up to the scalar rule's parts
    from kvledger.accounting.step_split import roofline_prefill_fraction_one
    from kvledger.accounting.stepcost import StepShape

    rc = _llama_roofline()
    pt, price, want = PrefillTime(rc), step_pricer(rc), 0.0
    for i in range(PrefillTime.CHUNK_STEPS + 300):
        shape = (512 + i % 700, 1, 512 + i % 700, (512 + i % 700) * (513 + i % 700) / 2, 1 + i % 90, 900 * (1 + i % 90))
        dur = price(*shape)
        pt.add(*shape, dur)
        want += dur * roofline_prefill_fraction_one(rc, StepShape(*shape))
    pt.add(2048, 1, 2048, 2048 * 2049 / 2, 0, 0, 0.05)  # a pure-prefill step counts whole
    assert pt.total_s == pytest.approx(want + 0.05, rel=1e-12)


@pytest.mark.parametrize("fast_forward", [True, False])
def test_small_simulation_priced_by_hand(fast_forward):
    # FixedStepCost 10 ms + 1 ms per token. A (100-token prompt, 3 outputs) at 0 s; B (50 tokens, 2 outputs) at 0.05 s.
    # step 1 [A 100]: 0.01 + 0.100 = 0.110 s, all prefill.
    # step 2 [A decode, B 50]: 0.01 + 0.051 = 0.061 s; alone B's chunk 0.060 s, A's decode 0.011 s
    #   → prefill part 0.061 × 0.060 / 0.071 = 0.0515493 s.
    # step 3 [A decode, B decode]: 0.012 s, all decode. Busy 0.183 s; prefill 0.1615493 s → share 0.882783.
    reqs = [RequestSpec("A", 0.0, 100, 3), RequestSpec("B", 0.05, 50, 2)]
    cfg = EngineConfig(num_gpu_blocks=64, max_model_len=256, block_size=16, max_num_batched_tokens=512, max_num_seqs=8)
    res = simulate(reqs, cfg, FIXED, fast_forward=fast_forward)
    split = res.summary.gpu_time_split
    pre = 0.110 + 0.061 * 0.060 / 0.071
    assert split["gpu_s"] == pytest.approx(0.183, rel=1e-12)
    assert split["prefill_gpu_s"] == pytest.approx(pre, rel=1e-12)
    assert split["prefill_share"] == pytest.approx(pre / 0.183, rel=1e-12)
    assert res.records.metadata.extra["gpu_time_split"] == split  # what the cost ledger reads


def _poisson_run(n=300, rate=12.0, seed=3):
    rng = np.random.default_rng(seed)
    t = np.cumsum(rng.exponential(1 / rate, n))
    return [RequestSpec(str(i), float(t[i]), int(rng.integers(200, 3000)), int(rng.integers(20,
        300))) for i in range(n)]


def test_fast_path_and_step_by_step_attribute_the_same_time():
    # the arrival stretches (open_stretch.py) and the mixed-step path (fast_path.admit_step) feed the same buffer as
    # the general step, in step order: the totals agree with the step-by-step run's
    from kvledger.accounting.plan import build_plan
    from kvledger.analyses.serving.from_plan import engine_config_from_plan
    from kvledger.catalog.gpus import get_gpu
    from kvledger.catalog.models import load_model

    p = build_plan(load_model("meta-llama/Llama-3.1-8B", allow_hub=False), get_gpu("H100-SXM"), with_advice=False)
    cfg, _ = engine_config_from_plan(p)
    reqs = _poisson_run()
    a = simulate(reqs, cfg, p.step_cost(), fast_forward=True, record_token_times=False).summary.gpu_time_split
    b = simulate(reqs, cfg, p.step_cost(), fast_forward=False, record_token_times=False).summary.gpu_time_split
    assert a["prefill_gpu_s"] == pytest.approx(b["prefill_gpu_s"], rel=1e-12)
    assert a["gpu_s"] == pytest.approx(b["gpu_s"], rel=1e-12)
    # the prompts' GPU time against the roofline's prefill rate: Llama-3.1-8B has 8.03e9 parameters, 6.98e9 of them
    # in matmuls besides the embedding and LM head; H100 bf16 989.5 TFLOP/s × 0.7 achievable
    # → 2 × 6.98e9 FLOPs per token ÷ 6.93e14 FLOP/s = 49.6k prompt tokens per GPU-second at most: a prompt is charged
    # at least its matmul FLOPs, plus its attention and LM head. Prompts of 200–3000 tokens: attention adds up to
    # ~20 %, so the rate lies in 0.7×–1.0× of that; the occupancy split the ledger used before implied ~30× the
    # roofline (kvledger cost on azure-conv: 1.35M tok/s).
    prompt_tokens = sum(r.num_prompt_tokens for r in reqs)
    rate = prompt_tokens / a["prefill_gpu_s"]
    ideal = 989.5e12 * 0.7 / (2 * 6979588096)
    assert 0.7 * ideal < rate <= ideal, (rate, ideal)


@pytest.mark.parametrize("gpus", [1, 2])
def test_disaggregated_pools_weighted_by_their_gpus(gpus):
    # tests/dynamics/test_disagg.py's hand-checked run: the prefill replica's steps take 0.018 + 0.012 + 0.014 s
    # (all prefill), the decode replica's 0.011 + 0.012 s (all decode: the first token came from the prefill side).
    # With the prefill pool on 2 GPUs per replica its GPU-s double: 0.088 of 0.111.
    from kvledger.dynamics.disagg import Pool, simulate_disagg
    from kvledger.dynamics.engine.kv_transfer import KVLink, KVTransfer

    tiny = dict(num_gpu_blocks=64, max_model_len=64, block_size=4, max_num_batched_tokens=8)
    res = simulate_disagg([RequestSpec("A", 0.0, 10, 3), RequestSpec("B", 0.020, 4, 2)],
                          Pool(EngineConfig(**tiny), FIXED, gpus_per_replica=gpus), Pool(EngineConfig(**tiny), FIXED),
                          KVTransfer(KVLink("network", 1e6, 0.005), 1000.0))
    split = res.summary.gpu_time_split
    assert split["prefill_gpu_s"] == pytest.approx(0.044 * gpus, rel=1e-12)
    assert split["gpu_s"] == pytest.approx(0.044 * gpus + 0.023, rel=1e-12)
    assert res.records.metadata.extra["gpu_time_split"] == split


def _random_shapes(n=300, seed=11):
    rng = np.random.default_rng(seed)
    pf_seqs = rng.integers(0, 3, n)
    pf_tok = np.where(pf_seqs > 0, rng.integers(1, 2048, n), 0)
    ctx = np.where(pf_seqs > 0, rng.integers(0, 1024, n), 0)
    dec = rng.integers(0, 200, n)
    dec[0] = pf_seqs[0] = pf_tok[0] = 0  # one empty step
    return pf_tok, pf_seqs, pf_tok + ctx, pf_tok * ctx + pf_tok * (pf_tok + 1) / 2.0, dec, dec * rng.integers(1, 2000,
        n)


def test_vectorised_prices_of_the_calibrated_models_are_step_time_s():
    from kvledger.accounting.calibrated import get_calibrated_cost
    from kvledger.accounting.fitted_cost import LinearStepCost
    from kvledger.accounting.stepcost import StepShape

    models = [get_calibrated_cost("facebook/opt-13b", source="distserve-vllm"),
              LinearStepCost(0.004, 2e-5, 1e-9, 3e-5, 2e-8, cpu_overhead_s=0.003),
              LinearStepCost(0.004, 2e-5, 1e-9, 3e-5, 2e-8, cpu_overhead_s=0.006, overlap=True)]
    cols = _random_shapes()
    for m in models:
        got = m.step_times_of(*(c.astype(np.float64) for c in cols))
        want = [m.step_time_s(StepShape(int(a), int(b), int(c), float(d), int(e), int(f))) for a, b, c, d, e,
                f in zip(*cols)]
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
        # and the buffered split equals the scalar rule step by step
        pt, price, total = PrefillTime(m), step_pricer(m), 0.0
        for a, b, c, d, e, f, dur in zip(*cols, want):
            if b:
                pt.add(int(a), int(b), int(c), float(d), int(e), int(f), dur)
                total += prefill_part_s(price, int(a), int(b), int(c), float(d), int(e), int(f), dur)
        assert pt.total_s == pytest.approx(total, rel=1e-12)


def test_the_split_with_the_measured_curve_and_layer_kernels():
    # the default pricing on an H100 (the GEMM curve, the layers' kernels): the matmul term is the step's own,
    # max(F / (peak × e(T)), W / BW), and the kernels split by tokens as the all-reduce does. A 2048-token chunk beside
    # 64 decodes: T = 2112, e(2112) from the curve; prefill's part = mm × F_prefill / F + attention × its KV share +
    # kernels × 2048 / 2112; the vectorised rule gives the scalar one's figures
    from kvledger.accounting.step_split import roofline_prefill_fraction, roofline_prefill_fraction_one
    from kvledger.accounting.stepcost import StepShape
    from kvledger.analyses.serving.sim_setup import SimRequestArgs, prepare

    rc = prepare(SimRequestArgs(model="meta-llama/Llama-3.1-8B", gpu="H100", num_requests=5, gpu_profile="none",
                                max_model_len=8192)).cost
    assert rc.gemm_curve is not None and rc.layer_kernels is not None
    shape = StepShape(2048, 1, 2048, 2048 * 2049 / 2, 64, 64_000)
    c = rc.costs(shape)
    p, b = rc.peak_flops * rc.flops_fraction, rc.bw * rc.bandwidth_fraction
    mm = max(c.matmul_flops / p / rc.matmul_efficiency(2112), c.weight_bytes / b)
    pre_f = 2 * rc.matmul_params * 2048 + rc.head_flops_per_seq
    at = rc.attention_s(c)  # bytes-bound here: its prefill part by KV bytes
    pre = mm * pre_f / c.matmul_flops + at * c.prefill_kv_bytes / c.kv_bytes + c.layer_kernels_s * 2048 / 2112
    total = mm + at + c.layer_kernels_s
    assert total == pytest.approx(rc.step_time_s(shape), rel=1e-12)
    assert roofline_prefill_fraction_one(rc, shape) == pytest.approx(pre / total, rel=1e-12)
    rng = np.random.default_rng(3)
    n = 100
    pf_tok, dec = rng.integers(1, 4096, n), rng.integers(0, 300, n)
    pf_seqs, ctx = np.ones(n, dtype=int), rng.integers(0, 2048, n)
    pf_kv, pairs, dec_kv = pf_tok + ctx, pf_tok * ctx + pf_tok * (pf_tok + 1) / 2.0, dec * rng.integers(1, 4000, n)
    got = roofline_prefill_fraction(rc, *(a.astype(np.float64) for a in (pf_tok, pf_seqs, pf_kv, pairs, dec, dec_kv)))
    want = [roofline_prefill_fraction_one(rc, StepShape(int(a), int(s), int(k), float(q), int(d), int(v)))
            for a, s, k, q, d, v in zip(pf_tok, pf_seqs, pf_kv, pairs, dec, dec_kv)]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=0.0)
