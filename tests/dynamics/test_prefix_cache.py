"""Prefix caching as named policies: vLLM's chained block hashes and SGLang's radix tree, on hand-checkable content."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvledger.accounting.stepcost import FixedStepCost
from kvledger.dynamics.engine.kv_manager import PagedKVManager
from kvledger.dynamics.engine.radix_cache import RadixKVManager, RadixNode
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.dynamics.engine.request_state import SimRequest
from kvledger.dynamics.simulator import EngineConfig, simulate

STEP = FixedStepCost(per_step_s=0.01)


def req(uid, P, segs=(), S=8, num_output=1):
    return SimRequest(uid, RequestSpec(f"r{uid}", 0.0, P, num_output, prefix_segments=tuple(segs), segment_tokens=S))


def finish(kv, r):
    """Admit r with its whole prompt, mark it computed, free it as finished."""
    hits, _ = kv.match(r)
    assert kv.admit(r, hits,
                    r.num_tokens - r.num_computed_tokens if not hits else r.num_tokens - len(hits) * kv.block_size,
                    r.num_tokens)
    r.num_computed_tokens = r.num_tokens
    kv.free(r, preempted=False)


def test_vllm_hit_covers_full_shared_blocks_only():
    kv = PagedKVManager(32, 4, enable_caching=True)
    # segments of 8 tokens = 2 blocks of 4; a: segments (1, 2) + 4 unique tokens → shareable blocks 0..3
    finish(kv, req(0, 20, (1, 2)))
    # b shares segment 1 only → blocks 0, 1 hit (8 tokens); block 2 depends on segment 2 vs 3
    assert kv.match(req(1, 20, (1, 3)))[1] == 8
    # c shares both → 4 blocks (16 tokens); its unique tail is never shared
    assert kv.match(req(2, 40, (1, 2)))[1] == 16
    # the hit is capped at num_tokens − 1: a 16-token prompt made only of (1, 2) recomputes its last block
    assert kv.match(req(3, 16, (1, 2)))[1] == 12


def test_trailing_partial_segment_and_straddling_blocks_are_not_shared():
    kv = PagedKVManager(32, 4, enable_caching=True)
    # S=6, B=4. a: segments (1, 2), P=13 → shareable tokens 12 → blocks 0, 1, 2 (tokens 0-11)
    finish(kv, req(0, 13, (1, 2), S=6))
    # b: (1, 3): block 0 = tokens 0-3 (segment 1 only) hits; block 1 = tokens 4-7 touches segment 3 ≠ 2
    assert kv.match(req(1, 13, (1, 3), S=6))[1] == 4
    # c: (1, 2) but P=10: segment 2 is a trailing partial segment → shareable tokens 6 → only block 0
    c = req(2, 10, (1, 2), S=6)
    assert c.spec.num_shareable_tokens == 6
    assert kv.match(c)[1] == 4


def test_preempted_request_gets_its_own_blocks_back_from_the_cache():
    kv = PagedKVManager(32, 4, enable_caching=True)
    r = req(0, 10, (), num_output=5)
    kv.admit(r, [], 10, 10)
    r.num_computed_tokens = 13  # prompt + 3 decode tokens computed; 4 blocks held
    r.num_generated, r.num_tokens = 4, 14
    kv.grow(r, 0)
    r.num_preemptions = 1
    kv.free(r, preempted=True)
    r.num_computed_tokens = 0
    # 13 computed → 3 full blocks (12 tokens) registered under the request's own keys
    assert kv.match(r)[1] == 12


def test_zero_hit_workload_registers_nothing():
    kv = PagedKVManager(64, 4, enable_caching=True)
    for i in range(5):
        finish(kv, req(i, 30))
    assert kv.pool.num_cached_blocks == 0 and kv.prefix_stats.hits == 0 and kv.prefix_stats.queries == 150


def test_sglang_radix_hits_are_token_granular_over_segments():
    # segments of 6 tokens, block size 4: vLLM can reuse only 4 of the first 6 shared tokens (one full
    # block), SGLang's radix tree (page size 1) all 6.
    reqs = [RequestSpec("a", 0.0, 10, 1, (1,), 6), RequestSpec("b", 1.0, 10, 1, (1,), 6)]
    cfg = dict(num_gpu_blocks=40, block_size=4, max_model_len=32)
    vllm = simulate(reqs, EngineConfig(**cfg), STEP).records.records
    sgl = simulate(reqs, EngineConfig(**cfg, prefix_caching_policy="sglang"), STEP).records.records
    assert [r.num_cached_tokens for r in vllm] == [0, 4]
    assert [r.num_cached_tokens for r in sgl] == [0, 6]


def test_radix_lru_evicts_least_recent_leaf_first():
    kv = RadixKVManager(capacity_tokens=40, block_size=1)
    a, b = req(0, 16, (1, 2), S=8), req(1, 16, (3, 4), S=8)
    for r in (a, b):  # each leaves segments + nothing unique (16 = 2 segments; hit cap irrelevant here)
        handle, hit = kv.match(r)
        assert kv.admit(r, handle, 16 - hit, 16)
        r.num_computed_tokens = 16
        kv.free(r, preempted=False)
    assert kv.tree_tokens == 32 and kv.evictable_tokens == 32 and kv.num_free_tokens == 8
    c = req(2, 24, (), S=8)
    handle, _ = kv.match(c)
    assert kv.admit(c, handle, 24, 24)  # needs 16 more slots: evicts a's leaf (segment 2) then its parent (1)
    assert kv.root.children.keys() == {3}
    assert kv.tree_tokens == 16 and kv.private_tokens == 24


def _tree_tokens(node: RadixNode) -> int:
    return sum(c.ntok + _tree_tokens(c) for c in node.children.values())


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(1, 4), st.integers(1, 20), st.integers(1, 16)),
                min_size=1, max_size=25))
def test_radix_tree_counters_match_the_tree(items):
    from kvledger.dynamics.cluster import run_cluster
    from kvledger.dynamics.engine.router import make_router
    from kvledger.dynamics.replica import Replica

    reqs = [RequestSpec(f"r{i}", i * 0.005, nseg * 8 + extra, out, tuple(range(g * 10, g * 10 + nseg)), 8)
            for i, (g, nseg, extra, out) in enumerate(items)]
    cfg = EngineConfig(num_gpu_blocks=20, block_size=4, max_model_len=76, max_num_batched_tokens=32,
                       prefix_caching_policy="sglang")  # 19 × 4 = 76 token slots: requests of up to 68 tokens
    rep = Replica(cfg, STEP)
    recs = run_cluster(reqs, [rep], make_router("round_robin"))
    kv = rep.kv
    assert all(r.ok for r in recs)
    assert kv.tree_tokens == _tree_tokens(kv.root) <= kv.capacity_tokens
    assert kv.private_tokens == 0 and kv.held_slots == 0
    assert kv.evictable_tokens == kv.tree_tokens  # nothing running: everything in the tree is evictable


@pytest.mark.parametrize("policy", ["vllm", "sglang"])
def test_lpm_puts_the_longest_cached_prefix_first(policy):
    # max_num_seqs 1 serialises requests. x (segments 1, 2) runs first and caches them; y (unrelated) and
    # z (shares 1, 2) then wait together: FCFS runs y before z, LPM runs z (longest match) first.
    reqs = [RequestSpec("x", 0.0, 20, 3, (1, 2), 8), RequestSpec("y", 0.001, 20, 1, (7,), 8),
            RequestSpec("z", 0.002, 20, 1, (1, 2), 8)]
    cfg = dict(num_gpu_blocks=40, block_size=4, max_model_len=32, max_num_seqs=1, prefix_caching_policy=policy)
    fcfs = {r.request_id: r for r in simulate(reqs, EngineConfig(**cfg), STEP).records.records}
    lpm = {r.request_id: r for r in simulate(reqs, EngineConfig(**cfg, scheduling_policy="lpm"), STEP).records.records}
    assert fcfs["y"].first_token_s < fcfs["z"].first_token_s
    assert lpm["z"].first_token_s < lpm["y"].first_token_s
    assert lpm["z"].num_cached_tokens == 16


def test_unbounded_cache_reaches_the_trace_infinite_cache_hit_rate_on_mooncake():
    # Independent check on real data: with a pool larger than the whole trace nothing is evicted, so the
    # hit of each request is its longest run of leading hash_ids seen in any earlier request (× 512 tokens),
    # capped at num_tokens − 1 rounded down to a block. For the first 300 Mooncake requests that is
    # 345,600 of 4,269,971 prompt tokens (8.09 %; the whole trace: 37 %, docs/formats.md §8).
    from kvledger.dynamics.workload.traces import load_trace

    reqs = load_trace("mooncake", num_requests=300)
    seen, expected = set(), 0
    for r in reqs:
        k = 0
        while k < len(r.prefix_segments) and (k + 1) * 512 <= r.num_prompt_tokens and r.prefix_segments[:k + 1] in seen:
            k += 1
        expected += min(k * 512, (r.num_prompt_tokens - 1) // 16 * 16)
        seen.update(r.prefix_segments[:i + 1] for i in range(len(r.prefix_segments)))
    assert expected == 345_600
    blocks = sum(r.num_prompt_tokens + r.num_output_tokens for r in reqs) // 16 + 1000
    cfg = dict(num_gpu_blocks=blocks, block_size=16, max_model_len=131072)
    vllm = simulate(reqs, EngineConfig(**cfg), STEP).summary
    assert vllm.prefix_cache_hit_tokens == expected and vllm.prefix_cache_query_tokens == 4_269_971
    # SGLang inserts a segment after the step that computed it (vLLM registers blocks when it schedules
    # them), so a request admitted in between can miss one segment
    sgl = simulate(reqs, EngineConfig(**cfg, prefix_caching_policy="sglang"), STEP).summary
    assert expected - 512 <= sgl.prefix_cache_hit_tokens <= expected
