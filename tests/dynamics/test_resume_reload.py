"""A request preempted by recompute and resumed: what HBM and the host tier give back, worked by hand.

Two requests, A and B, both at t = 0: 8 prompt tokens and 16 output tokens each, no shared content (no hit at first
arrival). 4-token blocks, 9 blocks of which 8 usable (the null block aside), synchronous scheduling, one step per
token of each request (budget 64 tokens).

* Step 1 computes both prompts (2 blocks each, 4 free) and samples each one's token 1. Step k (k ≥ 2) computes
  token 7 + k of each and samples token k: A holds ⌈(7 + k) / 4⌉ blocks.
* Step 6 gives each its 4th block (13 tokens): 0 free. Through step 9 each reaches 16 computed tokens (B: 8 prompt
  + 8 generated computed, 9 generated, num_tokens 17).
* Step 10: A needs a 5th block, none is free: the newest running request, B, is preempted (vLLM
  ``_preempt_request``). Its 16 computed tokens are 4 full blocks, all hashed; freed tail first, the free queue is
  [B3, B2, B1, B0]. A takes B3 (its hash dropped). A takes B2 at step 14 (21 tokens: 6 blocks) and finishes after
  step 16 (16 tokens sampled, 23 computed), freeing its 6 blocks.
* B waits meanwhile: its whole 17 tokens (5 blocks) never fit in the 3, then 2, free blocks.
* Step 17, B resumes with num_tokens 17: HBM still caches B0 and B1 (8 tokens: its prompt). The hit cap is
  num_tokens − 1 = 16 tokens, 4 blocks.
  - no host tier: 8 tokens from HBM, 17 − 8 = 9 recomputed.
  - host tier, vLLM 0.19.0's connector (every full block stored, prompt and output): B's 4 blocks were stored (on
    preemption at the latest); B2 and B3 load back (8 tokens), 17 − 16 = 1 recomputed (the last token).
  - host tier from vLLM 0.23.0 (``offload_prompt_only``): only B0 and B1, the prompt, were stored, and HBM has
    them: nothing loads, 9 recomputed.
"""

from __future__ import annotations

import pytest

from kvledger.accounting.stepcost import FixedStepCost
from kvledger.dynamics.engine.config import EngineConfig
from kvledger.dynamics.engine.kv_manager import PagedKVManager
from kvledger.dynamics.engine.offload import HostTier
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.dynamics.offload_sim import simulate_offload
from kvledger.dynamics.resume_stats import ResumeStats
from kvledger.dynamics.simulator import simulate

COST = FixedStepCost(0.01, 1e-5)
HOST_019 = HostTier(100, 131072, 51.2e9, 51.2e9)  # 100 blocks: nothing evicted
HOST_023 = HostTier(100, 131072, 51.2e9, 51.2e9, prompt_only=True)


def _cfg(**kw) -> EngineConfig:
    return EngineConfig(num_gpu_blocks=9, block_size=4, max_model_len=32, max_num_batched_tokens=64,
                        async_scheduling=False, **kw)


def _reqs() -> list[RequestSpec]:
    return [RequestSpec("A", 0.0, 8, 16), RequestSpec("B", 0.0, 8, 16)]


def test_without_a_host_tier_the_resume_finds_its_prompt_in_hbm_and_recomputes_the_rest():
    made = []

    def factory(cfg, index):
        made.append(PagedKVManager(cfg.num_usable_blocks + 1, cfg.block_size, True, max_model_len=cfg.max_model_len))
        return made[-1]

    res = simulate(_reqs(), _cfg(), COST, kv_manager_factory=factory)
    assert res.summary.num_preemptions == 1
    b = next(r for r in res.records.records if r.request_id == "B")
    assert b.num_preemptions == 1 and b.num_cached_tokens == 0  # the first-arrival hit
    # the resume: 17 tokens looked up, 8 found in HBM (B0, B1), so 17 − 8 = 9 recomputed
    stats = made[0].prefix_stats
    assert (stats.preempted_requests, stats.preempted_queries, stats.preempted_hits) == (1, 17, 8)


@pytest.mark.parametrize("fast_forward", [True, False])
def test_the_0_19_connector_reloads_the_resumed_requests_own_blocks(fast_forward):
    run = simulate_offload(_reqs(), _cfg(), COST, HOST_019, fast_forward=fast_forward)
    t = run.tiers
    assert run.with_offload.summary.num_preemptions == 1
    # resumes: 1; B's 17 tokens: 8 in HBM (B0, B1), 8 reloaded (B2, B3), 1 recomputed
    assert t.resume == ResumeStats(1, 17, 8, 8, 1, 0)
    # first arrivals: 16 prompt tokens, no hit anywhere: both hit rates 0, not negative
    assert (t.prompt_tokens, t.hbm_hit_tokens, t.host_hit_tokens) == (16, 0, 0)
    assert t.hbm_hit_rate == 0.0 and t.host_hit_rate == 0.0
    # the reload's 8 tokens move 8 × 131,072 B and take that over 51.2 GB/s
    assert t.loaded_bytes == 8 * 131072 and t.host_load_s == pytest.approx(8 * 131072 / 51.2e9)
    assert run.without_offload.summary.num_preemptions == 1


def test_from_0_23_only_the_prompt_is_stored_so_nothing_reloads():
    t = simulate_offload(_reqs(), _cfg(), COST, HOST_023).tiers
    assert t.resume == ResumeStats(1, 17, 8, 0, 9, 0)
    assert t.loaded_bytes == 0 and t.host_load_s == 0.0


def test_resume_accounting_refuses_parts_that_do_not_add_up():
    with pytest.raises(RuntimeError, match="resume accounting"):
        ResumeStats(1, 17, 8, 8, 2, 0)


def test_the_verdict_counts_the_resumes_reloads():
    from kvledger.analyses.judgments.offload_verdict import tier_judgment
    from kvledger.report.tier_verdict import tier_verdict_line

    j = tier_judgment(simulate_offload(_reqs(), _cfg(), COST, HOST_019).tiers)
    # no hit at first arrival, but the reload (8 tokens) is 8 / 16 = 50% of the prompt tokens: over the 1% bar
    assert j["host_hit_rate"] == 0.0 and j["resume_reload_share"] == 0.5 and j["helps"]
    assert tier_verdict_line(j).startswith("The host tier helps this workload on resume after preemption: it "
                                           "reloaded 8 of the 17 tokens the resumed requests needed back (1 "
                                           "recomputed), though it served only 0.00% of prompt tokens")
    j = tier_judgment(simulate_offload(_reqs(), _cfg(), COST, HOST_023).tiers)
    assert j["resume_reloaded_tokens"] == 0 and not j["helps"]
