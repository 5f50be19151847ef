"""Every bundled calibrated step-cost source runs the Azure conversation trace without a traceback; the
roofline-vs-calibration note."""

from __future__ import annotations

import math

import pytest

from kvledger.accounting.calibrated import list_calibrated
from kvledger.accounting.stepcost import FixedStepCost
from kvledger.analyses.serving.sim_setup import SimRequestArgs, prepare
from kvledger.analyses.serving.step_cost_choice import calibrated_step_cost, disagreement_note
from kvledger.dynamics.simulator import simulate


def _one_per_source_and_gpu() -> list[str]:
    """One key per (source, GPU): the smallest TP of the first model (building every one of the 82 takes ~25 s;
    benchmarks/validate_all.py --robustness runs them all on the whole trace)."""
    seen, keys = set(), []
    for c in sorted(list_calibrated(), key=lambda c: (c.source, c.gpu, c.model, c.tp)):
        if (c.source, c.gpu) not in seen:
            seen.add((c.source, c.gpu))
            keys.append(c.key)
    return keys


@pytest.fixture(scope="module")
def setup():
    return prepare(SimRequestArgs(model="meta-llama/Llama-3.1-8B", gpu="H100", trace="azure-conv", num_requests=200))


@pytest.mark.parametrize("key", _one_per_source_and_gpu())
def test_calibrated_model_serves_azure_slice(setup, key):
    # calibrated:vidur:meta-llama/Meta-Llama-3-8B@a100-80gb/tp1 ended in a TypeError in replica.push_times (numpy
    # float step times) before vidur_cost/calibrated returned Python floats
    cost, _ = calibrated_step_cost("calibrated:" + key, "meta-llama/Llama-3.1-8B", "H100", 1)
    res = simulate(setup.workload, setup.config, cost)
    assert res.summary.num_finished == 200
    assert all(math.isfinite(r.e2e_s) and r.e2e_s > 0 for r in res.records.records)


def test_vidur_llama3_8b_key_from_the_issue(setup):
    cost, _ = calibrated_step_cost("calibrated:vidur:meta-llama/Meta-Llama-3-8B@a100-80gb/tp1",
                                   "meta-llama/Llama-3.1-8B", "H100", 1)
    assert simulate(setup.workload, setup.config, cost).summary.num_finished == 200


def test_disagreement_note():
    # 10 ms vs 30 ms per step on both probes: 3.0× apart, above the 1.5× threshold; 10 vs 12 ms is not
    slow = FixedStepCost(per_step_s=0.030, name="cal")
    note = disagreement_note(FixedStepCost(per_step_s=0.010), slow)
    assert note is not None and "3.0×" in note and "kvledger calibrate" in note and "kvledger validate" in note
    assert disagreement_note(FixedStepCost(per_step_s=0.010), FixedStepCost(per_step_s=0.012)) is None
