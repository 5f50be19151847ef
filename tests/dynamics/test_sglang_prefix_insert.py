"""SGLang inserts a request's prefilled tokens into the radix tree at the end of its prefill (SGLang 0.5.23
``batch_result_processor.py : process_batch_result_prefill`` → ``mem_cache/common.py : checkpoint_kv_cache``; after a
middle chunk ``scheduler.py : get_next_batch_to_run`` → ``stash_chunked_request``), so a later request shares the
prefix while the first one still decodes (replica.py ``apply_plan`` → ``RadixKVManager.after_prefill_step``)."""

from __future__ import annotations

import pytest

from kvledger.accounting.stepcost import FixedStepCost
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.dynamics.simulator import EngineConfig, simulate
from kvledger.dynamics.workload.shared_prefix import with_shared_prefix

STEP = FixedStepCost(per_step_s=0.010)  # every step 10 ms: step k runs (k − 1)·10 ms to k·10 ms
N = 1500  # --shared-prefix-tokens
# (id, arrival s, prompt, output); R0 runs 300 decode steps, ≥ 3 s, so it decodes while every other request arrives
SPECS = [("R0", 0.0, 2000, 300), ("R1", 0.0, 1800, 10), ("R2", 0.005, 1600, 10), ("R3", 0.5, 1000, 10),
         ("R4", 0.5, 1500, 10)] + [(f"S{k}", 0.1 * k, 1700, 10) for k in range(1, 10)]


def cfg(chunk: int) -> EngineConfig:
    return EngineConfig(batching="sglang", prefix_caching_policy="sglang", block_size=1, num_gpu_blocks=40001,
                        max_model_len=4096, max_num_batched_tokens=chunk, max_num_seqs=32)


def run(specs, chunk: int = 8192, **kw) -> dict:
    res = simulate(specs, cfg(chunk), STEP, **kw)
    return {r.request_id: r for r in res.records.records}


@pytest.mark.parametrize("fast_forward", [True, False])
def test_a_request_arriving_after_the_first_prefill_hits_the_prefix_while_the_first_decodes(fast_forward):
    specs = with_shared_prefix([RequestSpec(*s) for s in SPECS], N, "t")
    recs = run(specs, fast_forward=fast_forward)
    r0 = recs["R0"]
    # R0 and R1 arrive at 0 and are prefilled together in step 1 (0–10 ms, 3,800 ≤ 8,192 tokens): both matched an
    # empty tree at admission → 0. R0's prompt enters the tree at the end of step 1 (its first token, 10 ms).
    assert round(r0.first_token_s * 1e3) == 10
    # Every later request is admitted in a step starting at ≥ 10 ms (R2 arrives at 5 ms, during step 1) and before
    # R0 finishes (R0 needs ≥ 300 steps = 3 s; the last arrival is at 0.9 s): prompt ≥ N → the N-token segment,
    # capped at prompt − 1 (R4: 1,500 − 1 = 1,499, SGLang keeps one token to compute logits); R3's 1,000-token
    # prompt is shorter than N, so unshared → 0.
    assert r0.finish_s > 3.0 > max(s[1] for s in SPECS)
    expected = {"R0": 0, "R1": 0, "R2": 1500, "R3": 0, "R4": 1499} | {f"S{k}": 1500 for k in range(1, 10)}
    assert {rid: r.num_cached_tokens for rid, r in recs.items()} == expected
    assert all(recs[rid].first_token_s < r0.finish_s for rid in expected if rid != "R0")


def test_chunked_prefill_inserts_after_the_last_chunk_too():
    # Chunk budget 1,024: R0's 2,000-token prompt takes step 1 (1,024 tokens, 0–10 ms; the 1,500-token segment not
    # yet whole) and step 2 (976, 10–20 ms; prompt done, first token at 20 ms), where it is inserted. A request
    # arriving at 15 ms is considered at 20 ms → 1,500; one arriving at 1 s → 1,500 (R0 decodes 300 steps past 3 s).
    specs = with_shared_prefix([RequestSpec("R0", 0.0, 2000, 300), RequestSpec("A", 0.015, 1700, 10),
                                RequestSpec("B", 1.0, 1700, 10)], N, "t")
    recs = run(specs, chunk=1024)
    assert round(recs["R0"].first_token_s * 1e3) == 20 and recs["R0"].finish_s > 3.0
    assert [recs[r].num_cached_tokens for r in ("R0", "A", "B")] == [0, 1500, 1500]


def test_hash_id_segments_are_shared_after_the_first_prefill():
    # Mooncake-style hash ids, 512 tokens a segment: R0 (1, 2, 3) + 100 own tokens = 1,636; B (1, 2, 9) + 100 arrives
    # at 0.5 s while R0 decodes (300 steps): it shares segments 1 and 2 → 2 × 512 = 1,024 tokens.
    segs = dict(segment_tokens=512)
    specs = [RequestSpec("R0", 0.0, 1636, 300, prefix_segments=(1, 2, 3), **segs),
             RequestSpec("B", 0.5, 1636, 10, prefix_segments=(1, 2, 9), **segs)]
    recs = run(specs)
    assert recs["R0"].finish_s > 3.0 and [recs[r].num_cached_tokens for r in ("R0", "B")] == [0, 1024]


def test_prefix_aware_router_sends_the_sharer_to_the_replica_that_is_still_decoding_the_prefix():
    # Two replicas, prefix_aware: R0 → replica 0 (both trees empty: the smallest, lowest index). X (1,700 tokens,
    # 1,500 shared: 88 % > 50 %) → replica 0 too, where R0's prompt entered the tree after its prefill → 1,500.
    specs = with_shared_prefix([RequestSpec("R0", 0.0, 2000, 300), RequestSpec("X", 0.5, 1700, 10)], N, "t")
    recs = run(specs, num_replicas=2, router="prefix_aware")
    assert recs["R0"].finish_s > 3.0 and [recs[r].num_cached_tokens for r in ("R0", "X")] == [0, 1500]
