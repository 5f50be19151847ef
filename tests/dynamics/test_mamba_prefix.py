"""Prefix caching for hybrid full-attention + Mamba layouts in vLLM's align mode (mamba_prefix.py), per release
(accounting/mamba_prefix_rules.py).

The worked case: 20 prompts of 32,000 tokens sent one after another, each sharing a 30,000-token prefix, block B = 576
(Qwen3-Next's hybrid block at TP 2 on H200, vLLM 0.33), max_num_batched_tokens 8,192, one output token each.

* Shared full blocks: 30,000 // 576 = 52 (29,952 tokens); the hit cap (32,000 − 1) // 576 = 55 blocks is above it.
* A prefill chunk of 8,192 tokens is cut to a block boundary: 8,192 // 576 = 14 blocks = 8,064 tokens. A fresh prompt
  runs 0 → 8,064 → 16,128 → 24,192, then the last 7,808 tokens (≤ 8,192) to 32,000 (the last cacheable boundary
  (32,000 − 1) // 576 × 576 = 31,680 is the only other stop; no checkpoint page here, so the chunk stops there:
  24,192 → 31,680 → 32,000). Its states at 8,064, 16,128 and 24,192 are in the shared prefix (blocks 13, 27, 41).
* Request 1 hits nothing at any release: 0.
* vLLM 0.29–0.33 (prefix_cache_retention_interval 0): request 1 keeps only the state at its last boundary, 31,680
  (its own). Request 2: full chain 52 blocks, no state cached in it → hit 0; junction 29,952 → the chunk from 24,192
  stops at 29,952 and that state is kept. Requests 3–20 hit 29,952.
  18 × 29,952 = 539,136 of 20 × 32,000 = 640,000 prompt tokens: 84.2%.
* vLLM 0.26–0.28 (every chunk end kept; junction stop): request 2 walks the chain back to the state at 24,192 → hit
  24,192; its chunk 24,192 → 32,000 stops at the junction 29,952, kept. Requests 3–20 hit 29,952.
  24,192 + 18 × 29,952 = 563,328: 88.0%. (0.24–0.25 cut the admitted chunk at the junction: the same here.)
* vLLM 0.19–0.23 with --enable-prefix-caching (every chunk end kept, no junction stop): requests 2–20 hit 24,192;
  none ends a chunk at 29,952. 19 × 24,192 = 459,648: 71.8%. By default 0.19–0.25 launch a hybrid with prefix caching
  off (mamba_cache_mode none): 0%.
"""

from __future__ import annotations

import pytest

from kvledger.accounting.mamba_prefix_rules import mamba_prefix_rule, mamba_split
from kvledger.accounting.stepcost import FixedStepCost
from kvledger.dynamics.engine.mamba_prefix import MambaPrefixKVManager, supports_mamba_caching
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.dynamics.engine.swa_step import StepBlockRule
from kvledger.dynamics.simulator import EngineConfig, simulate

STEP = FixedStepCost(per_step_s=0.010)


def _run(version: str, specs, B: int, mnbt: int, max_len: int, blocks: int, checkpoint_pages: int = 0):
    rule = StepBlockRule((("state", B, 0), ("state", B, 0), ("full", B, 0)), max_len, mnbt, True, checkpoint_pages,
                         state_prefix=mamba_prefix_rule(version))
    cfg = EngineConfig(num_gpu_blocks=blocks, max_model_len=max_len, block_size=B, max_num_batched_tokens=mnbt,
                       blocks_for_tokens=rule.steady, step_blocks=rule, async_scheduling=False)
    return simulate(specs, cfg, STEP, record_steps=True, fast_forward=False)


def _worked(version: str, checkpoint_pages: int = 0):
    specs = [RequestSpec(f"r{i}", 10.0 * i, 32_000, 1, (7,), 30_000) for i in range(20)]
    res = _run(version, specs, 576, 8192, 40_000, 400, checkpoint_pages)
    return [r.num_cached_tokens for r in res.records.records]


@pytest.mark.parametrize("version, hits, rate", [
    ("0.33.0", [0, 0] + [29_952] * 18, 0.842),
    ("0.28.0", [0, 24_192] + [29_952] * 18, 0.880),
    ("0.19.0", [0] + [24_192] * 19, 0.718),
])
def test_worked_case_per_release(version, hits, rate):
    got = _worked(version)
    assert got == hits
    assert round(sum(got) / 640_000, 3) == rate


def test_worked_case_with_a_checkpoint_page_hits_the_same():
    # 0.33 on Hopper (GDN FlashInfer): the last chunk 24,192 → 32,000 exports the state at 31,680 into its checkpoint
    # page instead of stopping there; that state is request 1's own, so the hits are unchanged
    assert _worked("0.33.0", checkpoint_pages=1) == [0, 0] + [29_952] * 18


@pytest.mark.parametrize("version, hits, chunks_b", [
    ("0.33.0", [0, 0, 12], [8, 4, 4, 4]),
    ("0.28.0", [0, 8, 12], [4, 4, 4]),
    ("0.19.0", [0, 8, 8], [8, 4]),
])
def test_small_case_by_hand(version, hits, chunks_b):
    # B = 4, max_num_batched_tokens 8, three 20-token prompts sharing 12 (3 blocks), one after another. A fresh prompt
    # runs 0 → 8 → 16 → 20 (8 < 20 is block-aligned; the last boundary (20 − 1) // 4 × 4 = 16 is a chunk end).
    # 0.33: A keeps only the state at 16 (not shared): B hits 0, its junction 12 cuts 8 → 16 to 8 → 12 (kept), then
    #       12 → 16 (the last boundary), 16 → 20; C hits 12.
    # 0.28: A keeps its states at 8 and 16; B walks the 3-block chain back to 8 (hit 8), chunk 8 → 16 stops at the
    #       junction 12 (kept), then 12 → 16, 16 → 20; C hits 12.
    # 0.19: B hits 8 and runs 8 → 16 → 20 with no stop at 12; C hits 8 too.
    specs = [RequestSpec(n, t, 20, 1, (1,), 12) for n, t in (("A", 0.0), ("B", 1.0), ("C", 2.0))]
    res = _run(version, specs, 4, 8, 64, 40)
    assert [r.num_cached_tokens for r in res.records.records] == hits
    steps = [d["batch"] for d in res.steps[0].dicts()]
    assert [b[0][1] for b in steps if b[0][0] == "B"] == chunks_b


def test_state_pages_follow_the_step_rule_and_stay_cached():
    # 0.28, after B's admission with an 8-token hit (B = 4): the full group holds blocks 0..2 (12 tokens after the
    # 8 → 12 chunk) and each of the 2 state groups the hit page it reads and the new page: 3 + 2 × 2 = 7 =
    # held_after(8, 4); A's freed registered pages stay in the pool's cache (free queue) until evicted
    specs = [RequestSpec("A", 0.0, 20, 1, (1,), 12), RequestSpec("B", 1.0, 20, 1, (1,), 12)]
    rule = StepBlockRule((("state", 4, 0), ("state", 4, 0), ("full", 4, 0)), 64, 8, True, 0,
                         state_prefix=mamba_prefix_rule("0.28.0"))
    assert rule.held_after(8, 4) == 7
    cfg = EngineConfig(num_gpu_blocks=40, max_model_len=64, block_size=4, max_num_batched_tokens=8,
                       blocks_for_tokens=rule.steady, step_blocks=rule, async_scheduling=False)
    kv = MambaPrefixKVManager(cfg.num_gpu_blocks, rule)
    from kvledger.dynamics.engine.request_state import SimRequest
    from kvledger.dynamics.engine.scheduler import Scheduler

    s = Scheduler(cfg, kv)
    a, b = SimRequest(0, specs[0]), SimRequest(1, specs[1])
    s.waiting.append(a)
    for _ in range(4):  # A: 0 → 8 → 16 → 20, then done
        for r, n in s.schedule().scheduled:
            r.num_computed_tokens += n
    s.running.remove(a)
    kv.free(a, False)
    assert kv._held == 0 and kv.pool.num_cached_blocks == 3 + 2  # 3 shared full blocks + the state at 8 per group
    s.waiting.append(b)
    out = s.schedule()
    assert out.scheduled == [(b, 4)] and kv.held_blocks(b) == 7 == kv.num_used_blocks


def test_supported_layouts():
    rule = StepBlockRule((("state", 4, 0), ("full", 4, 0)), 64, 8, True, 0, state_prefix=mamba_prefix_rule("0.33.0"))
    assert supports_mamba_caching(rule)
    # "none" mode (one page, no boundary page), an unknown release, mixed block sizes, a sliding group: not modelled
    assert not supports_mamba_caching(StepBlockRule(rule.groups, 64, 8, False, 0, state_prefix=rule.state_prefix))
    assert not supports_mamba_caching(StepBlockRule(rule.groups, 64, 8, True, 0, state_prefix=None))
    assert not supports_mamba_caching(StepBlockRule((("state", 8, 0), ("full", 4, 0)), 64, 8, True, 0,
                                                    state_prefix=rule.state_prefix))
    assert not supports_mamba_caching(StepBlockRule((("state", 4, 0), ("sliding_window", 4, 8)), 64, 8, True, 0,
                                                    state_prefix=rule.state_prefix))


def test_release_table():
    # read in each release's _mamba_block_aligned_split and MambaManager.cache_blocks (module doc of the rules)
    got = {v: (r.every_chunk_end, r.junction_stop) for v in ("0.19.0", "0.23.0", "0.24.0", "0.25.0", "0.26.0",
                                                           "0.28.0", "0.29.0", "0.33.0")
           for r in [mamba_prefix_rule(v)]}
    assert got == {"0.19.0": (True, "none"), "0.23.0": (True, "none"), "0.24.0": (True, "first_chunk"),
                   "0.25.0": (True, "first_chunk"), "0.26.0": (True, "every_chunk"), "0.28.0": (True, "every_chunk"),
                   "0.29.0": (False, "every_chunk"), "0.33.0": (False, "every_chunk")}
    assert mamba_prefix_rule("0.18.0") is None


def test_release_table_with_the_environment_variable():
    # VLLM_PREFIX_CACHE_RETENTION_INTERVAL = 8 (envs.py, 0.23–0.28): 0.23's MambaManager has no reachable_block_mask
    # (the base class's None: dense, the interval dropped); 0.24/0.25's keeps the replay boundary only
    # (num_prompt_tokens), 0.26–0.28's the junction too (reachable_boundaries); 0.29 on: the flag, junction kept
    got = {v: (r.every_chunk_end, r.retention_interval, r.keeps_junction)
           for v in ("0.23.0", "0.25.0", "0.26.0", "0.28.0", "0.33.0") for r in [mamba_prefix_rule(v, 8)]}
    assert got == {"0.23.0": (True, 0, True), "0.25.0": (False, 8, False), "0.26.0": (False, 8, True),
                   "0.28.0": (False, 8, True), "0.33.0": (False, 8, True)}
    assert "(no junction)" in mamba_prefix_rule("0.25.0", 8).text


def test_a_state_registered_in_this_schedule_is_hit_from_the_next():
    # 0.33, B = 4, max_num_batched_tokens 8; A (alone) as in the small case; B and C arrive together after it.
    # step 1: B 0 → 8 (hit 0, junction 12), no budget for C. step 2: B 8 → 12 (cut at the junction, its state
    # registered in this schedule); C would hit 12 with the 4 tokens left, but vLLM refuses a hit on a state cached
    # in the same step (cached_blocks_this_step) and stops admission. step 3: B 12 → 16, C hits 12: 12 → 16.
    specs = [RequestSpec("A", 0.0, 20, 1, (1,), 12), RequestSpec("B", 1.0, 20, 1, (1,), 12),
             RequestSpec("C", 1.0, 20, 1, (1,), 12)]
    res = _run("0.33.0", specs, 4, 8, 64, 40)
    steps = [d["batch"] for d in res.steps[0].dicts()]
    assert steps[3:] == [[["B", 8]], [["B", 4]], [["B", 4], ["C", 4]], [["B", 4], ["C", 4]]]
    assert [r.num_cached_tokens for r in res.records.records] == [0, 0, 12]


@pytest.mark.parametrize("version, hit, first_chunk", [("0.28.0", 12, 4), ("0.33.0", 4, 8)])
def test_a_sessions_next_turn_hits_a_decoded_state_only_where_every_chunk_end_is_kept(version, hit, first_chunk):
    # B = 4. Turn 1: an 8-token prompt (segments 1, 2) and 8 output tokens continuing it (segments 3, 4). Its prefill
    # stops at its last boundary (8 − 1) // 4 × 4 = 4: chunks 0 → 4 → 8; decoding computes tokens 8..14 and crosses 12.
    # Turn 2 repeats those 16 tokens and adds 4: full chain 3 blocks (token 15 was never computed, block 3 not cached).
    # 0.28 keeps every block-aligned state (4, 8 and, decoding, 12): hit 12. 0.33 keeps only turn 1's last prompt
    # boundary, 4: hit 4. Turn 2's first chunk: 12 → 16 (its last boundary (20 − 1) // 4 × 4 = 16), or 4 → 12 (8
    # tokens, block-aligned; the junction 12 is its end).
    specs = [RequestSpec("t1", 0.0, 8, 8, (1, 2), 4, output_segments=(3, 4)),
             RequestSpec("t2", 1.0, 20, 1, (1, 2, 3, 4), 4)]
    res = _run(version, specs, 4, 8, 64, 40)
    assert [r.num_cached_tokens for r in res.records.records] == [0, hit]
    steps = [d["batch"] for d in res.steps[0].dicts()]
    assert [b[0][1] for b in steps if b[0][0] == "t2"][0] == first_chunk


@pytest.mark.parametrize("version, checkpoint_pages, interval", [
    ("0.19.0", 0, 0), ("0.24.0", 0, 0), ("0.28.0", 0, 0), ("0.33.0", 1, 0), ("0.33.0", 1, 32), ("0.29.0", 0, 48)])
def test_held_pages_are_the_step_rules_and_nothing_leaks(version, checkpoint_pages, interval):
    # every scheduled request holds exactly StepBlockRule.held_after's blocks and pages (the count the pool and the
    # admission check use), through hits, junction stops, checkpoint pages and preemptions; once all finish, nothing
    # is held and every block is back in the free queue (cached ones too)
    import random

    from kvledger.dynamics.engine.kv_factory import make_kv_manager
    from kvledger.dynamics.engine.request_state import SimRequest
    from kvledger.dynamics.engine.scheduler import Scheduler

    rule = StepBlockRule((("state", 16, 0), ("state", 16, 0), ("full", 16, 0)), 600, 128, True, checkpoint_pages,
                         state_prefix=mamba_prefix_rule(version, interval), state_split=mamba_split(version))
    cfg = EngineConfig(num_gpu_blocks=90, max_model_len=600, block_size=16, max_num_batched_tokens=128,
                       max_num_seqs=16, blocks_for_tokens=rule.steady, step_blocks=rule)
    kv = make_kv_manager(cfg)
    assert isinstance(kv, MambaPrefixKVManager)
    s, rng = Scheduler(cfg, kv), random.Random(7)
    for i in range(60):
        s.waiting.append(SimRequest(i, RequestSpec(str(i), 0.0, rng.randint(20, 400), rng.randint(1, 60),
                                                   rng.choice([(1,), (1, 2), (3,), ()]), 100)))
    preempted = 0
    while s.running or s.waiting:
        out = s.schedule()
        preempted += len(out.preempted)
        for r, n in out.scheduled:
            c = r.num_computed_tokens
            assert kv.held_blocks(r) == rule.held_after(c, n, c + n >= max(r.num_prompt_tokens, r.num_tokens - 1))
        for r, n in out.scheduled:
            r.num_computed_tokens += n
            if r.num_computed_tokens >= r.num_tokens:
                r.num_generated, r.num_tokens = r.num_generated + 1, r.num_tokens + 1
                if r.num_generated >= r.num_output_tokens:
                    s.running.remove(r)
                    kv.free(r, False)
    assert preempted > 0 and kv.prefix_stats.hits > 0
    assert kv._held == 0 and kv.num_used_blocks == 0 and kv.num_free_blocks == 89


# --prefix-cache-retention-interval (vLLM 0.29 on; MambaManager.reachable_block_mask keeps the state block i with
# (i + 1) % (I / B) == 0, i.e. the state after every multiple of I tokens, where a chunk ends or checkpoints there)


def _worked_interval(interval: int, checkpoint_pages: int = 0) -> list[int]:
    specs = [RequestSpec(f"r{i}", 10.0 * i, 32_000, 1, (7,), 30_000) for i in range(20)]
    rule = StepBlockRule((("state", 576, 0), ("state", 576, 0), ("full", 576, 0)), 40_000, 8192, True,
                         checkpoint_pages, state_prefix=mamba_prefix_rule("0.33.0", interval))
    cfg = EngineConfig(num_gpu_blocks=400, max_model_len=40_000, block_size=576, max_num_batched_tokens=8192,
                       blocks_for_tokens=rule.steady, step_blocks=rule, async_scheduling=False)
    return [r.num_cached_tokens for r in simulate(specs, cfg, STEP).records.records]


@pytest.mark.parametrize("checkpoint_pages", [0, 1])
def test_a_retention_interval_on_the_chunk_grid_keeps_the_chunk_end_states(checkpoint_pages):
    # the worked case at 0.33 with I = 8,064 = 14 blocks (the chunk length): request 1's chunk ends 8,064, 16,128 and
    # 24,192 are multiples of I → kept (blocks 13, 27, 41); its checkpoints (7,488, 15,552, 23,616 with a page: every
    # chunk takes one under a positive interval) are not. Request 2 walks its 52-block chain back to block 41: hit
    # 24,192, then its junction 29,952 is kept; requests 3–20 hit 29,952: 24,192 + 18 × 29,952 = 563,328 (0.28's)
    assert _worked_interval(8064, checkpoint_pages) == [0, 24_192] + [29_952] * 18


def test_a_retention_interval_off_the_chunk_grid_keeps_nothing_more():
    # I = 5,760 = 10 blocks: no chunk ends (8,064, 16,128, 24,192) nor checkpoint is a multiple of 5,760, so the
    # states kept are the default's: [0, 0] + 18 × 29,952
    assert _worked_interval(5760) == [0, 0] + [29_952] * 18


def test_every_chunk_takes_its_checkpoint_page_under_a_positive_interval():
    # 0.33 with a checkpoint page, B = 576: the chunk 0 → 8,064 can export the state at 7,488 (0 + 576 ≤ 7,488 <
    # 8,064, column cdiv(8,064, 576) − 2 = 12 > −1). Interval 0: only the chunk reaching the prefill end reserves it
    # (1 page); a positive interval: the coordinator passes prefill_end 0 (kv_cache_coordinator.py
    # get_num_blocks_to_allocate), so this chunk holds the page too (2)
    groups = (("state", 576, 0), ("full", 576, 0))
    default = StepBlockRule(groups, 40_000, 8192, True, 1, state_prefix=mamba_prefix_rule("0.33.0"))
    periodic = StepBlockRule(groups, 40_000, 8192, True, 1, state_prefix=mamba_prefix_rule("0.33.0", 8064))
    assert (default.state_pages(0, 8064, 576, at_end=False), periodic.state_pages(0, 8064, 576, at_end=False)) == (1, 2)


def test_the_interval_keeps_states_on_its_multiples():
    rule = mamba_prefix_rule("0.33.0", 1152)  # B = 576: 2 blocks per segment
    assert [p for p in range(576, 5185, 576) if rule.keeps_periodic(p, 576)] == [1152, 2304, 3456, 4608]
    assert all(mamba_prefix_rule("0.33.0", 576).keeps_periodic(p, 576) for p in (576, 1152))  # I / B ≤ 1: dense
    assert not mamba_prefix_rule("0.33.0").keeps_periodic(1152, 576)  # 0: the boundaries only


# the chunk split's last stop per release (_mamba_block_aligned_split's last_cache_position): num_tokens −
# num_tokens % B up to 0.31, (num_tokens − 1) // B × B from 0.32


def test_the_split_table():
    assert [mamba_split(v) for v in ("0.19.0", "0.26.0", "0.27.0", "0.31.0", "0.32.0", "0.33.0", None)] == \
        ["0.19", "0.19", "0.19", "0.19", "0.32", "0.32", "0.32"]


def test_a_prompt_of_a_multiple_of_b_stops_a_block_early_from_0_32():
    # B = 4, a 16-token prompt, budget 64, no checkpoint page: 0.32+ stops at (16 − 1) // 4 × 4 = 12; up to 0.31
    # the last stop is 16 − 16 % 4 = 16, the prompt's end, so one chunk
    old, new = (StepBlockRule((("state", 4, 0), ("full", 4, 0)), 64, 64, True, state_split=s) for s in ("0.19", "0.32"))
    assert (old.aligned_chunk(0, 16, 16, 16, 64), new.aligned_chunk(0, 16, 16, 16, 64)) == (16, 12)
    # a 10-token prompt (not a multiple): both stop at 8
    assert old.aligned_chunk(0, 10, 10, 10, 64) == new.aligned_chunk(0, 10, 10, 10, 64) == 8


@pytest.mark.parametrize("version, hits, chunks_a", [
    ("0.33.0", [0, 12, 12], [12, 4]), ("0.28.0", [0, 0, 12], [16]), ("0.19.0", [0, 0, 0], [16])])
def test_a_resent_prompt_of_a_multiple_of_b_per_release(version, hits, chunks_a):
    # B = 4, budget 64: A, B, C the same 16-token prompt (all shared), one after another; the hit is capped at
    # (16 − 1) // 4 = 3 blocks, so it needs the state at 12.
    # 0.33: A runs 0 → 12 → 16 and keeps the state at 12 (its last boundary) → B and C hit 12.
    # 0.28: A runs 0 → 16 in one chunk, state at 16 only → B hits 0; its junction (chain 3 blocks = 12) cuts its
    #       chunk at 12, kept → C hits 12.
    # 0.19 (--enable-prefix-caching): no junction stop → every request runs 0 → 16, no state at 12 ever → 0.
    specs = [RequestSpec(n, t, 16, 1, (1,), 16) for n, t in (("A", 0.0), ("B", 1.0), ("C", 2.0))]
    rule = StepBlockRule((("state", 4, 0), ("full", 4, 0)), 64, 64, True, state_prefix=mamba_prefix_rule(version),
                         state_split=mamba_split(version))
    cfg = EngineConfig(num_gpu_blocks=40, max_model_len=64, block_size=4, max_num_batched_tokens=64,
                       blocks_for_tokens=rule.steady, step_blocks=rule, async_scheduling=False)
    res = simulate(specs, cfg, STEP, record_steps=True, fast_forward=False)
    assert [r.num_cached_tokens for r in res.records.records] == hits
    assert [b[0][1] for b in (d["batch"] for d in res.steps[0].dicts()) if b[0][0] == "A"][:len(chunks_a)] == chunks_a
