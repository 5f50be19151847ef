"""Scheduler scenarios on tiny hand-checkable setups (block size 4, a handful of blocks, FixedStepCost of 10 ms a step).

Every expected number below is worked out by hand in the comments, following vLLM v1's
rule (running first, budget, preempt the last, admit FCFS only without preemption).
"""

from __future__ import annotations

import numpy as np
import pytest

from kvledger.accounting.stepcost import FixedStepCost
from kvledger.dynamics.cluster import run_cluster
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.dynamics.engine.router import make_router
from kvledger.dynamics.replica import Replica
from kvledger.dynamics.simulator import EngineConfig, simulate

STEP = FixedStepCost(per_step_s=0.01)


def run(reqs, fast_forward=True, **cfg):
    rep = Replica(EngineConfig(**cfg), STEP, fast_forward=fast_forward)
    recs = run_cluster(reqs, [rep], make_router("round_robin"))
    return {r.request_id: r for r in recs}, rep


@pytest.mark.parametrize("ff", [True, False])
def test_two_requests_token_times_ttft_and_free_queue(ff):
    # 10 blocks of 4 tokens (9 usable), budget 8.
    # step 0 [0, .01): a admitted, 6 prompt tokens → blocks [1, 2]; prompt done → token 1 at .01
    # step 1 [.01, .02): b (arrives .015) not yet visible; a decodes → token 2 at .02
    # step 2 [.02, .03): a decodes (token 3 at .03, done); b admitted, 5 tokens → blocks [3, 4], token 1 at .03
    #   a freed (8 computed: 2 full blocks) → reversed [2, 1] appended: queue 5..9, 2, 1
    # step 3 [.03, .04): b decodes → token 2 at .04, done; b freed (6 computed: block 3 full, 4 partial)
    #   → 4 prepended, 3 appended: queue 4, 5..9, 2, 1, 3
    recs, rep = run([RequestSpec("a", 0.0, 6, 3), RequestSpec("b", 0.015, 5, 2)], ff,
                    num_gpu_blocks=10, block_size=4, max_model_len=16, max_num_batched_tokens=8)
    a, b = recs["a"], recs["b"]
    np.testing.assert_allclose(a.chunk_times_s, [0.01, 0.02, 0.03])
    np.testing.assert_allclose(b.chunk_times_s, [0.03, 0.04])
    assert a.ttft_s == pytest.approx(0.01) and b.ttft_s == pytest.approx(0.015)
    assert b.e2e_s == pytest.approx(0.025)
    assert rep.kv.pool.free_block_ids() == [4, 5, 6, 7, 8, 9, 2, 1, 3]


@pytest.mark.parametrize("ff", [True, False])
def test_chunked_prefill_shares_the_budget_with_decodes(ff):
    # budget 4. a: P=3, O=4 at t=0; b: P=9, O=1 at t=0.
    # step 0: a gets 3 (prompt done, token 1 at .01); b admitted with the 1 token left of the budget.
    # steps 1-3: a decodes (1 token), b gets 3 chunked tokens each: b computed 1 → 4 → 7 → 10? no: 9 is its prompt
    #   step 1: b 1 → 4; step 2: b 4 → 7; step 3: b 7 → 9 (2 tokens, prompt done → token 1 at .04); a's
    #   tokens 2, 3, 4 at .02, .03, .04 (a finishes at .04).
    # ff=False: every step a general step; a's decode in step 1 (computed 3, its one block covers token 4) takes the
    #   covered-decode branch, in step 2 (computed 4: a second block) kv.grow — both one token of the budget
    recs, rep = run([RequestSpec("a", 0.0, 3, 4), RequestSpec("b", 0.0, 9, 1)], ff,
                    num_gpu_blocks=10, block_size=4, max_model_len=16, max_num_batched_tokens=4)
    assert rep.num_steps == 4
    np.testing.assert_allclose(recs["a"].chunk_times_s, [0.01, 0.02, 0.03, 0.04])
    np.testing.assert_allclose(recs["b"].chunk_times_s, [0.04])


def test_without_chunked_prefill_a_prompt_waits_for_a_whole_budget():
    # budget 9 = max_model_len. a: P=7, O=2; b: P=8, O=1, both at t=0.
    # chunked: step 0 = a's 7 tokens + the first 2 of b's; step 1 = a's decode + b's last 6.
    # unchunked: in step 0 only 2 tokens are left and b needs 8 → admission stops; step 1: a's decode
    # leaves 8 → b gets its whole prompt.
    reqs = [RequestSpec("a", 0.0, 7, 2), RequestSpec("b", 0.0, 8, 1)]
    cfg = dict(num_gpu_blocks=10, block_size=4, max_model_len=9, max_num_batched_tokens=9)
    chunked = simulate(reqs, EngineConfig(**cfg), STEP, record_steps=True).steps[0]
    whole = simulate(reqs, EngineConfig(**cfg, enable_chunked_prefill=False), STEP, record_steps=True).steps[0]
    assert [d["batch"] for d in chunked.dicts()][:2] == [[["a", 7], ["b", 2]], [["a", 1], ["b", 6]]]
    assert [d["batch"] for d in whole.dicts()][:2] == [[["a", 7]], [["a", 1], ["b", 8]]]


@pytest.mark.parametrize("ff", [True, False])
def test_preemption_recomputes_the_last_running_request(ff):
    # 5 blocks (4 usable) of 4 tokens, budget 16; a and b: P=4, O=6, both at t=0, no prefix caching.
    # step 0: a [1], b [2]; prompts done → first tokens at .01 (computed 4, num_tokens 5).
    # step 1: computing token index 4 needs a second block: a takes 3, b takes 4 (pool now empty); .02.
    # steps 2-4: tokens 5, 6, 7 stay in the second block; tokens at .03, .04, .05 (computed 8, num_tokens 9).
    # step 5: a needs a third block, none free → preempt the last running request, b (frees [2, 4],
    #   computed → 0, front of the waiting queue); a takes a block → token 6 at .06, a done.
    #   Nothing is admitted in a step that preempted.
    # step 6: b re-admitted, recomputes its 4 + 5 = 9 tokens in one chunk → token 6 at .07.
    recs, rep = run([RequestSpec("a", 0.0, 4, 6), RequestSpec("b", 0.0, 4, 6)], ff,
                    num_gpu_blocks=5, block_size=4, max_model_len=16, max_num_batched_tokens=16,
                    enable_prefix_caching=False)
    np.testing.assert_allclose(recs["a"].chunk_times_s, [0.01, 0.02, 0.03, 0.04, 0.05, 0.06])
    np.testing.assert_allclose(recs["b"].chunk_times_s, [0.01, 0.02, 0.03, 0.04, 0.05, 0.07])
    assert recs["b"].num_preemptions == 1 and recs["a"].num_preemptions == 0
    assert rep.num_preemptions == 1
    np.testing.assert_allclose(recs["b"].itls_s, [0.01, 0.01, 0.01, 0.01, 0.02])  # the recompute: one 20 ms gap


def test_s1_request_longer_than_max_model_len_is_served_with_its_output_capped():
    # Audit scenario S1 (vLLM 0.33: only prompt ≥ max_model_len is rejected; check_stop ends a request at
    # num_tokens = max_model_len). max_model_len 64, block 16, 8 usable blocks, budget 64; A = 40 + 40, B = 16 + 4.
    # Step 1 (0–10 ms): [A 40, B 16] → both sample their first token; steps 2–4: [A 1, B 1] (B done at 40 ms);
    # steps 5–24: [A 1]; A stops at 40 + 24 = 64 tokens, its 24th token at 240 ms (the engine's trace).
    res = simulate([RequestSpec("A", 0.0, 40, 40), RequestSpec("B", 0.0, 16, 4)],
                   EngineConfig(num_gpu_blocks=9, max_model_len=64, block_size=16, max_num_batched_tokens=64,
                                max_num_seqs=4, enable_prefix_caching=False), STEP, record_steps=True)
    recs = {r.request_id: r for r in res.records.records}
    a, b = recs["A"], recs["B"]
    assert a.ok and a.num_output_tokens == 24
    assert a.chunk_times_s.tolist() == pytest.approx([0.01 * k for k in range(1, 25)])
    assert b.chunk_times_s.tolist() == pytest.approx([0.01, 0.02, 0.03, 0.04])
    batches = [d["batch"] for d in res.steps[0].dicts()]
    assert batches[0] == [["A", 40], ["B", 16]] and batches[1] == [["A", 1], ["B", 1]] and batches[4] == [["A", 1]]
    assert len(batches) == 24 and res.summary.num_rejected == 0


def test_prompt_of_max_model_len_is_rejected_and_counted():
    # vLLM rejects prompt_len ≥ max_model_len at input validation: a 16-token prompt at max_model_len 16.
    res = simulate([RequestSpec("ok", 0.0, 8, 4), RequestSpec("long", 0.0, 16, 7)],
                   EngineConfig(num_gpu_blocks=10, block_size=4, max_model_len=16), STEP)
    long = next(r for r in res.records.records if r.request_id == "long")
    assert not long.ok and "max_model_len=16" in long.error and long.num_output_tokens == 0
    assert res.summary.num_rejected == 1 and res.summary.num_finished == 1 and res.summary.num_requests == 2


def test_without_output_capping_prompt_plus_output_beyond_max_model_len_is_rejected():
    # the V0 OpenAI server's check (and cap_output_at_max_model_len=False): 10 + 7 = 17 > 16 is refused
    res = simulate([RequestSpec("ok", 0.0, 8, 4), RequestSpec("long", 0.0, 10, 7)],
                   EngineConfig(num_gpu_blocks=10, block_size=4, max_model_len=16, cap_output_at_max_model_len=False),
                       STEP)
    long = next(r for r in res.records.records if r.request_id == "long")
    assert not long.ok and "= 17 tokens exceeds max_model_len=16" in long.error
    assert res.summary.num_rejected == 1


def test_max_num_seqs_caps_the_running_batch():
    # max_num_seqs 1: b waits until a finishes (a: P=4, O=2 → tokens at .01, .02); b admitted at step 2 → .03
    recs, _ = run([RequestSpec("a", 0.0, 4, 2), RequestSpec("b", 0.0, 4, 1)],
                  num_gpu_blocks=10, block_size=4, max_model_len=16, max_num_seqs=1)
    assert recs["b"].first_token_s == pytest.approx(0.03)


def test_static_batching_waits_for_the_longest_member_continuous_does_not():
    # max_num_seqs 2, budget 64. a: O=1, b: O=5, c: O=1; all P=4 at t=0.
    # continuous: step 0 admits a, b (2 seqs): tokens at .01; a done; step 1: b decodes, c admitted → c at .02.
    # static: batch {a, b} runs until b ends (5 tokens, .01..0.05); c starts in a new batch at step 5 → .06.
    reqs = [RequestSpec("a", 0.0, 4, 1), RequestSpec("b", 0.0, 4, 5), RequestSpec("c", 0.0, 4, 1)]
    kw = dict(num_gpu_blocks=20, block_size=4, max_model_len=16, max_num_batched_tokens=64, max_num_seqs=2)
    cont, _ = run(reqs, **kw)
    stat, _ = run(reqs, batching="static", **kw)
    assert cont["c"].first_token_s == pytest.approx(0.02)
    assert stat["c"].first_token_s == pytest.approx(0.06)
    # throughput over the run: 7 tokens in .05 s (continuous) vs 7 tokens in .06 s (static)
    assert max(r.finish_s for r in cont.values()) == pytest.approx(0.05)
    assert max(r.finish_s for r in stat.values()) == pytest.approx(0.06)


def test_contiguous_reservation_limits_concurrency_to_whole_max_length_slots():
    # 9 usable blocks of 4 tokens; max_model_len 16 → each request reserves 4 blocks: only 2 fit at once.
    # three requests P=4, O=2 at t=0: a, b run in steps 0-1 (tokens .01, .02); c admitted at step 2 → .03.
    reqs = [RequestSpec(x, 0.0, 4, 2) for x in "abc"]
    recs, rep = run(reqs, num_gpu_blocks=10, block_size=4, max_model_len=16, kv_allocation="contiguous",
                    enable_prefix_caching=False)
    assert recs["c"].first_token_s == pytest.approx(0.03)
    paged, _ = run(reqs, num_gpu_blocks=10, block_size=4, max_model_len=16, enable_prefix_caching=False)
    assert paged["c"].first_token_s == pytest.approx(0.01)


def test_running_chunk_stops_one_token_short_of_max_model_len():
    # vLLM v1's running loop caps a request's new tokens at max_model_len − 1 − num_computed_tokens (the input position
    # below max_model_len; v1/core/sched/scheduler.py, 0.10.1–0.34.0). Input validation keeps every request short of
    # that, so the request here is placed past it by hand: a 16-token prompt at max_model_len 16, budget 8.
    # step 1 (waiting loop, no such cap): 8 tokens → computed 8; step 2: min(16 − 8, 8, 16 − 1 − 8 = 7) = 7 (the old
    # max_model_len − computed gave 8); step 3: min(1, 8, 16 − 1 − 15 = 0) = 0: the request is skipped
    from kvledger.dynamics.engine.kv_manager import PagedKVManager
    from kvledger.dynamics.engine.request_state import SimRequest
    from kvledger.dynamics.engine.scheduler import Scheduler

    cfg = EngineConfig(num_gpu_blocks=10, block_size=4, max_model_len=16, max_num_batched_tokens=8)
    s = Scheduler(cfg, PagedKVManager(10, 4, enable_caching=False))
    r = SimRequest(0, RequestSpec("long", 0.0, 16, 1))
    s.waiting.append(r)
    got = []
    for _ in range(3):
        out = s.schedule()
        got.append([n for _, n in out.scheduled])
        for q, n in out.scheduled:
            q.num_computed_tokens += n
    assert got == [[8], [7], []]
