"""simulate_disagg(): hand-checked token times with the transfer delay, the link from a real plan, TTFT/ITL
independence, one record per request, determinism."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from kvledger.accounting.stepcost import FixedStepCost, StepShape
from kvledger.dynamics.disagg import Pool, simulate_disagg
from kvledger.dynamics.engine.config import EngineConfig
from kvledger.dynamics.engine.kv_transfer import (
    KVLink,
    KVTransfer,
    link_from_gpu,
    parse_link_bandwidth,
    transfer_from_plans,
)
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.dynamics.simulator import simulate
from kvledger.dynamics.workload.synthetic import Fixed, Uniform, synthetic_workload
from kvledger.errors import InputError, UnknownNameError

COST = FixedStepCost(per_step_s=0.010, per_token_s=0.001)  # a step = 10 ms + 1 ms per token
TINY = dict(num_gpu_blocks=64, max_model_len=64, block_size=4)
# 1,000 B per token over 1 MB/s: 1 ms of wire per prompt token, plus 5 ms per transfer
LINK = KVTransfer(KVLink("network", 1e6, 0.005), 1000.0)


def tiny(prefill_mnbt=8, decode=None, transfer=LINK, first_token="prefill", reqs=None, **kw):
    pre = Pool(EngineConfig(**TINY, max_num_batched_tokens=prefill_mnbt), COST)
    dec = Pool(EngineConfig(**(decode or TINY), max_num_batched_tokens=8), COST)
    reqs = reqs or [RequestSpec("A", 0.0, 10, 3), RequestSpec("B", 0.020, 4, 2)]
    return simulate_disagg(reqs, pre, dec, transfer, first_token=first_token, **kw)


def times(res):
    return {r.request_id: r.chunk_times_s.tolist() for r in res.records.records}


def test_hand_checked_token_times_with_the_transfer_delay():
    # Prefill replica (budget 8 tokens/step):
    #   step 1 [0, 0.018]: A's tokens 1-8 (10 ms + 8 × 1 ms)
    #   step 2 [0.018, 0.030]: A's tokens 9-10 → A's first token at 0.030. B (arrives 0.020) missed this step's start.
    #   step 3 [0.030, 0.044]: B's 4 prompt tokens → B's first token at 0.044
    # Transfers: A 10 tokens × 1,000 B ÷ 1 MB/s = 10 ms on the wire [0.030, 0.040] + 5 ms → ready 0.045;
    #            B 4 ms on the wire [0.044, 0.048] (the link is free again at 0.040) + 5 ms → ready 0.053.
    # Decode replica (idle, so its clock jumps to 0.045): step [0.045, 0.056]: A decodes token 2 (10 + 1 ms).
    # B is ready at 0.053, mid-step, so it joins the next step [0.056, 0.068]: A's token 3 and B's token 2 (10 + 2 ms).
    res = tiny()
    t = times(res)
    assert t["A"] == pytest.approx([0.030, 0.056, 0.068], abs=1e-12)
    assert t["B"] == pytest.approx([0.044, 0.068], abs=1e-12)
    a, b = res.records.records
    assert a.ttft_s == pytest.approx(0.030) and b.ttft_s == pytest.approx(0.024)  # B arrived at 0.020
    assert a.itls_s.tolist() == pytest.approx([0.026, 0.012])  # the first gap holds the 15 ms transfer
    assert a.tpot_s == pytest.approx((0.068 - 0.030) / 2)
    tr = res.transfer
    assert tr["num_transfers"] == 2 and tr["wire_s"]["mean"] == pytest.approx(0.007)  # (10 + 4) ms / 2
    assert tr["transfer_s"]["mean"] == pytest.approx(0.012) and tr["link_wait_s"]["mean"] == 0.0


def test_first_token_from_the_decode_side():
    # vLLM proxy style: the same transfers, but the decode replica computes the last prompt token itself.
    #   A ready 0.045: step [0.045, 0.056] gives A's token 1; B (ready 0.053) joins [0.056, 0.068]: A's token 2 and
    #   B's token 1; [0.068, 0.080]: A's token 3 and B's token 2.
    t = times(tiny(first_token="decode"))
    assert t["A"] == pytest.approx([0.056, 0.068, 0.080], abs=1e-12)
    assert t["B"] == pytest.approx([0.068, 0.080], abs=1e-12)


def test_transfers_from_one_prefill_replica_queue_on_its_link():
    # Two 4-token prompts finish in the same prefill step [0, 0.018] (8 tokens). Each needs 4 ms of wire:
    # queued: A [0.018, 0.022] → ready 0.027, B waits 4 ms, [0.022, 0.026] → ready 0.031;
    # unqueued: both ready at 0.027 and decode together.
    reqs = [RequestSpec("A", 0.0, 4, 2), RequestSpec("B", 0.0, 4, 2)]
    q = tiny(reqs=reqs)
    # decode: A alone [0.027, 0.038]; B (ready 0.031) in the next step with nothing else: [0.038, 0.049]
    assert times(q) == {"A": pytest.approx([0.018, 0.038]), "B": pytest.approx([0.018, 0.049])}
    assert q.transfer["link_wait_s"]["mean"] == pytest.approx(0.002)  # (0 + 4 ms) / 2
    free = tiny(reqs=reqs, transfer=replace(LINK, serialize=False))
    assert times(free) == {"A": pytest.approx([0.018, 0.039]), "B": pytest.approx([0.018, 0.039])}  # one step of 2


def test_one_output_token_ends_on_the_prefill_side_and_too_long_requests_are_rejected():
    reqs = [RequestSpec("one", 0.0, 6, 1), RequestSpec("long", 0.0, 40, 30)]  # 40 + 30 > max_model_len 64
    res = tiny(reqs=reqs)
    one, long_ = res.records.records
    assert one.chunk_times_s.tolist() == pytest.approx([0.016]) and one.ok  # 10 ms + 6 tokens; no transfer
    assert not long_.ok and "max_model_len=64" in long_.error
    assert res.transfer["num_transfers"] == 0


def test_decode_admission_needs_blocks_for_the_whole_prompt():
    # Decode pool of 4 usable blocks (16 tokens, so max_model_len 16): A (10 + 1 tokens → 3 blocks) runs; B (4 + 1 → 2
    # blocks) must wait
    # until A finishes at 0.067 (steps [0.045, 0.056], [0.056, 0.067]), then decodes alone [0.067, 0.078].
    res = tiny(decode=dict(TINY, num_gpu_blocks=5, max_model_len=16))
    assert times(res) == {"A": pytest.approx([0.030, 0.056, 0.067]), "B": pytest.approx([0.044, 0.078])}


def test_transfer_time_from_a_real_plan_llama_8b_h100_nvlink():
    from kvledger.accounting.plan import build_plan
    from kvledger.accounting.settings import make_settings
    from kvledger.analyses.serving.from_plan import engine_config_from_plan
    from kvledger.catalog.gpus import get_gpu
    from kvledger.catalog.models import load_model

    gpu = get_gpu("H100-SXM")
    plan = build_plan(load_model("meta-llama/Llama-3.1-8B"), gpu, make_settings(), with_advice=False)
    link = link_from_gpu(gpu, "nvlink", latency_s=0.001)
    assert link.bytes_per_s == 450e9  # 900 GB/s bidirectional per GPU (catalog) ÷ 2
    assert link_from_gpu(gpu, "pcie").bytes_per_s == 64e9  # PCIe Gen5 x16: 128 GB/s bidirectional ÷ 2
    tr = transfer_from_plans(plan, plan, link)
    # 2 × 32 layers × 8 KV heads × 128 × 2 B = 131,072 B/token; 1,000 tokens = 131,072,000 B ÷ 450 GB/s = 291.27 µs
    assert tr.bytes_for(1000) == 131_072_000
    assert tr.wire_s(1000) == pytest.approx(2.912711e-4, rel=1e-6)
    cfg, _ = engine_config_from_plan(plan)
    cost = plan.step_cost()
    res = simulate_disagg([RequestSpec("r", 0.0, 1000, 3)], Pool(cfg, cost), Pool(cfg, cost), tr)
    t1 = cost.step_time_s(StepShape(1000, 1, 1000, 1000 * 1001 / 2))  # the whole prompt in one step
    ready = t1 + 131_072_000 / 450e9 + 0.001
    t2 = ready + cost.step_time_s(StepShape(num_decode_seqs=1, decode_kv_tokens=1001))
    t3 = t2 + cost.step_time_s(StepShape(num_decode_seqs=1, decode_kv_tokens=1002))
    assert res.records.records[0].chunk_times_s.tolist() == pytest.approx([t1, t2, t3], rel=1e-12)
    assert res.transfer["transfer_s"]["mean"] == pytest.approx(2.912711e-4 + 0.001, rel=1e-6)


LOADED = dict(num_gpu_blocks=4000, max_model_len=256, block_size=4)


def loaded(prefill_mnbt=128, decode_mns=8):
    reqs = synthetic_workload(150, rate_per_s=15.0, prompt=Uniform(20, 100), output=Uniform(5, 40), seed=7)
    pre = Pool(EngineConfig(**LOADED, max_num_batched_tokens=prefill_mnbt), COST)
    dec = Pool(EngineConfig(**LOADED, max_num_batched_tokens=256, max_num_seqs=decode_mns), COST)
    return reqs, simulate_disagg(reqs, pre, dec, LINK)


def ttfts(res):
    return np.array([r.ttft_s for r in res.records.records])


def later_gaps(res):
    """Gaps after the second token: all of them decode steps on the decode replica."""
    return np.concatenate([r.itls_s[1:] for r in res.records.records if len(r.chunk_times_s) > 2])


def test_decode_knob_leaves_ttft_unchanged_and_moves_itl():
    _, a = loaded(decode_mns=8)
    _, b = loaded(decode_mns=2)
    assert np.array_equal(ttfts(a), ttfts(b))  # bit for bit: the first token comes from the prefill pool
    assert not np.array_equal(later_gaps(a), later_gaps(b))
    # a decode step holds at most max_num_seqs tokens: ≤ 10 ms + 2 × 1 ms with max_num_seqs 2, and it reaches it
    assert later_gaps(b).max() == pytest.approx(0.012) and later_gaps(a).max() > 0.012
    assert a.summary.num_preemptions == b.summary.num_preemptions == 0


def test_prefill_knob_moves_ttft_and_not_the_decode_steps():
    reqs, a = loaded(prefill_mnbt=128)
    _, b = loaded(prefill_mnbt=24)
    assert np.mean(ttfts(b)) > 1.2 * np.mean(ttfts(a))  # smaller prompt chunks: more steps per prompt
    bound = 0.010 + 0.001 * 8  # decode max_num_seqs 8: no decode step longer than 18 ms, whatever the prefill pool does
    assert later_gaps(a).max() <= bound + 1e-12 and later_gaps(b).max() <= bound + 1e-12
    # colocated, the same budget puts prompt chunks into decode steps: a gap of 10 ms + up to 128 tokens
    co = simulate(reqs, EngineConfig(**LOADED, max_num_batched_tokens=128, max_num_seqs=8), COST)
    assert max(r.itls_s.max() for r in co.records.records if len(r.chunk_times_s) > 1) > 0.05


def test_one_record_per_request_and_fast_forward_is_exact():
    reqs = synthetic_workload(200, rate_per_s=40.0, prompt=Uniform(10, 120), output=Uniform(1, 60), seed=3)
    tight = dict(num_gpu_blocks=60, max_model_len=192, block_size=4, max_num_batched_tokens=64, max_num_seqs=16)
    cost = FixedStepCost(0.005, 1e-5)
    for first in ("prefill", "decode"):
        runs = [simulate_disagg(reqs, Pool(EngineConfig(**LOADED), cost, 2), Pool(EngineConfig(**tight), cost, 2),
                                LINK, first_token=first, fast_forward=ff) for ff in (True, False)]
        assert runs[0].records.records == runs[1].records.records  # every token time bit for bit
        recs = runs[0].records.records
        assert [r.request_id for r in recs] == [s.request_id for s in reqs]
        for r, s in zip(recs, reqs):
            assert r.ok and r.arrival_s == s.arrival_s and r.num_output_tokens == s.num_output_tokens
            assert len(r.chunk_times_s) == s.num_output_tokens and r.first_token_s == r.chunk_times_s[0]
            assert r.finish_s == r.chunk_times_s[-1] and np.all(np.diff(r.chunk_times_s) > 0)
        assert runs[0].summary.num_preemptions > 0  # the tight decode pool recomputes, and still one record each
        assert runs[0].records.metadata.num_gpus == 4


def test_same_inputs_give_identical_json():
    reqs = synthetic_workload(60, rate_per_s=20.0, prompt=Fixed(30), output=Uniform(2, 20), seed=1)
    pool = Pool(EngineConfig(**LOADED), COST, 2, router="least_loaded")
    one = json.dumps(simulate_disagg(reqs, pool, pool, LINK).to_dict(), sort_keys=True)
    assert one == json.dumps(simulate_disagg(reqs, pool, pool, LINK).to_dict(), sort_keys=True)


def test_bad_input():
    from kvledger.catalog.gpus import get_gpu

    with pytest.raises(UnknownNameError):
        tiny(first_token="both")
    with pytest.raises(InputError, match="num_output_tokens"):
        tiny(reqs=[RequestSpec("z", 0.0, 4, 0)])
    with pytest.raises(InputError, match="no nvlink"):
        link_from_gpu(get_gpu("L40S"), "nvlink")
    assert parse_link_bandwidth("400Gbps") == parse_link_bandwidth("50GB/s") == 5e10  # bits ÷ 8
    assert parse_link_bandwidth("1GiB/s") == 2**30
    for bad in ("fast", "50", "50GB"):
        with pytest.raises(InputError, match="--link"):
            parse_link_bandwidth(bad)
    with pytest.raises(InputError):
        KVLink("network", 0.0)
    with pytest.raises(InputError):
        Pool(EngineConfig(**TINY), COST, 0)
