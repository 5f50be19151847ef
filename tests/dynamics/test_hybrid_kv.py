"""Prefix caching on hybrid full + sliding-window layouts (hybrid_kv.py): the engine audit's scenario S4."""

from __future__ import annotations

from kvledger.accounting.kvlayout import AllocGroup, KVLayout
from kvledger.accounting.stepcost import FixedStepCost
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.dynamics.engine.swa_step import StepBlockRule
from kvledger.dynamics.simulator import EngineConfig, simulate

STEP = FixedStepCost(per_step_s=0.010)
LAYOUT = KVLayout((AllocGroup("full", 1, 1, 4, 1), AllocGroup("sliding_window", 1, 1, 4, 1, 8)), 1, 4, 0)
RULE = StepBlockRule.from_layout(LAYOUT, max_model_len=64, inflight_tokens=64)


def cfg(**kw):
    return EngineConfig(num_gpu_blocks=60, max_model_len=64, block_size=4, max_num_batched_tokens=64,
                        blocks_for_tokens=LAYOUT.blocks_for_tokens, step_blocks=RULE, **kw)


def test_s4_second_request_hits_the_shared_prefix_in_both_groups():
    # A and B share a 32-token prefix (8 blocks of 4) and add 4 unique tokens; B arrives after A ended.
    # A's full group caches blocks 0–7; its sliding group (W = 8) freed blocks 0–5 as they left the window, with
    # their hashes, and 6–7 at the end. B: the full chain is 8 blocks (the hit cap (36 − 1) // 4 = 8), and the
    # sliding group needs only its last cdiv(7, 4) = 2 blocks, 6 and 7: a hit of 32 tokens. Caching off: 0.
    specs = [RequestSpec("A", 0.0, 36, 3, (1, 2), 16), RequestSpec("B", 1.0, 36, 3, (1, 2), 16)]
    on = simulate(specs, cfg(enable_prefix_caching=True), STEP, fast_forward=False).records.records
    off = simulate(specs, cfg(enable_prefix_caching=False), STEP).records.records
    assert [r.num_cached_tokens for r in on] == [0, 32]
    assert [r.num_cached_tokens for r in off] == [0, 0]
    # B prefills only its 4 unique tokens: same one-step TTFT here (fixed step cost), but 4 instead of 36 tokens
    assert on[1].first_token_s == off[1].first_token_s


def test_sliding_group_needs_the_window_blocks_of_the_hit():
    # While A still runs (B arrives during A's decode), A's sliding group has freed blocks 0–5 but they stay cached,
    # so the hit is the same 8 blocks; the shared blocks are held by both (ref counts), not copied.
    specs = [RequestSpec("A", 0.0, 36, 30, (1, 2), 16), RequestSpec("B", 0.1, 36, 3, (1, 2), 16)]
    recs = simulate(specs, cfg(enable_prefix_caching=True), STEP).records.records
    assert recs[1].num_cached_tokens == 32


def test_plan_turns_caching_on_for_gpt_oss_as_vllm_does():
    from kvledger.accounting.plan import build_plan
    from kvledger.accounting.settings import PlanSettings
    from kvledger.analyses.serving.from_plan import engine_config_from_plan
    from kvledger.catalog.gpus import get_gpu
    from kvledger.catalog.models import load_model

    p = build_plan(load_model("openai/gpt-oss-20b", allow_hub=False), get_gpu("H100-SXM"),
                   PlanSettings(max_model_len=8192), with_roofline=False, with_advice=False)
    c, notes = engine_config_from_plan(p)
    assert c.enable_prefix_caching and c.hybrid_caching
    # A repeated 2,048-token prompt (W = 128, B = 16), sent twice:
    specs = [RequestSpec("A", 0.0, 2048, 2, tuple(range(4)), 512), RequestSpec("B", 5.0, 2048, 2, tuple(range(4)), 512)]
    recs = simulate(specs, c, STEP).records.records
    # both prompts are the 2,048 shared tokens exactly: the hit is capped at num_tokens − 1 = 2,047 tokens → 127
    # whole blocks = 2,032 tokens, as the audit computed for vLLM
    assert [r.num_cached_tokens for r in recs] == [0, 2032]
    # Qwen3-Next (Mamba state groups in align mode) is cached by vLLM 0.33's Mamba rule (mamba_prefix.py), with a note
    q = build_plan(load_model("Qwen/Qwen3-Next-80B-A3B-Thinking", allow_hub=False), get_gpu("H100-SXM"),
                   PlanSettings(max_model_len=8192, tp=4), with_roofline=False, with_advice=False)
    qc, qnotes = engine_config_from_plan(q)
    assert qc.hybrid_caching and any(n.startswith("Mamba prefix caching as vLLM 0.33.0") for n in qnotes)


def test_no_block_leaks_under_preemption_and_sharing():
    # a tight pool, shared prefixes, preemptions: when everything has finished every block is back in the free
    # queue (cached ones at its LRU end) and the manager's held count is 0
    import sys
    from pathlib import Path

    from kvledger.dynamics.cluster import run_cluster
    from kvledger.dynamics.engine.router import make_router
    from kvledger.dynamics.replica import Replica

    sys.path.insert(0, str(Path(__file__).parent))
    from test_engine import random_workload

    # 65 usable blocks: the fewest vLLM starts with, a 512-token request counting 32 full + 32 sliding blocks at
    # admission
    c = EngineConfig(num_gpu_blocks=66, max_model_len=512, block_size=16, max_num_batched_tokens=256,
                     blocks_for_tokens=RULE_16.steady, step_blocks=RULE_16)
    rep = Replica(c, FixedStepCost(0.005, 1e-5))
    recs = run_cluster(random_workload(), [rep], make_router("round_robin"))
    assert all(r.ok for r in recs) and rep.num_preemptions > 0 and rep.kv.prefix_stats.hits > 0
    assert rep.kv._held == 0 and rep.kv.num_used_blocks == 0 and rep.kv.num_free_blocks == 65  # 66 − the null block


RULE_16 = StepBlockRule((("full", 16, 0), ("sliding_window", 16, 40)), 512, 512)


def test_a_pool_below_the_sliding_window_admission_need_is_refused_not_stalled():
    # 59 usable blocks; vLLM's start-up check counts a 512-token request at 32 full + ⌈min(40 − 1 + F, 512)/16⌉ + 1
    # = 33 sliding blocks (its spec's max_memory_usage_bytes, +1 whatever the request's length) = 65 > 59, so it
    # would refuse to start — the simulator used to stall ("nothing schedulable") with a traceback
    import pytest

    from kvledger.errors import InputError

    with pytest.raises(InputError, match="needs 65 blocks, so it could never run"):
        EngineConfig(num_gpu_blocks=60, max_model_len=512, block_size=16, max_num_batched_tokens=256,
                     blocks_for_tokens=RULE_16.steady, step_blocks=RULE_16)
