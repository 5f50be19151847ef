"""vLLM v1's ``--long-prefill-token-threshold``: a request's chunk per step cut to the threshold, so a short request
arriving behind a 100,000-token prefill shares the step's budget instead of waiting for the whole prefill.

Rule (``v1/core/sched/scheduler.py : Scheduler.schedule``, read in 0.9.0, 0.28.0, 0.30.0, 0.31.0 and 0.33.0):
``if 0 < long_prefill_token_threshold < num_new_tokens: num_new_tokens = long_prefill_token_threshold``, for running
and waiting requests alike, before the budget cut; from 0.31.0 the threshold is 0 for a step whose running + waiting
requests number one ("there is nobody to starve"); from 0.31.0 too, ``--long-prefill-token-threshold-adaptive``
floors it at ``max_num_batched_tokens // (running + waiting)``.

Setup, worked by hand below: budget 8,192 tokens, a step costs 2 ms + 1 µs per token (FixedStepCost); L: a
100,000-token prompt at t = 0; S: a 1,000-token prompt at t = 1 ms (after step 0 is scheduled); both 2 output tokens.
"""

from __future__ import annotations

import pytest

from kvledger.accounting.stepcost import FixedStepCost
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.dynamics.simulator import EngineConfig, simulate

COST = FixedStepCost(per_step_s=0.002, per_token_s=1e-6)
REQS = [RequestSpec("L", 0.0, 100_000, 2), RequestSpec("S", 0.001, 1_000, 2)]
ENGINE = dict(num_gpu_blocks=8_200, block_size=16, max_model_len=131_072, max_num_batched_tokens=8_192,
              enable_prefix_caching=False)


def _run(ff: bool, **cfg):
    res = simulate(REQS, EngineConfig(**ENGINE, **cfg), COST, record_steps=True, fast_forward=ff)
    recs = {r.request_id: r for r in res.records.records}
    return recs, [d["batch"] for d in res.steps[0].dicts()]


@pytest.mark.parametrize("ff", [True, False])
def test_without_a_threshold_the_short_request_waits_for_the_whole_long_prefill(ff):
    # steps 0–11: L alone, 8,192 tokens each (the running request takes the whole budget: S is never reached);
    #   each step 2 ms + 8.192 ms = 10.192 ms → 12 × 10.192 = 122.304 ms; L has computed 12 × 8,192 = 98,304.
    # step 12: L's last 1,696 tokens (first token), S admitted with 1,000 of the 6,496 left (first token):
    #   2,696 tokens → 4.696 ms → ends 127.000 ms. S's TTFT = 127.000 − 1 = 126.000 ms.
    recs, steps = _run(ff)
    assert steps[:1] == [[["L", 8_192]]] and steps[11] == [["L", 8_192]]
    assert steps[12] == [["L", 1_696], ["S", 1_000]]
    assert recs["S"].ttft_s == pytest.approx(0.126)
    assert recs["L"].ttft_s == pytest.approx(0.127)


@pytest.mark.parametrize("ff", [True, False])
def test_a_threshold_lets_the_short_request_in_at_the_next_step(ff):
    # threshold 4,096, vLLM ≥ 0.31 (the cap lifted while one request is running or waiting):
    # step 0: L alone (S arrives at 1 ms) → no cap, 8,192 tokens, 10.192 ms.
    # step 1: L and S → cap 4,096: L 4,096, S admitted with min(1,000, 4,096) = 1,000 (its first token):
    #   5,096 tokens → 7.096 ms → ends 17.288 ms. S's TTFT = 17.288 − 1 = 16.288 ms (126.000 without the cap).
    # step 2: L 4,096 + S's decode (S done): 4,097 tokens → 6.097 ms → 23.385 ms; L has 16,384.
    # steps 3–12: L alone again → 8,192 each (10 × 10.192 = 101.92 ms); step 13: its last 83,616 − 81,920 = 1,696
    #   (3.696 ms). L's TTFT = 23.385 + 101.92 + 3.696 = 129.001 ms (2.001 ms later: one step's overhead more).
    recs, steps = _run(ff, long_prefill_token_threshold=4_096)
    assert steps[:3] == [[["L", 8_192]], [["L", 4_096], ["S", 1_000]], [["L", 4_096], ["S", 1]]]
    assert steps[3] == [["L", 8_192]] and steps[13] == [["L", 1_696]]
    assert recs["S"].ttft_s == pytest.approx(0.016288)
    assert recs["L"].ttft_s == pytest.approx(0.129001)


def test_up_to_vllm_0_30_the_cap_holds_for_a_request_alone():
    # long_prefill_cap_alone (vLLM ≤ 0.30): step 0: L alone, 4,096 tokens → 6.096 ms.
    # step 1: L 4,096 + S 1,000 → 7.096 ms → ends 13.192 ms: S's TTFT = 12.192 ms.
    # L: 4,096 every step: 100,000 = 24 × 4,096 + 1,696 → 25 steps; steps 0, 1, 2 as above except S's decode in
    #   step 2 (4,097 tokens, 6.097 ms); 21 more full steps (21 × 6.096 = 128.016 ms) and the last (3.696 ms):
    #   6.096 + 7.096 + 6.097 + 128.016 + 3.696 = 151.001 ms.
    recs, steps = _run(False, long_prefill_token_threshold=4_096, long_prefill_cap_alone=True)
    assert steps[:2] == [[["L", 4_096]], [["L", 4_096], ["S", 1_000]]]
    assert len(steps) == 25 + 1  # the 25 prefill steps and L's one decode step
    assert recs["S"].ttft_s == pytest.approx(0.012192)
    assert recs["L"].ttft_s == pytest.approx(0.151001)


@pytest.mark.parametrize("ff", [True, False])
def test_the_adaptive_floor_raises_the_cap_to_the_budgets_share(ff):
    # vLLM ≥ 0.31 --long-prefill-token-threshold-adaptive (schedule: max(threshold, input_budget // num_eligible_reqs),
    # input_budget = max_num_batched_tokens): threshold 2,048, budget 8,192.
    # step 0: L alone → no cap, 8,192 tokens (as above).
    # step 1: L running, S waiting: 2 requests → cap max(2,048, 8,192 // 2 = 4,096) = 4,096: L 4,096, S 1,000: the
    #   threshold-4,096 run's steps exactly, so S's TTFT is 16.288 ms and L's 129.001 ms again.
    # Without the floor the cap is 2,048: step 1 is L 2,048 + S 1,000 (3,048 tokens, 5.048 ms): S's TTFT
    #   10.192 + 5.048 − 1 = 14.240 ms.
    recs, steps = _run(ff, long_prefill_token_threshold=2_048, long_prefill_adaptive=True)
    assert steps[:3] == [[["L", 8_192]], [["L", 4_096], ["S", 1_000]], [["L", 4_096], ["S", 1]]]
    assert recs["S"].ttft_s == pytest.approx(0.016288) and recs["L"].ttft_s == pytest.approx(0.129001)
    plain, steps = _run(ff, long_prefill_token_threshold=2_048)
    assert steps[1] == [["L", 2_048], ["S", 1_000]] and plain["S"].ttft_s == pytest.approx(0.014240)


def test_the_threshold_needs_v1_continuous_batching():
    from kvledger.errors import InputError

    with pytest.raises(InputError, match="continuous batching"):
        EngineConfig(**ENGINE, long_prefill_token_threshold=4_096, batching="static")
