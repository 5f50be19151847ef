"""simulate(): determinism, fast-forward = step-by-step, bad input, closed loop, replicas and routers, exports,
summary."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

from kvledger.accounting.stepcost import FixedStepCost
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.dynamics.engine.swa_step import StepBlockRule
from kvledger.dynamics.outputs.metrics import percentiles
from kvledger.dynamics.simulator import EngineConfig, simulate
from kvledger.dynamics.workload.closed_loop import ClosedLoop
from kvledger.errors import InputError, UnknownNameError

STEP = FixedStepCost(per_step_s=0.01)


def random_workload(n=300, seed=0, groups=4):
    rng = np.random.default_rng(seed)
    t, out = 0.0, []
    for i in range(n):
        t += float(rng.exponential(0.02))
        nseg = int(rng.integers(0, 4))
        g = int(rng.integers(0, groups))
        out.append(RequestSpec(f"q{i}", t, nseg * 32 + int(rng.integers(1, 100)), int(rng.integers(1, 120)),
                               tuple(g * 100 + j for j in range(nseg)), 32))
    return out


# one full and one sliding group (W = 40 tokens), block 16, in-flight 2 × 256 tokens
_SWA = StepBlockRule((("full", 16, 0), ("sliding_window", 16, 40)), 512, 512)

CONFIGS = {
    "vllm-roomy": dict(num_gpu_blocks=2000, block_size=16, max_model_len=512),
    "rejects": dict(num_gpu_blocks=2000, block_size=16, max_model_len=160, max_num_seqs=8),
    "vllm-tight": dict(num_gpu_blocks=60, block_size=16, max_model_len=512, max_num_batched_tokens=256),
    "sglang-tight": dict(num_gpu_blocks=60, block_size=16, max_model_len=512, max_num_batched_tokens=256,
                         prefix_caching_policy="sglang"),
    "lpm": dict(num_gpu_blocks=60, block_size=16, max_model_len=512, scheduling_policy="lpm"),
    "static": dict(num_gpu_blocks=200, block_size=16, max_model_len=512, batching="static", max_num_seqs=16),
    "contiguous": dict(num_gpu_blocks=200, block_size=16, max_model_len=512, kv_allocation="contiguous",
                       enable_prefix_caching=False),
    "sliding": dict(num_gpu_blocks=60, block_size=16, max_model_len=512, enable_prefix_caching=False,
                    blocks_for_tokens=lambda n: -(-n // 16) + min(-(-n // 16), 3)),
    # vLLM V0's prefill-first rule: preemption-heavy, padded prompt batches, and a hybrid layout
    "v0-tight": dict(num_gpu_blocks=60, block_size=16, max_model_len=512, max_num_batched_tokens=512,
                     batching="vllm_v0", enable_chunked_prefill=False, enable_prefix_caching=False),
    "v0-padded": dict(num_gpu_blocks=100, block_size=16, max_model_len=512, max_num_batched_tokens=1024,
                      max_paddings=64, max_num_seqs=24, batching="vllm_v0", enable_chunked_prefill=False,
                      enable_prefix_caching=False),
    "v0-sliding": dict(num_gpu_blocks=60, block_size=16, max_model_len=512, max_num_batched_tokens=512,
                       batching="vllm_v0", enable_chunked_prefill=False, enable_prefix_caching=False,
                       blocks_for_tokens=lambda n: -(-n // 16) + min(-(-n // 16), 3)),
    # vLLM v1's async scheduling (batch queue of two): roomy, preemption-heavy, radix cache, seat-bound, capped
    "async-roomy": dict(num_gpu_blocks=2000, block_size=16, max_model_len=512, async_scheduling=True),
    "async-tight": dict(num_gpu_blocks=60, block_size=16, max_model_len=512, max_num_batched_tokens=256,
                        async_scheduling=True),
    "async-sglang": dict(num_gpu_blocks=60, block_size=16, max_model_len=512, max_num_batched_tokens=256,
                         prefix_caching_policy="sglang", async_scheduling=True),
    "async-seats": dict(num_gpu_blocks=2000, block_size=16, max_model_len=160, max_num_seqs=8,
                        async_scheduling=True),
    # vLLM's per-step sliding-window rule (a chunk holds its blocks for one step), sync and async; 65 usable blocks:
    # vLLM's admission of a 512-token request counts 32 full + min(32, ⌈(40 − 1 + 512)/16⌉ + 1) = 64 blocks
    "sliding-step": dict(num_gpu_blocks=66, block_size=16, max_model_len=512, enable_prefix_caching=False,
                         max_num_batched_tokens=256, blocks_for_tokens=_SWA.steady, step_blocks=_SWA),
    "sliding-step-async": dict(num_gpu_blocks=66, block_size=16, max_model_len=512, enable_prefix_caching=False,
                               max_num_batched_tokens=256, blocks_for_tokens=_SWA.steady, step_blocks=_SWA,
                               async_scheduling=True),
    # hybrid prefix caching (hybrid_kv.py: the general step throughout)
    "sliding-step-cached": dict(num_gpu_blocks=66, block_size=16, max_model_len=512, max_num_batched_tokens=256,
                                blocks_for_tokens=_SWA.steady, step_blocks=_SWA, async_scheduling=True),
    # SGLang's own scheduler: prefill-first steps, reservation admission, retraction; fixed lengths and EOS ratio
    "sglang-rule": dict(num_gpu_blocks=60, block_size=16, max_model_len=512, max_num_batched_tokens=256,
                        batching="sglang", prefix_caching_policy="sglang"),
    "sglang-rule-eos": dict(num_gpu_blocks=60, block_size=16, max_model_len=512, max_num_batched_tokens=256,
                            batching="sglang", prefix_caching_policy="sglang", ignore_eos=False,
                            scheduling_policy="lpm"),
    "sglang-rule-roomy": dict(num_gpu_blocks=2000, block_size=16, max_model_len=512, batching="sglang",
                              prefix_caching_policy="sglang"),
    "async-sliding": dict(num_gpu_blocks=60, block_size=16, max_model_len=512, enable_prefix_caching=False,
                          blocks_for_tokens=lambda n: -(-n // 16) + min(-(-n // 16), 3), async_scheduling=True),
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_fast_forward_gives_exactly_the_step_by_step_result(name):
    reqs = random_workload()
    cost = FixedStepCost(0.005, 1e-5)
    a = simulate(reqs, EngineConfig(**CONFIGS[name]), cost)
    b = simulate(reqs, EngineConfig(**CONFIGS[name]), cost, fast_forward=False)
    assert a.records.records == b.records.records  # every token time bit for bit, cached tokens, preemptions
    assert a.summary.num_steps == b.summary.num_steps and a.summary.num_preemptions == b.summary.num_preemptions
    assert a.summary.num_finished + a.summary.num_rejected == len(reqs)
    assert (a.summary.num_rejected > 0) == (name in ("rejects", "async-seats"))


@pytest.mark.parametrize("name", list(CONFIGS))
def test_fast_forward_reports_every_figure_as_step_by_step(name):
    # Beyond token times: KV usage (mean, max, series), token-state share, hits and the step log, sampled per
    # step; under async scheduling a finisher's blocks leave the pool after the next step's allocations, and
    # the general step samples after that free, so both paths must show it from the same step.
    reqs = random_workload(120, seed=5)
    cost = FixedStepCost(0.005, 1e-5)
    runs = [simulate(reqs, EngineConfig(**CONFIGS[name]), cost, record_steps=True, fast_forward=ff) for ff in (True,
        False)]
    figs = []
    for res in runs:
        d = res.to_dict(include_records=True)
        d["steps"] = [list(log.dicts()) for log in res.steps]
        figs.append(json.dumps(d, sort_keys=True, default=str))
    assert figs[0] == figs[1]


def test_same_inputs_give_byte_identical_json():
    reqs = random_workload(200, seed=3)
    cfg = EngineConfig(**CONFIGS["vllm-tight"])
    one = json.dumps(simulate(reqs, cfg, STEP, record_steps=True).to_dict(), sort_keys=True)
    two = json.dumps(simulate(reqs, cfg, STEP, record_steps=True).to_dict(), sort_keys=True)
    assert one == two


def test_memory_pressure_causes_preemptions_and_caching_gets_hits():
    res = simulate(random_workload(), EngineConfig(**CONFIGS["vllm-tight"]), STEP)
    s = res.summary
    assert s.num_preemptions > 0 and 0 < s.prefix_cache_hit_rate < 1
    assert s.prefix_cache_hit_tokens == sum(r.num_cached_tokens for r in res.records.records)
    assert 0 < s.kv_usage["mean"] <= s.kv_usage["max"] <= 1 and 0.5 < s.kv_usage["token_state_share"] <= 1


@pytest.mark.parametrize("kw, msg", [
    (dict(num_gpu_blocks=10, max_model_len=16, block_size=0), "block_size must be ≥ 1"),
    (dict(num_gpu_blocks=-5, max_model_len=16), "num_gpu_blocks must be ≥ 1"),
    (dict(num_gpu_blocks=4, max_model_len=64, block_size=16), "could never run"),
    (dict(num_gpu_blocks=100, max_model_len=4096, max_num_batched_tokens=2048, enable_chunked_prefill=False),
     "max_num_batched_tokens (2,048) is smaller than max_model_len (4,096)"),
    (dict(num_gpu_blocks=100, max_model_len=64, kv_allocation="contiguous"), "enable_prefix_caching=False"),
    (dict(num_gpu_blocks=100, max_model_len=64, max_num_seqs=2.5), "must be an integer"),
])
def test_impossible_settings_are_clear_errors(kw, msg):
    with pytest.raises(InputError, match=None) as err:
        EngineConfig(**kw)
    assert msg in str(err.value)


def test_unknown_policy_names_suggest_the_known_ones():
    with pytest.raises(UnknownNameError, match="sglang"):
        EngineConfig(num_gpu_blocks=10, max_model_len=16, block_size=4, prefix_caching_policy="sglng")
    with pytest.raises(UnknownNameError):
        simulate([], EngineConfig(num_gpu_blocks=10, max_model_len=16, block_size=4), STEP, router="random")


@pytest.mark.parametrize("spec, msg", [
    (RequestSpec("bad0", 0.0, 0, 5), "num_prompt_tokens"),
    (RequestSpec("bad1", 0.0, 5, 0), "num_output_tokens"),
    (RequestSpec("bad2", float("nan"), 5, 5), "arrival_s"),
])
def test_malformed_request_names_the_request(spec, msg):
    with pytest.raises(InputError, match=spec.request_id) as err:
        simulate([spec], EngineConfig(num_gpu_blocks=10, max_model_len=16, block_size=4), STEP)
    assert msg in str(err.value)


def test_closed_loop_users_send_the_next_request_when_the_last_one_ends():
    # 2 users, 4 requests (P=4, O=2), think time 0.1 s. Steps of 10 ms.
    # t=0: r0, r1 sent; step 0 prefills both (tokens at .01), step 1 decodes (tokens at .02): both done.
    # both users think 0.1 s → r2, r3 sent at .12, tokens at .13, .14.
    reqs = [RequestSpec(f"r{i}", 99.0, 4, 2) for i in range(4)]
    res = simulate(ClosedLoop(reqs, num_users=2, think_time_s=0.1), EngineConfig(num_gpu_blocks=20,
                   max_model_len=16, block_size=4), STEP)
    recs = {r.request_id: r for r in res.records.records}
    assert recs["r2"].arrival_s == pytest.approx(0.12) and recs["r3"].arrival_s == pytest.approx(0.12)
    assert recs["r3"].finish_s == pytest.approx(0.14)
    assert res.records.metadata.concurrency == 2


def test_paced_closed_loop_sends_at_the_later_of_its_time_and_a_free_slot():
    # vllm bench serve --request-rate R --max-concurrency 1 (each task waits on the semaphore from its arrival).
    # 1 slot, P=4, O=2 on 10 ms steps: a request takes 2 steps (prefill + 1st token at +.01, 2nd token at +.02).
    # r0 due at 0: sent at 0, done .02. r1 due at .005: the slot is busy, sent at .02 (done .04). r2 due at .1:
    # the slot is free from .04, but it waits for its own time: sent at .1, done .12. Unpaced, r2 would go at .04.
    reqs = [RequestSpec("r0", 0.0, 4, 2), RequestSpec("r1", 0.005, 4, 2), RequestSpec("r2", 0.1, 4, 2)]
    cfg = EngineConfig(num_gpu_blocks=20, max_model_len=16, block_size=4)
    recs = {r.request_id: r for r in simulate(ClosedLoop(reqs, 1, paced=True), cfg, STEP).records.records}
    assert [recs[f"r{i}"].arrival_s for i in range(3)] == pytest.approx([0.0, 0.02, 0.1])
    assert [recs[f"r{i}"].finish_s for i in range(3)] == pytest.approx([0.02, 0.04, 0.12])
    unpaced = {r.request_id: r for r in simulate(ClosedLoop(reqs, 1), cfg, STEP).records.records}
    assert unpaced["r2"].arrival_s == pytest.approx(0.04)
    with pytest.raises(InputError, match="arrival order"):
        ClosedLoop(list(reversed(reqs)), 1, paced=True)


def test_closed_loop_across_replicas_keeps_time_order():
    # 2 users, 2 replicas, round robin, no think time; P=4, O=2 on 10 ms steps.
    # r0 → replica 0, r1 → replica 1 at t=0; each finishes at .02; r2, r3 are sent at .02 and go to
    # replicas 0 and 1 → first tokens .03, finish .04.
    reqs = [RequestSpec(f"r{i}", 0.0, 4, 2) for i in range(4)]
    progress = []
    res = simulate(ClosedLoop(reqs, 2), EngineConfig(num_gpu_blocks=20, max_model_len=16, block_size=4), STEP,
                   num_replicas=2, progress=lambda done, total: progress.append((done, total)))
    recs = {r.request_id: r for r in res.records.records}
    assert [recs[f"r{i}"].arrival_s for i in range(4)] == pytest.approx([0.0, 0.0, 0.02, 0.02])
    assert [recs[f"r{i}"].finish_s for i in range(4)] == pytest.approx([0.02, 0.02, 0.04, 0.04])
    assert progress[-1] == (4, 4)


def test_round_robin_alternates_and_least_loaded_balances():
    # four identical requests at t=0 on 2 replicas: each replica serves two, batched → all finish at .02
    reqs = [RequestSpec(f"r{i}", 0.0, 4, 2) for i in range(4)]
    cfg = EngineConfig(num_gpu_blocks=20, max_model_len=16, block_size=4)
    for router in ("round_robin", "least_loaded"):
        res = simulate(reqs, cfg, STEP, num_replicas=2, router=router)
        assert [r.finish_s for r in res.records.records] == pytest.approx([0.02] * 4)
        assert res.summary.num_steps == 4  # 2 steps on each replica


def test_prefix_aware_routing_keeps_shared_prefixes_together():
    # two prefix groups arriving in pairs (A A B B A A ...), 2 replicas, 64 shareable tokens (4 blocks) per
    # request, prompts of 70 tokens. Round robin sends each pair to both replicas, so every replica computes
    # each group's prefix once: 4 misses, 8 of 12 requests hit 64 tokens. Prefix-aware routing keeps each
    # group on one replica: 2 misses, 10 hits. Prompt tokens 12 × 70 = 840.
    reqs = [RequestSpec(f"s{i}", 0.05 * i, 70, 1, ((i // 2) % 2 * 10, (i // 2) % 2 * 10 + 1), 32) for i in range(12)]
    cfg = EngineConfig(num_gpu_blocks=100, max_model_len=128, block_size=16)
    rr = simulate(reqs, cfg, STEP, num_replicas=2, router="round_robin").summary
    pa = simulate(reqs, cfg, STEP, num_replicas=2, router="prefix_aware").summary
    assert rr.prefix_cache_hit_rate == pytest.approx(8 * 64 / 840)
    assert pa.prefix_cache_hit_rate == pytest.approx(10 * 64 / 840)


def test_prefix_aware_falls_back_to_the_replica_with_the_least_routed_text():
    # sgl-router's cache-aware rule below the match threshold goes to the smallest approximate tree, not the least
    # loaded replica. Unique prompts, loads balanced (≤ 32 apart): a (100 tokens) → replica 0 (both trees empty,
    # lowest index); b (10) → replica 1 (tree 0 holds 100 tokens, tree 1 none); c (10) → replica 1 again (100 vs 10),
    # although both replicas then run one request each and least-loaded would pick replica 0.
    reqs = [RequestSpec("a", 0.0, 100, 50), RequestSpec("b", 0.001, 10, 50), RequestSpec("c", 0.002, 10, 50)]
    res = simulate(reqs, EngineConfig(num_gpu_blocks=100, max_model_len=256, block_size=16), STEP, num_replicas=2,
                   router="prefix_aware", record_steps=True)
    on = {rid: i for i, log in enumerate(res.steps) for d in log.dicts() for rid, _ in d["batch"]}
    assert on == {"a": 0, "b": 1, "c": 1}


def test_step_log_exports_jsonl_and_chrome_trace():
    res = simulate([RequestSpec("a", 0.0, 6, 3)], EngineConfig(num_gpu_blocks=10, max_model_len=16, block_size=4),
                   STEP, record_steps=True)
    buf = io.StringIO()
    res.write_steps_jsonl(buf)
    rows = [json.loads(line) for line in buf.getvalue().splitlines()]
    assert [r["num_scheduled_tokens"] for r in rows] == [6, 1, 1]
    assert [r["start_s"] for r in rows] == pytest.approx([0.0, 0.01, 0.02])
    ev = res.chrome_trace()["traceEvents"]
    steps = [e for e in ev if e["ph"] == "X"]
    assert [e["name"] for e in steps] == ["prefill", "decode", "decode"] and steps[1]["ts"] == pytest.approx(1e4)
    with pytest.raises(InputError):
        simulate([RequestSpec("a", 0.0, 6, 3)], EngineConfig(num_gpu_blocks=10, max_model_len=16, block_size=4),
                 STEP).chrome_trace()


def test_summary_latencies_and_percentiles():
    # single request P=6, O=3 on 10 ms steps: TTFT .01, ITL [.01, .01], TPOT .01, E2E .03
    s = simulate([RequestSpec("a", 0.0, 6, 3)], EngineConfig(num_gpu_blocks=10, max_model_len=16, block_size=4),
                 STEP).summary
    assert s.ttft_s.p50 == pytest.approx(0.01) and s.e2e_s.p99 == pytest.approx(0.03)
    assert s.itl_s.count == 2 and s.tpot_s.mean == pytest.approx(0.01)
    assert s.throughput_output_tok_per_s == pytest.approx(3 / 0.03)
    d = s.to_dict()
    for k in ("ttft_s", "itl_s", "tpot_s", "e2e_s"):
        assert set(d[k]) >= {"mean", "p50", "p90", "p99"}
    v = np.random.default_rng(1).exponential(1.0, 1001)
    assert percentiles(v, (50.0, 90.0, 99.0)) == pytest.approx(list(np.percentile(v, [50, 90, 99])))
