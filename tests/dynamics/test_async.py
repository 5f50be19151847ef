"""vLLM v1 async scheduling (batch queue of two): the engine audit's scenario S2, step by step, against the sync
rule."""

from __future__ import annotations

import pytest

from kvledger.accounting.stepcost import FixedStepCost
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.dynamics.simulator import EngineConfig, simulate
from kvledger.dynamics.workload.closed_loop import ClosedLoop
from kvledger.errors import InputError

STEP = FixedStepCost(per_step_s=0.010)


def run(specs, **kw):
    res = simulate(specs, EngineConfig(enable_prefix_caching=False, **kw), STEP, record_steps=True, fast_forward=False)
    recs = {r.request_id: r for r in res.records.records}
    steps = [(round(d["start_s"] * 1e3), d["batch"]) for d in res.steps[0].dicts()]
    return recs, steps, res


def ms(times):
    return [round(t * 1e3) for t in times]


@pytest.mark.parametrize("async_", [False, True])
def test_s2a_an_arrival_during_step_k_joins_step_k_plus_2(async_):
    # Big pool. A = 16 + 6 at t=0; B = 16 + 2 arrives at 15 ms, during step 2 (10–20 ms).
    # Sync: step 3 is scheduled at 20 ms and takes B: [A 1, B 16] 20–30 → B's first token at 30 ms (TTFT 15).
    # Async: step 3 is scheduled at 10 ms (when step 2 starts), before B arrived: [A 1]; B joins step 4, scheduled
    # at 20 ms: [A 1, B 16] 30–40 → first token at 40 ms (TTFT 25), the engine reference's trace.
    recs, steps, _ = run([RequestSpec("A", 0.0, 16, 6), RequestSpec("B", 0.015, 16, 2)], num_gpu_blocks=64,
                         max_model_len=256, block_size=16, max_num_batched_tokens=256, max_num_seqs=8,
                         async_scheduling=async_)
    assert ms(recs["A"].chunk_times_s) == [10, 20, 30, 40, 50, 60]
    if async_:
        assert steps[:4] == [(0, [["A", 16]]), (10, [["A", 1]]), (20, [["A", 1]]), (30, [["A", 1], ["B", 16]])]
        assert ms(recs["B"].chunk_times_s) == [40, 50]
    else:
        assert steps[2] == (20, [["A", 1], ["B", 16]])
        assert ms(recs["B"].chunk_times_s) == [30, 40]


@pytest.mark.parametrize("async_", [False, True])
def test_s2b_blocks_of_a_finishing_request_are_freed_a_step_later(async_):
    # 6 usable blocks of 16 tokens. A = 16 + 3, C = 16 + 8 at t=0 hold 2 blocks each from step 2 on; B = 40 + 1
    # arrives at 15 ms and needs 3 blocks, so it waits for A's 2. A's last token comes from step 3 (20–30 ms).
    # Sync: A is freed at 30 ms, step 4 (30–40) = [C 1, B 40] → B's token at 40 ms (TTFT 25).
    # Async: step 4 is scheduled at 20 ms while A's last step is in flight: A still holds its blocks, B is blocked,
    # step 4 = [C 1]; A's blocks are freed after that; step 5 (scheduled at 30 ms) = [C 1, B 40], 40–50 ms →
    # B's token at 50 ms (TTFT 35), the engine reference's trace.
    recs, steps, _ = run([RequestSpec("A", 0.0, 16, 3), RequestSpec("C", 0.0, 16, 8), RequestSpec("B", 0.015, 40, 1)],
                         num_gpu_blocks=7, max_model_len=64, block_size=16, max_num_batched_tokens=64, max_num_seqs=8,
                         async_scheduling=async_)
    assert steps[0] == (0, [["A", 16], ["C", 16]]) and steps[2] == (20, [["A", 1], ["C", 1]])
    assert ms(recs["A"].chunk_times_s) == [10, 20, 30] and ms(recs["C"].chunk_times_s) == list(range(10, 90, 10))
    if async_:
        assert steps[3] == (30, [["C", 1]]) and steps[4] == (40, [["C", 1], ["B", 40]])
        assert ms(recs["B"].chunk_times_s) == [50]
    else:
        assert steps[3] == (30, [["C", 1], ["B", 40]])
        assert ms(recs["B"].chunk_times_s) == [40]


def test_a_finishing_request_keeps_its_seat_until_the_next_schedule():
    # max_num_seqs 1: A = 4 + 2 at 0 (tokens at 10, 20 ms); B = 4 + 1 at 0.
    # Sync: A finishes in step 2, B joins step 3 (20–30) → 30 ms. Async: step 3 is scheduled at 10 ms with A's last
    # token in flight (A still running: no seat), so step 3 is empty; after A's output (20 ms) B is scheduled and
    # runs 20–30 → also 30 ms: the empty slot in the queue costs no time.
    recs, steps, _ = run([RequestSpec("A", 0.0, 4, 2), RequestSpec("B", 0.0, 4, 1)], num_gpu_blocks=10,
                         max_model_len=16, block_size=4, max_num_seqs=1, async_scheduling=True)
    assert ms(recs["B"].chunk_times_s) == [30] and steps[2] == (20, [["B", 4]])


def test_idle_engine_starts_at_the_arrival():
    # One request into an idle engine: scheduled at its arrival, so TTFT = one step in both modes.
    for a in (False, True):
        recs, _, _ = run([RequestSpec("A", 0.5, 8, 3)], num_gpu_blocks=10, max_model_len=16, block_size=4,
                         async_scheduling=a)
        assert ms(recs["A"].chunk_times_s) == [510, 520, 530]


@pytest.mark.parametrize("async_", [False, True])
def test_fast_path_is_exact_with_replicas_and_closed_loop(async_):
    # Several replicas in a closed loop with think time: the next request goes to the user whose request finished
    # first in processing order, so stretches must not run past another replica's next step (a sync bug too).
    specs = [RequestSpec(f"r{i}", 0.0, 20 + 7 * (i % 5), 5 + 11 * (i % 7)) for i in range(60)]
    cfg = EngineConfig(num_gpu_blocks=80, max_model_len=256, block_size=8, max_num_batched_tokens=128,
                       async_scheduling=async_, enable_prefix_caching=False)
    for kw in ({"num_replicas": 3, "router": "least_loaded"}, {}):
        a, b = [simulate(ClosedLoop(specs, num_users=12, think_time_s=0.003), cfg, FixedStepCost(0.004, 1e-5),
                         fast_forward=ff, **kw) for ff in (True, False)]
        assert a.records.records == b.records.records and a.summary.num_steps == b.summary.num_steps


def test_async_scheduling_needs_vllm_v1_batching():
    with pytest.raises(InputError, match="batching='continuous'"):
        EngineConfig(num_gpu_blocks=100, max_model_len=64, batching="static", async_scheduling=True)


def test_a_request_preempted_with_its_token_in_flight_loses_that_token():
    # 5 usable blocks of 4 tokens; A, B = 6 prompt + 8 output at t=0 (2 blocks each after the prompt).
    # Async: step 4 is scheduled at 20 ms with step 3 in flight; A needs its 3rd block (6 + 3 tokens), none is free,
    # so B (the newest) is preempted and the token step 3 samples for it is dropped (vLLM discards the output of a
    # request that is no longer running): B has 2 tokens (10, 20 ms), num_tokens 8 = 2 blocks. Step 5, scheduled at
    # 30 ms, admits B again (2 blocks free) with 8 tokens to recompute: [A 1, B 8]; step 6 (at 40 ms) needs a block
    # for A again and preempts B again, dropping step 5's token; likewise steps 7–8; A ends at 80 ms and B runs
    # from 80 ms: [B 8], then its 3rd–8th tokens at 90 … 140 ms, 3 preemptions. This is the engine reference's trace
    # (sync, for comparison: B is preempted once and keeps its 3rd token at 30 ms).
    specs = [RequestSpec("A", 0.0, 6, 8), RequestSpec("B", 0.0, 6, 8)]
    kw = dict(num_gpu_blocks=6, max_model_len=20, block_size=4, max_num_batched_tokens=64, max_num_seqs=8)
    recs, steps, _ = run(specs, async_scheduling=True, **kw)
    assert [b for _, b in steps[3:9]] == [[["A", 1]], [["A", 1], ["B", 8]], [["A", 1]], [["A", 1], ["B", 8]],
                                          [["A", 1]], [["B", 8]]]
    assert ms(recs["B"].chunk_times_s) == [10, 20, 90, 100, 110, 120, 130, 140] and recs["B"].num_preemptions == 3
    assert ms(recs["A"].chunk_times_s) == list(range(10, 90, 10))
    sync, _, _ = run(specs, async_scheduling=False, **kw)
    assert ms(sync["B"].chunk_times_s) == [10, 20, 30, 90, 100, 110, 120, 130] and sync["B"].num_preemptions == 1
