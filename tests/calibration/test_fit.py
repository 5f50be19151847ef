"""The fit: its Jacobian against the hand derivative on a one-request replay, and recovery of a known step cost from
runs it generated."""

from __future__ import annotations

import numpy as np
import pytest

from kvledger.accounting.fitted_cost import LinearStepCost
from kvledger.calibration.api import calibrate_runs
from kvledger.calibration.compare import compare_runs
from kvledger.calibration.fit import _NAMES, _residuals, fit_step_cost, initial_guess, objective
from kvledger.calibration.replay import MeasuredRun, replay, replay_recorded
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.dynamics.simulator import EngineConfig
from kvledger.records import RunMetadata, RunRecords

TRUTH = LinearStepCost(fixed_s=0.008, prefill_token_s=6e-5, prefill_pair_s=2e-9, decode_seq_s=3e-4,
                       decode_kv_token_s=4e-7)
CFG = EngineConfig(num_gpu_blocks=400, block_size=16, max_model_len=4096, max_num_batched_tokens=2048, max_num_seqs=64,
                   enable_prefix_caching=False)


def _run(label: str, requests: list[RequestSpec], cost) -> MeasuredRun:
    """A 'measured' run made by the simulator itself with ``cost``: the fit must find ``cost`` back."""
    res = replay(MeasuredRun(label, label, requests, RunRecords([], RunMetadata("x", "x"))), CFG, cost)
    return MeasuredRun(label, label, requests, res.records)


def _workload(rate: float, n: int, seed: int) -> list[RequestSpec]:
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(1.0 / rate, n)
    t = np.cumsum(gaps) - gaps[0]
    return [RequestSpec(f"r{i}", float(t[i]), int(rng.integers(50, 1200)), int(rng.integers(5, 200))) for i in range(n)]


def test_jacobian_of_one_request_by_hand():
    # one request, prompt 100, 3 output tokens, alone: step 1 = prefill of 100 tokens (features 1, 100, 5,050, 0, 0)
    # gives the first token; steps 2 and 3 decode with 101 and 102 KV tokens (1, 0, 0, 1, 101) and (1, 0, 0, 1, 102).
    # TTFT = θ·x1, TPOT = (θ·x2 + θ·x3)/2, E2E = θ·(x1 + x2 + x3); each statistic (mean, p50, p90) of one value is
    # that value, and the residual is w·log(sim/measured), so ∂/∂θ = w·∂value/value.
    req = [RequestSpec("a", 0.0, 100, 3)]
    run = _run("one", req, TRUTH)
    res, table = replay_recorded(run, CFG, TRUTH)
    r, jac = _residuals(run, res, table, _NAMES[:6], TRUTH)
    assert np.allclose(r, 0.0)
    # the sixth feature: 1 for a step with prefill (prefill_step_s), 0 for a decode step
    x1, x2, x3 = np.array([1, 100, 5050, 0, 0, 1.]), np.array([1, 0, 0, 1, 101, 0.]), np.array([1, 0, 0, 1, 102, 0.])
    ttft, tpot, e2e = (
        TRUTH.gpu_coefficients @ x1,
        TRUTH.gpu_coefficients @ (x2 + x3) / 2,
        TRUTH.gpu_coefficients @ (x1 + x2 + x3),
    )
    expect = [x1 / ttft] * 3 + [((x2 + x3) / 2) / tpot] * 3 + [np.sqrt(0.5) * (x1 + x2 + x3) / e2e] * 3
    assert np.allclose(jac, np.array(expect), rtol=1e-12)


def test_fit_recovers_the_generating_model():
    runs = [(_run(f"r{rate}", _workload(rate, 60, seed), TRUTH), CFG) for seed, rate in enumerate((2.0, 6.0))]
    start = LinearStepCost(0.004, 1.2e-4, 0.0, 1.5e-4, 8e-7)  # every term off by 2× (the pair term absent)
    assert objective(runs, start) > 0.1
    fit = fit_step_cost(runs, start)
    assert fit.objective < 1e-2 * fit.objective_start
    for run, cfg in runs:  # the fitted model reproduces the generating one's means within 2%
        c = compare_runs(run.label, run.measured, replay(run, cfg, fit.cost).records)
        for m in ("TTFT mean", "TPOT mean", "E2E mean"):
            assert abs(c.row(m).rel_error) < 0.02, (m, c.row(m))
    again = fit_step_cost(runs, start)  # deterministic
    assert again.cost == fit.cost and again.history == fit.history


def test_initial_guess_is_the_projection_of_a_linear_model():
    # when the start model is itself linear, its least-squares projection on the replayed steps is exact
    runs = [(_run("r", _workload(4.0, 40, 3), TRUTH), CFG)]
    g = initial_guess(runs, TRUTH, overlap=False)
    assert np.allclose(g.gpu_coefficients, TRUTH.gpu_coefficients, rtol=1e-6, atol=1e-12)


def test_overlapped_cpu_overhead_and_frontend_are_found():
    # an async engine whose 9 ms CPU step hides the GPU time of small decode steps (GPU 8 ms + 0.3 ms/request), seen
    # from a client 20 ms away: the fit starts with the CPU term at half the shortest step and no frontend latency
    truth = LinearStepCost(0.008, 6e-5, 2e-9, 3e-4, 4e-7, cpu_overhead_s=0.009, overlap=True, frontend_s=0.020)
    runs = [(_run(f"r{rate}", _workload(rate, 60, seed), truth), CFG) for seed, rate in enumerate((1.0, 6.0))]
    start = LinearStepCost(0.006, 8e-5, 2e-9, 2e-4, 6e-7, cpu_overhead_s=0.004, overlap=True)
    fit = fit_step_cost(runs, start, fit_frontend=True)
    assert fit.objective < 1e-2 * fit.objective_start
    # shares TTFT with the prefill terms: loosely identified
    assert fit.cost.frontend_s == pytest.approx(0.020, rel=0.25)
    for run, cfg in runs:
        c = compare_runs(run.label, run.measured, replay(run, cfg, fit.cost).records)
        for m in ("TTFT mean", "TPOT mean", "E2E mean"):
            assert abs(c.row(m).rel_error) < 0.03, (m, c.row(m))


def test_fit_under_async_scheduling():
    # vLLM v1 async scheduling (the batch queue of two): the replay still prices one step per logged step, and the
    # fit finds a generating model with an overlapped CPU step back
    from dataclasses import replace as dc_replace

    # a pool large enough that no request is preempted (4,000 blocks; the 400 of CFG preempt 6 requests at 6 req/s):
    # under async scheduling a request preempted with a token in flight loses that token, so whether a preemption
    # costs a token depends on the step times and the objective turns step-shaped there (from 400 blocks the fit
    # stops at 1.4% of its starting objective; without preemptions at 0.2%)
    cfg = dc_replace(CFG, async_scheduling=True, num_gpu_blocks=4000)
    truth = LinearStepCost(0.008, 6e-5, 2e-9, 3e-4, 4e-7, cpu_overhead_s=0.009, overlap=True)
    runs = []
    for seed, rate in enumerate((2.0, 6.0)):
        reqs = _workload(rate, 60, seed)
        res = replay(MeasuredRun("x", "x", reqs, RunRecords([], RunMetadata("x", "x"))), cfg, truth)
        runs.append((MeasuredRun(f"r{rate}", "x", reqs, res.records), cfg))
    _, table = replay_recorded(runs[0][0], cfg, truth)
    assert len(table.features) == len(table.start_s) > 0
    fit = fit_step_cost(runs, LinearStepCost(0.006, 8e-5, 2e-9, 2e-4, 6e-7, cpu_overhead_s=0.004, overlap=True))
    assert fit.objective < 1e-2 * fit.objective_start


def test_workers_give_the_same_profile():
    # the fit on all runs and each leave-one-out fit in two spawned processes: the same coefficients as serially
    # (> 2 s: starting two Python processes is most of it)
    runs = [(_run(f"r{rate}", _workload(rate, 10, seed), TRUTH), CFG) for seed, rate in enumerate((2.0, 6.0))]
    start = LinearStepCost(0.004, 1.2e-4, 0.0, 1.5e-4, 8e-7)
    one = calibrate_runs(runs, start, leave_one_out=True)
    two = calibrate_runs(runs, start, leave_one_out=True, workers=2)
    assert one["fit"].cost == two["fit"].cost
    assert [x["step_cost"] for x in one["leave_one_out"]] == [x["step_cost"] for x in two["leave_one_out"]]
    assert len(one["leave_one_out"]) == 2


def test_run_order_does_not_move_the_profile():
    # the fit sums its runs in one order whatever the order they are given in: the same coefficients to the last bit
    # (runs measured under different step costs, so no coefficient set fits them exactly)
    costs = (TRUTH, LinearStepCost(0.01, 5e-5, 3e-9, 2.5e-4, 5e-7), LinearStepCost(0.007, 7e-5, 1e-9, 3.5e-4, 3e-7))
    runs = [(_run(f"r{rate}", _workload(rate, 12, seed), c), CFG) for seed, (rate, c) in enumerate(zip((2.0, 4.0, 6.0),
                                                                                                      costs))]
    start = LinearStepCost(0.004, 1.2e-4, 0.0, 1.5e-4, 8e-7)
    fwd = calibrate_runs(runs, start, leave_one_out=True)
    rev = calibrate_runs(runs[::-1], start, leave_one_out=True)
    assert fwd["fit"].cost == rev["fit"].cost and fwd["fit"].objective == rev["fit"].objective
    assert ({x["run"]: x["step_cost"] for x in fwd["leave_one_out"]}
            == {x["run"]: x["step_cost"] for x in rev["leave_one_out"]})
    assert [x["label"] for x in rev["runs"]] == ["r6.0", "r4.0", "r2.0"]  # listed as given
