"""vLLM's pipeline batch queue (dynamics/pipeline.py), step by step against timelines worked out by hand: two stages,
a fixed step cost of 10 ms for the whole model split 5 + 5 ms (one layer each), and the sends between them."""

from __future__ import annotations

import pytest
from pipeline_sends import Sends as _Sends
from pipeline_sends import assert_every_request_whole, stress_specs

from kvledger.accounting.pipeline_cost import PipelineStepCost
from kvledger.accounting.stepcost import FixedStepCost
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.dynamics.simulator import EngineConfig, simulate

STEP = FixedStepCost(per_step_s=0.010)


def run(specs, send_s=0.0, overlapping=True, **kw):
    cost = PipelineStepCost(STEP, _Sends(send_s), (1, 1), overlapping)
    cfg = EngineConfig(enable_prefix_caching=False, num_gpu_blocks=64, max_model_len=256, block_size=16, max_num_seqs=8,
                       **kw)
    res = simulate(specs, cfg, cost, record_steps=True)
    recs = {r.request_id: [round(t * 1e3, 6) for t in r.chunk_times_s] for r in res.records.records}
    steps = [(round(d["start_s"] * 1e3, 6), round(d["duration_s"] * 1e3, 6), d["batch"]) for d in res.steps[0].dicts()]
    return recs, steps, res


TWO = [RequestSpec("A", 0.0, 16, 3), RequestSpec("B", 0.0, 16, 3)]


def test_one_batch_holds_everyone_and_the_stages_take_turns():
    # Both prompts fit the 256-token budget, so batch 1 = [A 16, B 16]: stage 0 0–5 ms, stage 1 5–10 ms. Scheduling
    # again at 0 finds both in flight (num_new_tokens 0), so the engine waits for batch 1's output at 10 ms; every
    # later batch again holds both: tokens at 10, 20, 30 ms, each stage busy half the time (10 of 20 ms per 2 batches).
    recs, steps, res = run(TWO, max_num_batched_tokens=256, async_scheduling=False)
    assert recs == {"A": [10, 20, 30], "B": [10, 20, 30]}
    assert steps == [(0, 10, [["A", 16], ["B", 16]]), (10, 10, [["A", 1], ["B", 1]]), (20, 10, [["A", 1], ["B", 1]])]
    assert res.extra["pipeline"]["stage_busy_share"] == pytest.approx(0.5)


def test_a_budget_split_fills_the_pipeline():
    # Budget 16: batch 1 = [A 16] (stage 0 0–5, stage 1 5–10); the queue has room, so the engine schedules again at
    # once: A is in flight, B is admitted: batch 2 = [B 16], stage 0 5–10 (free at 5), stage 1 10–15. The queue (2) is
    # full: wait for batch 1 (10 ms): A's token; batch 3 = [A 1] enters stage 0 at 10, stage 1 at 15 → 20. Batch 2 at
    # 15: B's token; batch 4 = [B 1] → 25; and so on. A: 10, 20, 30; B: 15, 25, 35 ms: each request's ITL is the
    # whole pass (10 ms) while the engine emits a token every 5 ms, twice the one-batch rate above.
    recs, steps, res = run(TWO, max_num_batched_tokens=16, async_scheduling=False)
    assert recs == {"A": [10, 20, 30], "B": [15, 25, 35]}
    assert [s[0] for s in steps] == [0, 5, 10, 15, 20, 25]
    assert [s[2] for s in steps] == [[["A", 16]], [["B", 16]], [["A", 1]], [["B", 1]], [["A", 1]], [["B", 1]]]
    # 6 batches × 10 ms of stage compute over 2 stages × 35 ms busy
    assert res.extra["pipeline"]["stage_busy_share"] == pytest.approx(60 / 70)


def test_the_send_between_stages_lengthens_each_pass():
    # A 1 ms send between the stages: each pass is 5 + 1 + 5 = 11 ms.
    recs, _, _ = run(TWO, send_s=0.001, max_num_batched_tokens=256, async_scheduling=False)
    assert recs == {"A": [11, 22, 33], "B": [11, 22, 33]}


def test_an_arrival_waits_for_the_output_the_engine_blocks_on():
    # A = 16 + 3 at 0: batch 1 [A 16] 0–10 ms. B = 16 + 2 arrives at 2 ms while the engine waits on batch 1 (the
    # empty schedule at 0 found nothing else), so B is scheduled with A at 10: [A 1, B 16] 10–20: B's tokens 20, 30.
    recs, steps, _ = run([RequestSpec("A", 0.0, 16, 3), RequestSpec("B", 0.002, 16, 2)],
                         max_num_batched_tokens=256, async_scheduling=False)
    assert steps[1] == (10, 10, [["A", 1], ["B", 16]])
    assert recs == {"A": [10, 20, 30], "B": [20, 30]}


def test_async_pp_is_one_pass_at_a_time():
    # vLLM 0.19's async scheduling under PP: one batch through both stages at a time, each step the 10 ms pass, as
    # the async replica runs a 10 ms step cost (test_async.py's S2a timeline: A 10, 20, …; B joins step 4).
    specs = [RequestSpec("A", 0.0, 16, 6), RequestSpec("B", 0.015, 16, 2)]
    recs, _, _ = run(specs, overlapping=False, max_num_batched_tokens=256, async_scheduling=True)
    assert recs == {"A": [10, 20, 30, 40, 50, 60], "B": [40, 50]}


@pytest.mark.parametrize("seed", range(4))
def test_preemptions_in_flight_keep_every_request_whole(seed):
    # A pool too small for the load: requests are preempted while their token is in flight (that token is dropped and
    # recomputed). Every request still ends with exactly its output tokens at non-decreasing times after its arrival,
    # and the exact step-gap counts (no token times kept) give the same ITL mean as the token times.
    specs = stress_specs(seed)
    cost = PipelineStepCost(FixedStepCost(0.004, 2e-5), _Sends(0.0005), (1,) * (2 + seed % 3), True)
    cfg = EngineConfig(enable_prefix_caching=bool(seed % 2), num_gpu_blocks=24, max_model_len=256, block_size=16,
                       max_num_seqs=32, max_num_batched_tokens=128, async_scheduling=False)
    assert_every_request_whole(specs, cfg, cost)
