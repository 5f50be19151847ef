"""Which sliding-window blocks vLLM keeps in its prefix cache, per release (swa_retention.py, hybrid_kv.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kvledger.accounting.kvlayout import AllocGroup, KVLayout
from kvledger.accounting.stepcost import FixedStepCost
from kvledger.dynamics.engine.hybrid_kv import HybridKVManager
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.dynamics.engine.request_state import SimRequest
from kvledger.dynamics.engine.swa_retention import DENSE, sliding_retention
from kvledger.dynamics.engine.swa_step import StepBlockRule
from kvledger.dynamics.simulator import EngineConfig, simulate

STEP = FixedStepCost(per_step_s=0.010)
# block 4 tokens, window 8: a sliding hit at h blocks needs blocks h − 2, h − 1 (need = cdiv(8 − 1, 4) = 2)
HYBRID = KVLayout((AllocGroup("full", 1, 1, 4, 1), AllocGroup("sliding_window", 1, 1, 4, 1, 8)), 1, 4, 0)
SLIDING = KVLayout((AllocGroup("sliding_window", 1, 1, 4, 1, 8),), 1, 4, 0)


def hits(layout: KVLayout, version: str, specs: list[RequestSpec]) -> list[int]:
    rule = StepBlockRule.from_layout(layout, max_model_len=64, inflight_tokens=64, engine_version=version)
    cfg = EngineConfig(num_gpu_blocks=60, max_model_len=64, block_size=4, max_num_batched_tokens=64,
                       blocks_for_tokens=layout.blocks_for_tokens, step_blocks=rule)
    return [r.num_cached_tokens for r in simulate(specs, cfg, STEP).records.records]


# three 48-token prompts (12 blocks) sharing their first 32 tokens (blocks 0–7), one after another
SHARED = [RequestSpec(n, t, 48, 2, (1, 2), 16) for n, t in (("A", 0.0), ("B", 1.0), ("C", 2.0))]


def test_the_table_keys_the_rule_by_release():
    # vLLM 0.28: VLLM_PREFIX_CACHE_RETENTION_INTERVAL unset → None (dense); 0.29 on: prefix_cache_retention_interval
    # defaults to 0 (config/cache.py _get_prefix_cache_retention_interval); 0.19 had no mask at all
    assert [sliding_retention(v).prefix_cache_retention_interval for v in ("0.19.0", "0.28.0", "0.29.0", "0.33.0")] \
        == [None, None, 0, 0]
    assert sliding_retention(None) is DENSE and sliding_retention("not a version") is DENSE


@pytest.mark.parametrize("version, want", [("0.28.0", [0, 32, 32]), ("0.29.0", [0, 0, 32]), ("0.33.0", [0, 0, 32])])
def test_a_shared_prefix_is_hit_from_the_third_request_on_from_0_29(version, want):
    # 0.28 (every full block hashed): B's full chain is 8 blocks and its sliding group finds blocks 6, 7 → 32 tokens.
    # 0.29+: A keeps sliding blocks only before its replay boundary 47 // 4 = 11, blocks 9 and 10 (its own tokens);
    # B's full chain is 8 blocks but sliding blocks 6, 7 have no hash (nor does block 0: no run from the start) → 0;
    # B's junction (the full chain, 8 blocks, longer than its hit) keeps blocks 6, 7, so C hits 8 blocks = 32 tokens.
    assert hits(HYBRID, version, SHARED) == want


def test_with_sliding_layers_only_a_shared_prefix_is_never_pinned():
    # one group (vLLM's UnitaryKVCacheCoordinator): no junction, so under retention 0 only blocks 9 and 10 of each
    # prompt keep hashes, and the shared blocks 6, 7 never do → no hit; dense: B and C hit the 8 shared blocks
    assert hits(SLIDING, "0.28.0", SHARED) == [0, 32, 32]
    assert hits(SLIDING, "0.33.0", SHARED) == [0, 0, 0]


def test_a_resent_prompt_hits_under_both_rules():
    # a 32-token prompt sent twice (all of it shared): the hit is capped at (32 − 1) // 4 = 7 blocks, whose sliding
    # blocks 5, 6 are the tail before A's replay boundary 31 // 4 = 7 → 28 tokens at both releases
    specs = [RequestSpec("A", 0.0, 32, 2, (1, 2), 16), RequestSpec("B", 1.0, 32, 2, (1, 2), 16)]
    for layout in (HYBRID, SLIDING):
        assert hits(layout, "0.28.0", specs) == hits(layout, "0.33.0", specs) == [0, 28]


def test_unhashed_sliding_blocks_leave_no_cache_entry():
    # A alone, 48 tokens of which 32 shared (8 keyed blocks): dense keeps 8 full + 8 sliding cached blocks after it
    # ends; retention 0 keeps the 8 full ones only (its sliding tail, blocks 9 and 10, lies past the shared tokens,
    # which are the only ones keyed here), and frees the unhashed sliding blocks to the head of the queue
    rule = StepBlockRule.from_layout(HYBRID, max_model_len=64, inflight_tokens=64)
    for retention, cached in ((DENSE, 16), (sliding_retention("0.33.0"), 8)):
        kv = HybridKVManager(60, replace(rule, retention=retention))
        req = SimRequest(0, SHARED[0])
        assert kv.admit(req, 0, 48, 48)
        full, sliding = req.node[0]
        unhashed = {*full[8:], *(sliding[8:] if retention is DENSE else sliding)}  # 8 or 4 + 12 = 16 blocks
        kv.free(req, preempted=False)
        assert kv.pool.num_cached_blocks == cached and kv.held_slots == 0
        assert set(kv.pool.free_block_ids()[:len(unhashed)]) == unhashed  # evicted first


@pytest.mark.parametrize("version, want", [("0.28.0", [0, 48]), ("0.33.0", [0, 36])])
def test_a_sessions_next_turn_hits_up_to_the_last_prompts_replay_boundary_from_0_29(version, want):
    # turn 1: a 40-token prompt (segments 1, 2 whole, 8 tokens of segment 3) and 12 output tokens, so its stream's
    # whole segments 1, 2, 3 are keyed (48 tokens, blocks 0–11: vLLM hashes decoded blocks too); turn 2's prompt is
    # those 52 tokens + 8 more (60, cap (60 − 1) // 4 = 14 blocks), keyed on segments 1–3: a full chain of 12 blocks.
    # 0.28: turn 1's sliding group hashed blocks 10 and 11 as well → 12 blocks = 48 tokens.
    # 0.33: turn 1's sliding group kept only blocks 7, 8 (before its replay boundary 39 // 4 = 9) → 9 blocks = 36
    # tokens, the last whole block before turn 1's prompt ended (its output is recomputed).
    specs = [RequestSpec("t0", 0.0, 40, 12, (1, 2), 16, None, (3,)), RequestSpec("t1", 5.0, 60, 2, (1, 2, 3), 16)]
    assert hits(HYBRID, version, specs) == want


def test_no_block_leaks_under_preemption_and_sharing_with_retention_0():
    # test_hybrid_kv's tight pool (65 usable blocks, preemptions, shared prefixes) under 0.33's rule: every block
    # is back in the free queue at the end, hashed or not, and hits still happen (the junctions pin the tails)
    import sys
    from pathlib import Path

    from kvledger.dynamics.cluster import run_cluster
    from kvledger.dynamics.engine.router import make_router
    from kvledger.dynamics.replica import Replica

    sys.path.insert(0, str(Path(__file__).parent))
    from test_engine import random_workload

    rule = StepBlockRule((("full", 16, 0), ("sliding_window", 16, 40)), 512, 512, retention=sliding_retention("0.33"))
    c = EngineConfig(num_gpu_blocks=66, max_model_len=512, block_size=16, max_num_batched_tokens=256,
                     blocks_for_tokens=rule.steady, step_blocks=rule)
    rep = Replica(c, FixedStepCost(0.005, 1e-5))
    recs = run_cluster(random_workload(), [rep], make_router("round_robin"))
    assert all(r.ok for r in recs) and rep.num_preemptions > 0 and rep.kv.prefix_stats.hits > 0
    assert rep.kv.held_slots == 0 and rep.kv.num_used_blocks == 0 and rep.kv.num_free_blocks == 65


# --prefix-cache-retention-interval I (vLLM 0.29 on): besides the boundary tails, the need blocks before every multiple
# of I are kept (SlidingWindowManager.reachable_block_mask: block i with i % (I / B) ≥ I / B − need; every block
# where need ≥ I / B)


def hits_with(interval: int, specs: list[RequestSpec]) -> list[int]:
    rule = StepBlockRule.from_layout(HYBRID, max_model_len=64, inflight_tokens=64, engine_version="0.33.0",
                                     retention_interval=interval)
    cfg = EngineConfig(num_gpu_blocks=60, max_model_len=64, block_size=4, max_num_batched_tokens=64,
                       blocks_for_tokens=HYBRID.blocks_for_tokens, step_blocks=rule)
    return [r.num_cached_tokens for r in simulate(specs, cfg, STEP).records.records]


@pytest.mark.parametrize("interval, want", [(16, [0, 32, 32]), (12, [0, 24, 32]), (8, [0, 32, 32])])
def test_a_retention_interval_lets_the_second_request_hit(interval, want):
    # SHARED (48-token prompts sharing blocks 0–7), B = 4, need 2; 0.33 without an interval: [0, 0, 32].
    # I = 16 (4 blocks a segment): A keeps blocks 2, 3, 6, 7, 10, 11 (i % 4 ≥ 2) → B's 8-block chain finds 6, 7: 32.
    # I = 12 (3 a segment): A keeps 1, 2, 4, 5, 7, 8, 10, 11 (i % 3 ≥ 1) → at 8 blocks 6 is missing, at 7 block 6,
    #   at 6 blocks 4, 5 are there: B hits 24; its junction (8 blocks) keeps 6, 7 → C hits 32.
    # I = 8 (2 a segment ≤ need 2): every block is kept, as 0.28's dense rule.
    assert hits_with(interval, SHARED) == want


def test_reachable_block_with_segments():
    from kvledger.dynamics.engine.swa_retention import reachable_block

    # need 2, segments of 4 blocks (I = 16 at B = 4), the replay boundary's block 11
    assert [i for i in range(12) if reachable_block(i, (11,), 2, 4)] == [2, 3, 6, 7, 9, 10, 11]
    assert [i for i in range(12) if reachable_block(i, (11,), 2)] == [9, 10]  # interval 0
    assert all(reachable_block(i, (11,), 4, 4) for i in range(12))  # need ≥ I / B: dense


def test_the_interval_row_names_itself():
    from kvledger.dynamics.engine.swa_retention import with_interval

    row = with_interval(sliding_retention("0.33.0"), 256)
    assert (row.prefix_cache_retention_interval, row.since) == (256, (0, 29, 0))
    assert row.keeps.startswith("the window's blocks before every multiple of 256 tokens")


def hits_env(version: str, interval: int) -> list[int]:
    rule = StepBlockRule.from_layout(HYBRID, max_model_len=64, inflight_tokens=64, engine_version=version,
                                     retention_interval=interval)
    cfg = EngineConfig(num_gpu_blocks=60, max_model_len=64, block_size=4, max_num_batched_tokens=64,
                       blocks_for_tokens=HYBRID.blocks_for_tokens, step_blocks=rule)
    return [r.num_cached_tokens for r in simulate(SHARED, cfg, STEP).records.records]


@pytest.mark.parametrize("version, want", [("0.23.0", [0, 24, 24]), ("0.25.0", [0, 24, 24]), ("0.26.0", [0, 24, 32]),
                                           ("0.28.0", [0, 24, 32])])
def test_before_0_29_the_environment_variable_keeps_the_junction_from_0_26(version, want):
    # VLLM_PREFIX_CACHE_RETENTION_INTERVAL = 12 (envs.py, 0.23–0.28; the flag stands for it), SHARED, B = 4, need 2,
    # 3 blocks a segment: A keeps blocks 1, 2, 4, 5, 7, 8, 10, 11 (i % 3 ≥ 1) and its replay tail 9, 10
    # (47 // 4 = 11). B's 8-block chain: block 6 is missing at 8 and 7 blocks, 4, 5 are there at 6 → 24.
    # 0.23–0.25 SlidingWindowManager.reachable_block_mask(num_prompt_tokens=…) keeps the replay boundary's tail only:
    #   B keeps what A did, so C walks back to 24 as well.
    # 0.26–0.28 reachable_block_mask(reachable_boundaries=[num_prompt_tokens − 1, shared_prefix_boundary]): B's junction
    #   (its 8-block chain, longer than its hit) keeps blocks 6, 7 → C hits 32, as 0.33 does (the interval test above).
    # Without the variable (unset: None, dense) 0.28 keeps every block: [0, 32, 32].
    assert hits_env(version, 12) == want
    assert sliding_retention(version, 12).junction is (version >= "0.26.0")
    assert sliding_retention("0.22.0", 12) is DENSE  # 0.22 has no such variable: the flag is refused there
