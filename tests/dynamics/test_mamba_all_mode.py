"""Mamba prefix caching in vLLM's mamba_cache_mode "all" (0.19–0.27, models implementing SupportsMambaPrefixCaching):
a state page per block, every full block's state kept, a hit at any cached block (hybrid_kv.py, swa_step.py)."""

from __future__ import annotations

import random

import pytest

from kvledger.accounting.stepcost import FixedStepCost
from kvledger.dynamics.engine.hybrid_kv import HybridKVManager, supports_hybrid_caching
from kvledger.dynamics.engine.kv_factory import make_kv_manager
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.dynamics.engine.request_state import SimRequest
from kvledger.dynamics.engine.scheduler import Scheduler
from kvledger.dynamics.engine.swa_step import StepBlockRule
from kvledger.dynamics.simulator import EngineConfig, simulate

STEP = FixedStepCost(per_step_s=0.010)
# B = 4: one full-attention group and two state groups in "all" mode (no align split, no boundary page)
ALL = StepBlockRule((("state", 4, 0), ("state", 4, 0), ("full", 4, 0)), 64, 64, state_per_block=True)


def _cfg(rule: StepBlockRule, blocks: int = 60, mnbt: int = 64) -> EngineConfig:
    return EngineConfig(num_gpu_blocks=blocks, max_model_len=64, block_size=4, max_num_batched_tokens=mnbt,
                        blocks_for_tokens=rule.steady, step_blocks=rule, async_scheduling=False)


def _hits(specs: list[RequestSpec], mnbt: int = 64) -> list[int]:
    return [r.num_cached_tokens for r in simulate(specs, _cfg(ALL, mnbt=mnbt), STEP).records.records]


def test_the_manager_takes_all_mode_layouts():
    assert supports_hybrid_caching(ALL) and isinstance(make_kv_manager(_cfg(ALL)), HybridKVManager)
    assert not supports_hybrid_caching(StepBlockRule(ALL.groups, 64, 64))  # "none": one page, no caching modelled


def test_a_resent_prompt_hits_its_last_block_but_one():
    # 16 tokens twice: the first hashes the states after 4, 8, 12, 16; the second's chain is capped at
    # (16 − 1) // 4 = 3 blocks, whose last state (after 12) is cached → 12
    assert _hits([RequestSpec(n, t, 16, 1, (1,), 16) for n, t in (("A", 0.0), ("B", 1.0))]) == [0, 12]


def test_a_shared_prefix_is_hit_from_the_second_request():
    # three 20-token prompts sharing 12 (3 blocks), one after another, each prefilled in one chunk: A hashes the
    # states of its full blocks, the shared ones after 4, 8, 12 among them, so B and C hit 12 (align mode at 0.19 only
    # has the chunk ends, 8 with 8-token chunks: tests/dynamics/test_mamba_prefix.py)
    specs = [RequestSpec(n, t, 20, 1, (1,), 12) for n, t in (("A", 0.0), ("B", 1.0), ("C", 2.0))]
    assert _hits(specs) == [0, 12, 12]
    assert _hits(specs, mnbt=8) == [0, 12, 12]  # chunks 0 → 8 → 16 → 20: the page of every block is hashed anyway


def test_pages_per_step():
    # a page per block of the step's tokens less those before the last computed token's: a 10-token first chunk
    # holds cdiv(10, 4) = 3 pages; the next chunk 10 → 20 drops blocks before token 9 (2), takes 3..4: 5 − 2 = 3;
    # decode at 20 → 21 crosses into block 5: pages 4 and 5 = 2; at 21 → 22 only 5 = 1
    assert [ALL.state_pages(c, n, 4) for c, n in ((0, 10), (10, 10), (20, 1), (21, 1))] == [3, 3, 2, 1]
    # the checks count a page per block: admission of 20 tokens cdiv(20, 4) = 5 per group, 3 groups = 15;
    # start-up at max_model_len 64: 16 per group = 48
    assert (ALL.admission(20), ALL.startup(64)) == (15, 48)
    assert ALL.steps_before_crossing([20], [5], 5) == 0 and ALL.steps_before_crossing([21], [5], 5) == 3


def test_a_state_hashed_in_this_schedule_is_hit_from_the_next():
    # D and E, the same 16-token prompt, arrive together (budget 64): D is admitted 0 → 16 and hashes the states after
    # 4, 8, 12, 16 in this schedule; E's hit (the state after 12) is one of them, so vLLM refuses it in this step
    # (cached_blocks_this_step) and admission stops; next step E hits 12 and runs 12 → 16
    specs = [RequestSpec("D", 0.0, 16, 1, (5,), 16), RequestSpec("E", 0.0, 16, 1, (5,), 16)]
    cfg = _cfg(ALL)
    kv = make_kv_manager(cfg)
    s = Scheduler(cfg, kv)
    d, e = SimRequest(0, specs[0]), SimRequest(1, specs[1])
    s.waiting.extend([d, e])
    out = s.schedule()
    assert out.scheduled == [(d, 16)]
    for r, n in out.scheduled:
        r.num_computed_tokens += n
    out = s.schedule()
    assert (e, 4) in out.scheduled and e.num_cached_tokens == 12


@pytest.mark.parametrize("seed", [3, 5])
def test_held_pages_are_the_step_rules_and_nothing_leaks(seed):
    # every scheduled request holds exactly StepBlockRule.held_after's blocks and pages, through hits and
    # preemptions; once all finish nothing is held and every block is back in the free queue
    # start-up: 3 groups × cdiv(400, 16) = 75 pages of the 89 usable
    rule = StepBlockRule((("state", 16, 0), ("state", 16, 0), ("full", 16, 0)), 400, 128, state_per_block=True)
    cfg = EngineConfig(num_gpu_blocks=90, max_model_len=400, block_size=16, max_num_batched_tokens=128,
                       max_num_seqs=16, blocks_for_tokens=rule.steady, step_blocks=rule)
    kv = make_kv_manager(cfg)
    s, rng = Scheduler(cfg, kv), random.Random(seed)
    for i in range(60):
        s.waiting.append(SimRequest(i, RequestSpec(str(i), 0.0, rng.randint(20, 300), rng.randint(1, 60),
                                                   rng.choice([(1,), (1, 2), (3,), ()]), 100)))
    preempted = 0
    while s.running or s.waiting:
        out = s.schedule()
        preempted += len(out.preempted)
        for r, n in out.scheduled:
            assert kv.held_blocks(r) == rule.held_after(r.num_computed_tokens, n)
        for r, n in out.scheduled:
            r.num_computed_tokens += n
            if r.num_computed_tokens >= r.num_tokens:
                r.num_generated, r.num_tokens = r.num_generated + 1, r.num_tokens + 1
                if r.num_generated >= r.num_output_tokens:
                    s.running.remove(r)
                    kv.free(r, False)
    assert preempted > 0 and kv.prefix_stats.hits > 0
    assert kv._held == 0 and kv.num_used_blocks == 0 and kv.num_free_blocks == 89
