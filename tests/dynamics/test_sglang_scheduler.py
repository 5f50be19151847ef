"""SGLang's own scheduler (batching='sglang'): the engine audit's scenario S5 step by step, the new_token_ratio,
retraction."""

from __future__ import annotations

import pytest

from kvledger.accounting.stepcost import FixedStepCost
from kvledger.analyses.serving.from_plan import POLICY_PRESETS
from kvledger.dynamics.engine.hicache_host import HiCacheRadixKVManager
from kvledger.dynamics.engine.offload import HostTier
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.dynamics.engine.request_state import SimRequest
from kvledger.dynamics.engine.sglang_scheduler import MIN_NEW_TOKEN_RATIO, NEW_TOKEN_RATIO_DECAY, SGLangScheduler
from kvledger.dynamics.replica import Replica
from kvledger.dynamics.simulator import EngineConfig, simulate
from kvledger.errors import InputError

STEP = FixedStepCost(per_step_s=0.010)
SGL = dict(batching="sglang", prefix_caching_policy="sglang", block_size=1)


def run(specs, **kw):
    res = simulate(specs, EngineConfig(**SGL, **kw), STEP, record_steps=True, fast_forward=False)
    recs = {r.request_id: r for r in res.records.records}
    steps = [(round(d["start_s"] * 1e3), d["batch"]) for d in res.steps[0].dicts()]
    return recs, steps, res


def ms(times):
    return [round(t * 1e3) for t in times]


def test_s5a_prefill_first_steps_pause_running_decodes():
    # Chunk budget 64 tokens, a 1,000-token pool. R1 = 16 + 8 at t=0; R2 = 128 + 2 arrives at 15 ms.
    # SGLang: step 1 PREFILL [R1 16] 0–10; step 2 DECODE [R1] 10–20; steps 3–4 PREFILL [R2 64] ×2 (20–40) with R1
    # paused; R2's first token at 40 ms (TTFT 25); step 5 DECODE [R1, R2] 40–50. R1's tokens: 10, 20, then 50:
    # one 30 ms gap. (vLLM's mixed steps give R1 a token every 10 ms and R2 its first at 50 ms.)
    recs, steps, _ = run([RequestSpec("R1", 0.0, 16, 8), RequestSpec("R2", 0.015, 128, 2)],
                         num_gpu_blocks=1001, max_model_len=512, max_num_batched_tokens=64, max_num_seqs=8)
    assert steps[:5] == [(0, [["R1", 16]]), (10, [["R1", 1]]), (20, [["R2", 64]]), (30, [["R2", 64]]),
                         (40, [["R1", 1], ["R2", 1]])]
    assert ms(recs["R2"].chunk_times_s) == [40, 50]
    assert ms(recs["R1"].chunk_times_s) == [10, 20, 50, 60, 70, 80, 90, 100]


def test_s5b_admission_reserves_the_running_requests_future_tokens():
    # A 100-token pool, budget 64; R1 and R2 = 10 prompt + 60 output (ignore_eos), both at t=0.
    # R1: 10 + 60 + 1 page = 71 < 100 free → admitted, reserving 10 + 1 + 60 = 71. R2: 71 < 100 − 71? No → waits.
    # While R1 runs, free + evictable − offset = (100 − 10 − g + 1) − (60 − g) = 31 < 71: R2 waits until R1 ends
    # (its 60th token at 600 ms), is prefilled 600–610 (TTFT 610 ms) and ends at 1,200 ms. No retraction.
    recs, steps, res = run([RequestSpec("R1", 0.0, 10, 60), RequestSpec("R2", 0.0, 10, 60)],
                           num_gpu_blocks=101, max_model_len=100, max_num_batched_tokens=64, max_num_seqs=8)
    assert steps[0] == (0, [["R1", 10]]) and steps[1] == (10, [["R1", 1]]) and steps[60] == (600, [["R2", 10]])
    assert ms(recs["R1"].chunk_times_s)[-1] == 600
    assert ms(recs["R2"].chunk_times_s)[0] == 610 and ms(recs["R2"].chunk_times_s)[-1] == 1200
    assert res.summary.num_preemptions == 0


def test_new_token_ratio_decays_per_decode_step_and_resets_when_idle():
    cfg = EngineConfig(num_gpu_blocks=201, max_model_len=100, max_num_batched_tokens=64, **SGL)
    rep = Replica(cfg, STEP, fast_forward=False)
    sched = rep.sched
    assert isinstance(sched, SGLangScheduler) and sched.new_token_ratio == 0.7
    rep.add(SimRequest(0, RequestSpec("a", 0.0, 5, 50)))
    rep.run_unit(1.0)  # prefill
    for _ in range(10):
        rep.run_unit(1.0)  # decode
    # 0.7 − 10 × (0.7 − 0.098)/600 = 0.68997
    assert sched.new_token_ratio == pytest.approx(0.7 - 10 * NEW_TOKEN_RATIO_DECAY, rel=1e-12)
    assert sched.new_token_ratio == pytest.approx(0.689967, abs=1e-6)
    sched.advance_decode(10_000)
    assert sched.new_token_ratio == MIN_NEW_TOKEN_RATIO == pytest.approx(0.098)


def test_without_ignore_eos_admission_reserves_only_the_ratio():
    # A 100-token pool. R1 = 10 + 60 at t=0; R2 = 10 + 20 arrives at 5 ms and is considered at step 2 (10 ms),
    # when R1 holds 10 tokens (free 90) and has 59 tokens to go. R2 needs 10 + 20 + 1 = 31.
    # ignore_eos (ratio 1): 31 < 90 − 59 = 31? No; the margin stays 31 while R1 decodes, so R2 waits for R1's end
    # (600 ms) and gets its first token at 610 ms. Without it, the ratio is 0.7 (no decode step yet):
    # 31 < 90 − 59 × 0.7 = 48.7 → R2 is prefilled at step 2 (10–20 ms), first token at 20 ms.
    specs = [RequestSpec("R1", 0.0, 10, 60), RequestSpec("R2", 0.005, 10, 20)]
    kw = dict(num_gpu_blocks=101, max_model_len=100, max_num_batched_tokens=64, max_num_seqs=8)
    eos, steps, _ = run(specs, ignore_eos=False, **kw)
    assert steps[1] == (10, [["R2", 10]]) and ms(eos["R2"].chunk_times_s)[0] == 20
    fixed, _, _ = run(specs, **kw)
    assert ms(fixed["R2"].chunk_times_s)[0] == 610


def test_decode_retracts_fewest_outputs_first():
    # A 60-token pool, ratio admission (ignore_eos off): A = 4 + 30 at 0; B = 4 + 30 arrives at 30 ms, when A holds
    # 6 tokens with 27 to go: 35 < 54 − 27 × 0.698 = 35.15 → admitted. Both then outgrow the pool (33 + 33 > 60),
    # and SGLang retracts the request with fewer outputs: B, never A.
    cfg = dict(num_gpu_blocks=61, max_model_len=40, max_num_batched_tokens=64, max_num_seqs=8, ignore_eos=False)
    recs, steps, res = run([RequestSpec("A", 0.0, 4, 30), RequestSpec("B", 0.03, 4, 30)], **cfg)
    assert steps[3] == (30, [["B", 4]])
    assert recs["A"].num_preemptions == 0 and recs["B"].num_preemptions >= 1 and res.summary.num_preemptions >= 1
    assert all(r.ok for r in recs.values())


def test_sglang_preset_is_sglangs_default_configuration():
    # schedule_policy 'fcfs' is SGLang's default (arg_groups/fields/schedule.py); its own step rule, radix cache
    assert POLICY_PRESETS["sglang"] == {"batching": "sglang", "prefix_caching_policy": "sglang",
                                       "scheduling_policy": "fcfs"}


def test_sglang_rule_leaves_no_slots_held_and_retracts_under_pressure():
    import sys
    from pathlib import Path

    from kvledger.dynamics.cluster import run_cluster
    from kvledger.dynamics.engine.router import make_router

    sys.path.insert(0, str(Path(__file__).parent))
    from test_engine import random_workload

    c = EngineConfig(num_gpu_blocks=60, block_size=16, max_model_len=512, max_num_batched_tokens=256,
                     batching="sglang", prefix_caching_policy="sglang", ignore_eos=False)
    rep = Replica(c, FixedStepCost(0.005, 1e-5))
    recs = run_cluster(random_workload(), [rep], make_router("round_robin"))
    assert all(r.ok for r in recs) and rep.num_preemptions > 0
    assert rep.kv.held_slots == 0 and rep.kv.private_tokens == 0 and not rep.sched.running and rep.sched.chunked is None


def test_sglang_rejects_prompt_plus_output_beyond_the_context_length():
    # SGLang 0.5.23 TokenizerManager._validate_one_request: input + max_new_tokens > context_len is an error unless
    # --allow-auto-truncate; 10 + 7 = 17 > 16 is refused (vLLM 0.33 would serve it with 6 output tokens)
    recs, _, res = run([RequestSpec("ok", 0.0, 8, 4), RequestSpec("long", 0.0, 10, 7)],
                       num_gpu_blocks=40, max_model_len=16, max_num_batched_tokens=64)
    assert not recs["long"].ok and "= 17 tokens exceeds max_model_len=16" in recs["long"].error
    assert res.summary.num_rejected == 1


def test_sglang_starts_with_a_pool_shorter_than_the_context_and_caps_requests_to_it():
    # SGLang 0.5.23 tp_worker.py get_worker_info only warns when the pool (21 − 1 = 20 token slots) is below
    # context_len 64: max_req_len = min(64 − 1, 20 − 1) = 19, max_req_input_len = 19 − 5 = 14. "ok" 8 + 4 = 12 runs
    # whole; "capped" 10 + 15 = 25 ≤ 64 passes the tokenizer check, prompt 10 < 14, max_new_tokens capped at
    # 19 − 10 − 1 = 8 (scheduler.py init_req_max_new_tokens); "aborted" prompt 14 ≥ 14 (utils.py validate_input_length).
    # vLLM's rule refuses this pool at start-up (one 64-token request needs 64 blocks of 1 token > 20).
    cfg = EngineConfig(**SGL, num_gpu_blocks=21, max_model_len=64, max_num_batched_tokens=64)
    assert (cfg.sglang_max_req_len, cfg.sglang_pool_caps_context) == (19, True)
    recs, _, res = run([RequestSpec("ok", 0.0, 8, 4), RequestSpec("capped", 0.0, 10, 15),
                        RequestSpec("aborted", 0.0, 14, 1)], num_gpu_blocks=21, max_model_len=64,
                       max_num_batched_tokens=64)
    assert [recs[k].num_output_tokens for k in ("ok", "capped")] == [4, 8]
    assert not recs["aborted"].ok and "max_req_input_len=14" in recs["aborted"].error
    assert res.summary.num_rejected == 1


def test_vllm_refuses_a_pool_shorter_than_the_context_in_blocks_of_one_token():
    # vLLM v1: 21 blocks − the null block = 20 usable, one 64-token request needs 64 blocks of 1 token
    with pytest.raises(InputError, match=r"20 usable blocks of 1 token \(block 0"):
        EngineConfig(num_gpu_blocks=21, max_model_len=64, block_size=1)


def test_lpm_moves_requests_sharing_an_uncached_prefix_to_the_back():
    # max_num_seqs 2; A, B, C share a 64-token prefix (not cached yet), D is unrelated; 70-token prompts, 1 output,
    # all at t=0. SGLang's lpm keeps A, moves B and C back (they share ≥ 32 tokens with A, their cached prefix is
    # ≤ 32): step 1 prefills [A, D]; then A's prefix is cached and B, C hit 64 tokens each (70 − 64 = 6 computed).
    # Plain longest-prefix order would take [A, B] first and B would recompute the prefix.
    seg = (7, 8)
    specs = [RequestSpec("A", 0.0, 70, 1, seg, 32), RequestSpec("B", 0.0, 70, 1, seg, 32),
             RequestSpec("C", 0.0, 70, 1, seg, 32), RequestSpec("D", 0.0, 70, 1)]
    recs, steps, _ = run(specs, num_gpu_blocks=1001, max_model_len=512, max_num_batched_tokens=256, max_num_seqs=2,
                         scheduling_policy="lpm")
    assert steps[0] == (0, [["A", 70], ["D", 70]]) and steps[1] == (10, [["B", 6], ["C", 6]])
    assert recs["B"].num_cached_tokens == recs["C"].num_cached_tokens == 64


def test_after_a_prefill_step_the_paused_requests_decode_in_a_stretch_with_the_same_token_times(monkeypatch):
    # A = 16 + 10 at t=0, B = 16 + 5 at 25 ms, 10 ms steps. Step 0 PREFILL [A] 0–10 (A's token 1); steps 1, 2 DECODE
    # [A] (tokens 2, 3; B arrives during step 2); step 3 PREFILL [B] 30–40, A paused (B's token 1 at 40); steps 4–7
    # DECODE [A, B] (B's tokens 2–5, B done at 80); steps 8–10 DECODE [A] (A done at 110). A: 10, 20, 30, then 50–110
    # (one 20 ms gap). Step 4 used to be a general step (A was left out of step 3); then it opened A and B's stretch;
    # now B's prefill step too is run by SGLang's arrival stretch (sglang_stretch.py): only the idle start is general.
    general = []
    orig = Replica._step
    monkeypatch.setattr(Replica, "_step", lambda self: general.append(self.num_steps) or orig(self))
    specs = [RequestSpec("A", 0.0, 16, 10), RequestSpec("B", 0.025, 16, 5)]
    cfg = EngineConfig(**SGL, num_gpu_blocks=1001, max_model_len=512, max_num_batched_tokens=64, max_num_seqs=8)
    fast = {r.request_id: r for r in simulate(specs, cfg, STEP).records.records}
    assert general == [0]  # the first prefill step (from idle); step 3's prefill and every decode step in a stretch
    slow = {r.request_id: r for r in simulate(specs, cfg, STEP, fast_forward=False).records.records}
    assert ms(fast["A"].chunk_times_s) == [10, 20, 30, 50, 60, 70, 80, 90, 100, 110]
    assert ms(fast["B"].chunk_times_s) == [40, 50, 60, 70, 80]
    for k in ("A", "B"):
        assert list(fast[k].chunk_times_s) == list(slow[k].chunk_times_s)


def test_admission_counts_the_matched_prefix_as_locked_so_a_chunked_prompt_always_fits():
    # A 100-token pool, chunk budget 20, 20-token segments. A = segments (1, 2), 40 tokens, 1 output: prefilled 0–20 ms,
    # done; its 40 tokens stay in the tree, unlocked. R = 30 unique + 5 (arrives 5 ms): chunks 20–30 and 30–40 ms,
    # tokens at 40, 50, 60, 70, 80 ms. B = segments (1, 2) + 40 own tokens, 4 outputs (arrives 15 ms): hit 40,
    # extend 40, needs 40 + 4 + 1 page = 45. At 30 ms: free 40 + evictable 40 = 80, offset R's chunk 10 + page 1 + 5 =
    # 16. SGLang checks with B's prefix locked (add_one_req: _lock_node): 45 < 80 − 40 − 16 = 24? No → B waits; from
    # 40 ms R's decodes take one slot and one reserved token each, so the margin stays 30 − 4 = 26 < 45. At 80 ms R
    # ends (its 34 tokens join the tree, unlocked): 45 < 26 + 74 − 40 = 60 → B prefills 80–100 ms in two chunks,
    # tokens at 100, 110, 120, 130 ms. Counting the locked prefix as evictable (45 < 64) admitted B at 30 ms; its second
    # chunk then found 4 free slots for 14 tokens, B was retracted mid-prompt and the next step crashed.
    specs = [RequestSpec("A", 0.0, 40, 1, prefix_segments=(1, 2), segment_tokens=20),
             RequestSpec("R", 0.005, 30, 5),
             RequestSpec("B", 0.015, 80, 4, prefix_segments=(1, 2), segment_tokens=20)]
    recs, steps, res = run(specs, num_gpu_blocks=101, max_model_len=100, max_num_batched_tokens=20, max_num_seqs=8)
    assert steps[2:5] == [(20, [["R", 20]]), (30, [["R", 10]]), (40, [["R", 1]])]
    assert steps[8:10] == [(80, [["B", 20]]), (90, [["B", 20]])]
    assert ms(recs["R"].chunk_times_s) == [40, 50, 60, 70, 80]
    assert ms(recs["B"].chunk_times_s) == [100, 110, 120, 130]
    assert res.summary.num_preemptions == 0 and recs["B"].num_cached_tokens == 40


def test_hicache_admission_holds_the_unlocked_prefix_and_the_host_tokens_it_loads_back():
    # A 100-token pool with a host tier, 20-token segments. A = segments (1, 2, 3), 60 tokens, runs and ends: the tree
    # holds 1 → 2 → 3 (60 tokens, unlocked), the host a copy of all three. C = 80 unique tokens: 40 free, so the two
    # LRU leaves go (3, then 2): the tree keeps segment 1. B = segments (1, 2, 3) + 10 own: 20 tokens in HBM, 40 on
    # host (≥ the 10-token load-back threshold), hit 60. Admitting B locks segment 1 (20 unlocked tokens) and loads
    # 40 tokens back into the pool: SGLang's check holds 20 + 40 = 60 out of free + evictable.
    kv = HiCacheRadixKVManager(100, 1, host=HostTier(1000, 131072, 51.2e9, 51.2e9))
    a = SimRequest(0, RequestSpec("A", 0.0, 60, 1, prefix_segments=(1, 2, 3), segment_tokens=20))
    handle, hit = kv.match(a)
    assert hit == 0 and kv.admission_hold_tokens(handle) == 0 and kv.admit(a, handle, 60, 60)
    a.num_computed_tokens = 60
    kv.free(a, preempted=False)
    c = SimRequest(1, RequestSpec("C", 0.0, 80, 1))
    handle, _ = kv.match(c)
    assert kv.admit(c, handle, 80, 80) and kv.tree_tokens == 20 and kv.evictable_tokens == 20
    b = SimRequest(2, RequestSpec("B", 0.0, 70, 1, prefix_segments=(1, 2, 3), segment_tokens=20))
    handle, hit = kv.match(b)
    assert hit == 60 and kv.admission_hold_tokens(handle) == 60


def test_a_refusal_shuts_admission_until_a_running_request_leaves():
    # SGLang 0.5.23 scheduler.py _get_new_batch_prefill_raw: a NO_TOKEN refusal with requests running sets
    # running_batch.batch_is_full, and no prefill is tried again until get_next_batch_to_run's filter_batch drops a
    # request. A 100-token pool (ignore_eos). R1 = 10 + 30 at 0; R2 = 10 + 30 and R3 = 5 + 14 at 5 ms.
    # Step 2 (10 ms): free 90, R1 reserves 29: R2 41 < 61 → admitted (offset 29 + 41 = 70); R3 20 < 90 − 70 = 20? No →
    # refused, batch full. Step 3 (20 ms) would fit R3 (20 < 80 − 58 = 22: each admission's page and first token
    # come back), but the batch stays full: R1 and R2 decode steps 3–31 and both finish at 310 ms; R3 is prefilled
    # 310–320 ms (first token at 320 ms; before this rule, 30 ms).
    specs = [RequestSpec("R1", 0.0, 10, 30), RequestSpec("R2", 0.005, 10, 30), RequestSpec("R3", 0.005, 5, 14)]
    recs, steps, _ = run(specs, num_gpu_blocks=101, max_model_len=100, max_num_batched_tokens=64, max_num_seqs=8)
    assert steps[1] == (10, [["R2", 10]]) and steps[2] == (20, [["R1", 1], ["R2", 1]])
    assert steps[31] == (310, [["R3", 5]]) and ms(recs["R3"].chunk_times_s)[0] == 320
    assert ms(recs["R1"].chunk_times_s)[-1] == ms(recs["R2"].chunk_times_s)[-1] == 310
