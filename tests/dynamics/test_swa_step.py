"""vLLM's per-step sliding-window block rule (swa_step.py): the engine audit's scenario S3, and the rule's
arithmetic."""

from __future__ import annotations

import pytest

from kvledger.accounting.kvlayout import AllocGroup, KVLayout
from kvledger.accounting.stepcost import FixedStepCost
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.dynamics.engine.swa_step import StepBlockRule
from kvledger.dynamics.simulator import EngineConfig, simulate

STEP = FixedStepCost(per_step_s=0.010)
# one full-attention group + one sliding-window group (W = 8 tokens), block 4 tokens, one shared pool
LAYOUT = KVLayout((AllocGroup("full", 1, 1, 4, 1), AllocGroup("sliding_window", 1, 1, 4, 1, 8)), 1, 4, 0)
RULE = StepBlockRule.from_layout(LAYOUT, max_model_len=32, inflight_tokens=2 * 64)


def test_rule_arithmetic():
    # a 30-token chunk from scratch: full cdiv(30, 4) = 8, sliding 8 (nothing processed yet to skip) = 16
    assert RULE.held_after(0, 30) == 16
    # next decode (30 computed, 1 new): full cdiv(31, 4) = 8; sliding 8 − (30 − 8 + 1) // 4 = 8 − 5 = 3 → 11
    assert RULE.held_after(30, 1) == 11 == RULE.steady(31) == LAYOUT.blocks_for_tokens(31)
    # admission of 30 tokens: full 8 + sliding min(cdiv(30, 4) = 8, cdiv(min(7 + 128, 32), 4) + 1 = 9) = 16
    assert RULE.admission(30) == 16
    # vLLM's start-up check R(32) = 8 + 9 = 17 ≤ 22 usable blocks
    assert LAYOUT.blocks_per_request(32, 128) == 17


@pytest.mark.parametrize("async_", [False, True])
def test_s3_sliding_window_blocks_are_held_for_the_whole_chunk(async_):
    # 22 usable blocks; A and B = 30 prompt + 2 output at t=0. Each 30-token prompt needs 16 blocks to be admitted
    # and computed. Step 1 [A 30] (16 held, 6 free: B waits); step 2 [A 1] (11 held after the out-of-window blocks
    # are freed; B still needs 16 > 11); A ends → step 3 [B 30] 20–30 ms: B's first token at 30 ms, sync and async
    # (async: step 2 is scheduled with A's chunk in flight, so its blocks are still held; step 3, scheduled at 10 ms
    # with A's last token in flight, is empty, and B goes at 20 ms). The steady-state count (11 blocks) admits both
    # at once and gives B its first token at 10 ms.
    kw = dict(num_gpu_blocks=23, max_model_len=32, block_size=4, max_num_batched_tokens=64, max_num_seqs=8,
              enable_prefix_caching=False, blocks_for_tokens=LAYOUT.blocks_for_tokens, async_scheduling=async_)
    reqs = [RequestSpec("A", 0.0, 30, 2), RequestSpec("B", 0.0, 30, 2)]
    res = simulate(reqs, EngineConfig(step_blocks=RULE, **kw), STEP, record_steps=True, fast_forward=False)
    recs = {r.request_id: r for r in res.records.records}
    steps = [(round(d["start_s"] * 1e3), d["batch"]) for d in res.steps[0].dicts()]
    assert steps[:3] == [(0, [["A", 30]]), (10, [["A", 1]]), (20, [["B", 30]])]
    assert [round(t * 1e3) for t in recs["B"].chunk_times_s] == [30, 40]
    old = simulate(reqs, EngineConfig(**kw), STEP).records.records
    assert round(old[1].first_token_s * 1e3) == 10


def test_plan_brings_the_rule_for_sliding_window_models():
    from kvledger.accounting.plan import build_plan
    from kvledger.accounting.settings import PlanSettings
    from kvledger.analyses.serving.from_plan import engine_config_from_plan
    from kvledger.catalog.gpus import get_gpu
    from kvledger.catalog.models import load_model

    p = build_plan(load_model("google/gemma-2-9b-it", allow_hub=False), get_gpu("H100-SXM"),
                   PlanSettings(max_model_len=8192), with_roofline=False, with_advice=False)
    cfg, notes = engine_config_from_plan(p)
    rule = cfg.step_blocks
    assert rule is not None and rule.inflight_tokens == p.inflight_tokens
    # steady state equals the plan's own count; a whole 8,192-token chunk holds every block of every group
    assert rule.steady(8192) == p.blocks_for_tokens(8192)
    assert rule.held_after(0, 8192) == sum(-(-8192 // g.block_size) for g in p.layout.groups if g.kind != "state")
    # 0.33: max_in_flight_tokens = max_concurrent_batches × max_num_batched_tokens, 2 with async scheduling, else 1
    mnbt = p.memory.max_num_batched_tokens
    assert rule.inflight_tokens == 2 * mnbt
    sync, _ = engine_config_from_plan(p, async_scheduling=False)
    assert sync.step_blocks.inflight_tokens == mnbt


# one full-attention group + one Mamba state group, block 4 tokens; "align" mode with a prefill-checkpoint page (vLLM
# 0.33: 2 + 1 = 3 pages at the start-up check), "none" (1 page) and "all" (a page per block, 0.19–0.27)
MAMBA = KVLayout((AllocGroup("full", 1, 1, 4, 1), AllocGroup("state", 1, 1, 4, 1, 0, 3)), 1, 4, 0)
MAMBA_RULE = StepBlockRule.from_layout(MAMBA, max_model_len=32, inflight_tokens=128)


def test_mamba_state_pages_follow_mamba_manager():
    assert (MAMBA_RULE.state_boundary_page, MAMBA_RULE.state_checkpoint_pages) == (True, 1)
    # a 10-token prompt from scratch: full cdiv(10, 4) = 3; state: the running page + the checkpoint page (the chunk
    # ends past the first block: MambaManager caps the new pages at 1 + checkpoint) = 2 → 5
    assert MAMBA_RULE.held_after(0, 10) == 5
    # a 3-token prompt stays within one block: no checkpoint, 1 + 1 = 2
    assert MAMBA_RULE.held_after(0, 3) == 2
    # the next decode step: remove_skipped_blocks (computed − 1 tokens skipped) frees the checkpoint page → 3 + 1
    assert MAMBA_RULE.held_after(10, 1) == 4 == MAMBA_RULE.steady(11) == MAMBA.blocks_for_tokens(11)
    # a decode step scheduled at 12 computed (a multiple of the block) writes page 3 while page 2 holds the state it
    # reads: full cdiv(13, 4) = 4 + 2 pages = 6, one more than the steady 5 (the next step frees page 2)
    assert (MAMBA_RULE.held_after(12, 1), MAMBA_RULE.steady(13)) == (6, 5)
    # a decode stretch stops before the first such step: at 10 computed 2 steps (10, 11), at 5 computed 3 (5, 6, 7);
    # a request finishing before its crossing (1 step left at 11 computed) does not stop it
    assert MAMBA_RULE.steps_before_crossing([10, 5], [10, 10], 8) == 2
    assert MAMBA_RULE.steps_before_crossing([11, 5], [1, 10], 8) == 3
    # a second chunk 10 → 16 crosses from page 2 ((10 − 1) // 4) to page 3 ((16 − 1) // 4): full 4 + state 1 + the
    # page it reads = 6, and no checkpoint even as the prompt's last chunk: it starts mid-block (10 % 4 ≠ 0,
    # is_mamba_prefill_checkpoint_valid)
    assert MAMBA_RULE.held_after(10, 6) == MAMBA_RULE.held_after(10, 6, at_end=False) == 6
    # the chunk 8 → 16 reaching the prefill end: start 8 % 4 = 0, checkpoint column cdiv(16, 4) − 2 = 2 > initial-state
    # column (8 − 1) // 4 = 1, position (16 − 1) // 4 × 4 = 12 with 8 + 4 ≤ 12 and 8 < 12 < 16 → full 4 + state 1
    # + the page it reads ((8 − 1) // 4 = 1 ≠ 3) + checkpoint = 7; a chunk 8 → 16 that stops short of the prefill end
    # takes no checkpoint (_needs_internal_checkpoint: query_end ≥ prefill_end): 6
    assert (MAMBA_RULE.held_after(8, 8), MAMBA_RULE.held_after(8, 8, at_end=False)) == (7, 6)
    # 8 → 12 ends on the next boundary only: column cdiv(12, 4) − 2 = 1, not > 1; position 8, not > start 8 → 3 + 2 = 5
    assert MAMBA_RULE.held_after(8, 4) == 5
    # an intermediate chunk 0 → 10 of a longer prompt: full 3 + state 1 (nothing read yet, no checkpoint) = 4
    assert MAMBA_RULE.held_after(0, 10, at_end=False) == 4
    # admission (apply_admission_cap): 1 + checkpoint past the first block, 1 within it
    assert (MAMBA_RULE.admission(10), MAMBA_RULE.admission(3)) == (5, 2)
    # vLLM's start-up check at 32 tokens: 8 + 3 = 11
    assert MAMBA.blocks_per_request(32, 128) == 11
    none = StepBlockRule.from_layout(KVLayout((MAMBA.groups[0], AllocGroup("state", 1, 1, 4, 1, 0, 1)), 1, 4, 0),
                                     32, 128)
    per_block = StepBlockRule.from_layout(KVLayout((MAMBA.groups[0], AllocGroup("state", 1, 1, 4, 1, 0, 1, True)), 1,
                                                   4, 0), 32, 128)
    # "none": one page in every step → full 3 + 1, 4 + 1, admission 3 + 1
    assert (none.held_after(0, 10), none.held_after(10, 6), none.admission(10)) == (4, 5, 4)
    # "all": a page per block of the step's tokens less those before the last computed token's: 0 → 10 holds
    # cdiv(10, 4) = 3 pages (+ full 3 = 6); 10 → 16 holds 4 − (10 − 1) // 4 = 2 (+ full 4 = 6); admission counts
    # cdiv(10, 4) = 3 pages (+ full 3 = 6)
    assert (per_block.held_after(0, 10), per_block.held_after(10, 6), per_block.admission(10)) == (6, 6, 6)


def test_mamba_checkpoint_page_delays_a_second_admission():
    # 8 usable blocks; A and B = 10 prompt + 2 output at t = 0. Each admission needs 3 full blocks + 2 state pages = 5:
    # step 1 [A 10] (5 held, 3 free: B waits); step 2 [A 1] (the checkpoint page freed: 4 held, 4 free < 5, B waits);
    # A ends → step 3 [B 10]. Counting 1 state page (4 blocks a request) admits both at step 1.
    kw = dict(num_gpu_blocks=9, max_model_len=12, block_size=4, max_num_batched_tokens=64, max_num_seqs=8,
              enable_prefix_caching=False, blocks_for_tokens=MAMBA.blocks_for_tokens, async_scheduling=False)
    reqs = [RequestSpec("A", 0.0, 10, 2), RequestSpec("B", 0.0, 10, 2)]
    res = simulate(reqs, EngineConfig(step_blocks=MAMBA_RULE, **kw), STEP, record_steps=True, fast_forward=False)
    steps = [(round(d["start_s"] * 1e3), d["batch"]) for d in res.steps[0].dicts()]
    assert steps[:3] == [(0, [["A", 10]]), (10, [["A", 1]]), (20, [["B", 10]])]
    one_page = StepBlockRule(MAMBA_RULE.groups, 32, 128)
    res1 = simulate(reqs, EngineConfig(step_blocks=one_page, **kw), STEP, record_steps=True, fast_forward=False)
    assert [d["batch"] for d in res1.steps[0].dicts()][0] == [["A", 10], ["B", 10]]


def test_mamba_aligned_chunk_follows_the_block_aligned_split():
    # B = 4, step limit 64 tokens; a 10-token prompt (prefill end max(10, 10 − 1) = 10)
    # 0 → 7 stops short of the end: cut to 7 // 4 × 4 = 4 tokens; 0 → 3 would be cut to 0 (B = 4 ≤ 64)
    assert (MAMBA_RULE.aligned_chunk(0, 7, 10, 10, 64), MAMBA_RULE.aligned_chunk(0, 3, 10, 10, 64)) == (4, 0)
    # … but with a block wider than the limit (B = 4 > 2) a chunk with no boundary inside keeps its tokens
    assert MAMBA_RULE.aligned_chunk(0, 2, 10, 10, 2) == 2
    # the last chunk 4 → 10 is not cut: it can export the checkpoint at (10 − 1) // 4 × 4 = 8 (4 % 4 = 0, column
    # cdiv(10, 4) − 2 = 1 > (4 − 1) // 4 = 0, 4 + 4 ≤ 8, 4 < 8 < 10) → 6
    assert MAMBA_RULE.aligned_chunk(4, 6, 10, 10, 64) == 6
    # without a checkpoint page it stops at the last cacheable boundary 8 (4 < 8 < 10): 4 tokens, then 8 → 10
    no_ck = StepBlockRule(MAMBA_RULE.groups, 32, 128, state_boundary_page=True)
    assert (no_ck.aligned_chunk(4, 6, 10, 10, 64), no_ck.aligned_chunk(8, 2, 10, 10, 64)) == (4, 2)
    # a chunk starting mid-block (6, limit 2 < B earlier) without an internal checkpoint stops at the next boundary 8
    assert no_ck.aligned_chunk(6, 4, 10, 10, 64) == 2
    # decode (computed 10 ≥ prefill end 10, 11 tokens known) is never cut
    assert MAMBA_RULE.aligned_chunk(10, 1, 10, 11, 64) == 1


# Qwen3-Next-like hybrid at block 320 tokens (one full group, one align-mode state group with a checkpoint page)
MAMBA_320 = KVLayout((AllocGroup("full", 1, 1, 320, 1), AllocGroup("state", 1, 1, 320, 1, 0, 3)), 1, 320, 0)


def test_mamba_align_prefill_chunks_end_on_block_boundaries():
    # max_num_batched_tokens 2048, block 320; A = 5,000-token prompt, B = 100, C = 1,000 (2 output tokens each, t = 0)
    # step 1: A min(5000, 2048) = 2048 stops short of 5000 → 2048 // 320 × 320 = 1920; 128 left: B's whole 100-token
    #   prompt is its last chunk (not cut); 28 left: C's 28 < 1000 is cut to 0 (320 ≤ 2048) → admission stops
    # step 2: A 1920 → 3968 cut to 3840: 1920; B decodes 1 (its 2nd token: done); 127 left, C cut to 0 again
    # step 3: A's last chunk 3840 → 5000 = 1160 (exports the checkpoint at 4800: 3840 % 320 = 0, column 16 − 2 = 14
    #   > 11, 3840 + 320 ≤ 4800 < 5000: not cut); 888 left: C 888 < 1000 → 888 // 320 × 320 = 640
    # step 4: A decodes 1 (done); C's last chunk 640 → 1000 = 360; step 5: C decodes 1
    kw = dict(num_gpu_blocks=64, max_model_len=5120, block_size=320, max_num_batched_tokens=2048, max_num_seqs=8,
              enable_prefix_caching=False, blocks_for_tokens=MAMBA_320.blocks_for_tokens, async_scheduling=False)
    reqs = [RequestSpec("A", 0.0, 5000, 2), RequestSpec("B", 0.0, 100, 2), RequestSpec("C", 0.0, 1000, 2)]
    rule = StepBlockRule.from_layout(MAMBA_320, max_model_len=5120, inflight_tokens=2048)
    res = simulate(reqs, EngineConfig(step_blocks=rule, **kw), STEP, record_steps=True, fast_forward=False)
    assert [d["batch"] for d in res.steps[0].dicts()] == [
        [["A", 1920], ["B", 100]], [["A", 1920], ["B", 1]], [["A", 1160], ["C", 640]], [["A", 1], ["C", 360]],
        [["C", 1]]]
    # without align mode (one state page, no cut): A 2048 fills step 1 and 2, then A's 904 + B 100 + C 1000 = 2004
    flat = StepBlockRule(rule.groups, 5120, 2048)
    res1 = simulate(reqs, EngineConfig(step_blocks=flat, **kw), STEP, record_steps=True, fast_forward=False)
    assert [d["batch"] for d in res1.steps[0].dicts()][:3] == [
        [["A", 2048]], [["A", 2048]], [["A", 904], ["B", 100], ["C", 1000]]]
