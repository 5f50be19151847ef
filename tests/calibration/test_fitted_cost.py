"""LinearStepCost: step times worked out by hand, the vectorised decode path equal to the loop, the overlap rule."""

from __future__ import annotations

import numpy as np
import pytest

from kvledger.accounting.fitted_cost import LinearStepCost, step_features
from kvledger.accounting.stepcost import StepShape, decode_steps_by_loop

COST = LinearStepCost(fixed_s=0.010, prefill_token_s=1e-4, prefill_pair_s=1e-8, decode_seq_s=2e-4,
                      decode_kv_token_s=1e-6)


def test_mixed_step_by_hand():
    # a 100-token prompt from scratch (pairs = 100·101/2 = 5,050) plus 4 decodes over 2,000 KV tokens:
    # 10 ms + 100 × 0.1 ms + 5,050 × 1e-8 s + 4 × 0.2 ms + 2,000 × 1 µs = 10 + 10 + 0.0505 + 0.8 + 2 = 22.8505 ms
    shape = StepShape(num_prefill_tokens=100, num_prefill_seqs=1, prefill_kv_tokens=100, prefill_attn_pairs=5050.0,
                      num_decode_seqs=4, decode_kv_tokens=2000)
    assert COST.step_time_s(shape) == pytest.approx(0.0228505, rel=1e-12)
    assert step_features(shape) == (1.0, 100.0, 5050.0, 4.0, 2000.0, 1.0)  # last: the step has prefill
    # the prefill regime's own fixed time (3 ms) is paid by this step, not by a pure decode step
    split = LinearStepCost(0.010, 1e-4, 1e-8, 2e-4, 1e-6, prefill_step_s=0.003)
    assert split.step_time_s(shape) == pytest.approx(0.0258505, rel=1e-12)
    decode = StepShape(num_decode_seqs=4, decode_kv_tokens=2000)
    assert split.step_time_s(decode) == COST.step_time_s(decode) == pytest.approx(0.0128, rel=1e-12)
    assert COST.step_time_s(StepShape()) == 0.0
    assert type(COST.step_time_s(shape)) is float  # the simulator keeps one Python float per step


def test_cpu_overhead_adds_or_overlaps():
    # one decode of 100 KV tokens: GPU 10 + 0.2 + 0.1 = 10.3 ms; a 12 ms CPU step adds (22.3 ms) or hides it (12 ms)
    shape = StepShape(num_decode_seqs=1, decode_kv_tokens=100)
    sync = LinearStepCost(0.010, 0.0, 0.0, 2e-4, 1e-6, cpu_overhead_s=0.012, overlap=False)
    asyn = LinearStepCost(0.010, 0.0, 0.0, 2e-4, 1e-6, cpu_overhead_s=0.012, overlap=True)
    assert sync.step_time_s(shape) == pytest.approx(0.0223)
    assert asyn.step_time_s(shape) == pytest.approx(0.012)


@pytest.mark.parametrize("overlap", [False, True])
def test_decode_stretch_equals_loop(overlap):
    cost = LinearStepCost(0.010, 1e-4, 1e-8, 2e-4, 1e-6, cpu_overhead_s=0.0125, overlap=overlap)
    fast = cost.decode_steps_s(8, 4000, 3000)
    assert np.array_equal(fast, decode_steps_by_loop(cost, 8, 4000, 3000))


def test_negative_or_nan_coefficient_refused():
    with pytest.raises(ValueError):
        LinearStepCost(-1.0, 0, 0, 0, 0)
    with pytest.raises(ValueError):
        LinearStepCost(float("nan"), 0, 0, 0, 0)
    back = LinearStepCost.from_coefficients(COST.coefficients())
    assert back.coefficients() == COST.coefficients()
