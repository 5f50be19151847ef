"""vLLM's pipeline loop on the V2 model runner with async scheduling (dynamics/pipeline_v2.py), call by call against
timelines worked out by hand: a fixed step cost split evenly over one-layer stages, no send between them unless said.

The rule (vLLM 0.29.0/0.33.0): the batch queue holds P + 1 schedules (empty ones too); a request that sampled a token
at scheduler call m may decode again from call m + P; at each call m the stages before the last wait for the last
stage's end of call m − P (the sampled-token ring)."""

from __future__ import annotations

import pytest
from pipeline_sends import Sends as _Sends
from pipeline_sends import assert_every_request_whole, stress_specs

from kvledger.accounting.pipeline_cost import PipelineStepCost
from kvledger.accounting.stepcost import FixedStepCost
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.dynamics.simulator import EngineConfig, simulate


def run(specs, stages=2, step_s=0.010, send_s=0.0, staggered=True, **kw):
    cost = PipelineStepCost(FixedStepCost(per_step_s=step_s), _Sends(send_s), (1,) * stages, not staggered, staggered)
    cfg = EngineConfig(enable_prefix_caching=False, num_gpu_blocks=64, max_model_len=256, block_size=16, max_num_seqs=8,
                       async_scheduling=staggered, **kw)
    res = simulate(specs, cfg, cost, record_steps=True)
    recs = {r.request_id: [round(float(t) * 1e3, 6) for t in r.chunk_times_s] for r in res.records.records}
    steps = [(round(d["start_s"] * 1e3, 6), d["batch"]) for d in res.steps[0].dicts()]
    return recs, steps, res


def test_an_arrival_gets_its_own_batch_while_the_first_request_waits_its_stagger():
    # 2 stages of 5 ms, queue of 3. A = 16 + 3 at 0, B = 16 + 2 at 2 ms, budget 256.
    # call 1 (t 0): [A 16]: stage 0 0–5, stage 1 5–10; A may decode again at call 3.
    # call 2 (t 0): A waits, B not yet arrived: empty. call 3 (t 0): [A 1], stage 0 waits for call 1's end (10):
    #   10–15, 15–20. The queue is full (1, 2, 3): block on call 1 → 10 ms (A's token 1); B is admitted now.
    # call 4 (t 10): A waits (due 5): [B 16] alone: stage 0 15–20 (busy with call 3 until 15), stage 1 20–25.
    #   Block on call 2 (empty: ready at once).
    # call 5 (t 10): [A 1] (its last), stage 0 after call 3's end (20): 20–25, 25–30. Block on call 3 → 20.
    # call 6 (t 20): [B 1] (its last), after call 4's end (25): 25–30, 30–35. Then empty calls until both are out.
    # A: 10, 20, 30; B: 25, 35 ms.
    recs, steps, res = run([RequestSpec("A", 0.0, 16, 3), RequestSpec("B", 0.002, 16, 2)],
                           max_num_batched_tokens=256)
    assert recs == {"A": [10, 20, 30], "B": [25, 35]}
    assert steps == [(0, [["A", 16]]), (10, [["A", 1]]), (15, [["B", 16]]), (20, [["A", 1]]), (25, [["B", 1]])]
    assert res.extra["pipeline"]["batches_in_flight_max"] == 3
    # the batch-queue loop (no async scheduling) waits for A's output at 10 and puts B in A's batch: B at 20, 30
    v1, _, _ = run([RequestSpec("A", 0.0, 16, 3), RequestSpec("B", 0.002, 16, 2)], staggered=False,
                   max_num_batched_tokens=256)
    assert v1 == {"A": [10, 20, 30], "B": [20, 30]}


def test_one_batch_of_everyone_runs_one_pass_at_a_time():
    # Budget 256: call 1 = [A 16, B 16] 0–10; calls 2 empty; call 3 [A 1, B 1] waits for call 1's end: 10–20; call 5
    # (calls 4 empty) after call 3's end: 20–30. Tokens 10, 20, 30 for both; each stage busy half the time.
    recs, steps, res = run([RequestSpec("A", 0.0, 16, 3), RequestSpec("B", 0.0, 16, 3)], max_num_batched_tokens=256)
    assert recs == {"A": [10, 20, 30], "B": [10, 20, 30]}
    assert [s[0] for s in steps] == [0, 10, 20]
    assert res.extra["pipeline"]["stage_busy_share"] == pytest.approx(0.5)


def test_three_stages_take_three_requests_in_turn():
    # 3 stages of 3 ms (9 ms step), queue of 4, budget 16 (one prompt a batch); A, B, C = 16 + 2 at 0.
    # calls 1–3 (t 0): [A 16] 0–9, [B 16] 3–12, [C 16] 6–15 (each stage frees 3 ms after the one before).
    # call 4 (t 0): A due (1 + 3); stage 0 waits for call 1's end (9): [A 1] 9–18; queue full: block on call 1 (9).
    # call 5 (t 9): B after call 2's end (12): 12–21. call 6 (t 12): C after 15: 15–24.
    # A: 9, 18; B: 12, 21; C: 15, 24: a token every 3 ms, each request's every 9 ms (one pass).
    specs = [RequestSpec(n, 0.0, 16, 2) for n in "ABC"]
    recs, steps, res = run(specs, stages=3, step_s=0.009, max_num_batched_tokens=16)
    assert recs == {"A": [9, 18], "B": [12, 21], "C": [15, 24]}
    assert [s[0] for s in steps] == [0, 3, 6, 9, 12, 15]
    assert res.extra["pipeline"]["batches_in_flight_max"] == 4
    # 6 batches × 9 ms of stage compute over 3 stages × 24 ms busy
    assert res.extra["pipeline"]["stage_busy_share"] == pytest.approx(54 / 72)


def test_the_send_and_the_ring_wait_lengthen_each_pass():
    # 1 ms send: call 1 [A 16] stage 0 0–5, send, stage 1 6–11 → A's token 11; call 3 [A 1] waits for 11: 11–16,
    # 17–22; call 5 [A 1] after 22: 22–27, 28–33. A: 11, 22, 33 ms.
    recs, _, _ = run([RequestSpec("A", 0.0, 16, 3)], send_s=0.001, max_num_batched_tokens=256)
    assert recs == {"A": [11, 22, 33]}


@pytest.mark.parametrize("seed", range(3))
def test_preemptions_in_flight_keep_every_request_whole(seed):
    # A pool too small for the load: requests are preempted with tokens in flight (up to two: a batch not yet output
    # and the one P calls later), dropped and recomputed. Every request still ends with exactly its output tokens at
    # non-decreasing times after its arrival, and the exact step-gap counts give the token times' ITL mean.
    specs = stress_specs(seed)
    cost = PipelineStepCost(FixedStepCost(0.004, 2e-5), _Sends(0.0005), (1,) * (2 + seed), False, True)
    cfg = EngineConfig(enable_prefix_caching=bool(seed % 2), num_gpu_blocks=24, max_model_len=256, block_size=16,
                       max_num_seqs=32, max_num_batched_tokens=128, async_scheduling=True)
    kept = assert_every_request_whole(specs, cfg, cost)
    again = simulate(specs, cfg, cost).records.records[5]
    assert list(again.chunk_times_s) == list(kept.records.records[5].chunk_times_s)  # deterministic
