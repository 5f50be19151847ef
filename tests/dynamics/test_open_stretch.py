"""Arrival stretches (open_stretch.py) report exactly what step-by-step execution reports, and are the path the common
run takes."""

from __future__ import annotations

import json

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvledger.accounting.plan import build_plan
from kvledger.accounting.roofline import RooflineStepCost
from kvledger.accounting.settings import PlanSettings
from kvledger.accounting.stepcost import FixedStepCost
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.dynamics.fast import open_stretch
from kvledger.dynamics.simulator import EngineConfig, simulate
from kvledger.dynamics.workload.columns import WorkloadColumns


def _all(res) -> str:
    return json.dumps(res.to_dict(include_records=True), sort_keys=True, default=str)


@st.composite
def plain_workloads(draw):
    """Arrivals without shareable segments: close together and far apart, prompts up to twice the token budget,
    one-token outputs, a few prompts at or over max_model_len (rejected)."""
    n = draw(st.integers(1, 40))
    t, out = 0.0, []
    for i in range(n):
        t += draw(st.sampled_from([0.0, 0.0005, 0.003, 0.01, 0.05, 0.3]))
        prompt = draw(st.sampled_from([1, 7, 16, 33, 100, 250, 300, 520]))
        out.append(RequestSpec(f"q{i}", t, prompt, draw(st.integers(1, 200))))
    return out


SETTINGS = {
    "sync": dict(async_scheduling=False),
    "async": dict(async_scheduling=True),
    "no-caching": dict(enable_prefix_caching=False),
    "few-seqs": dict(max_num_seqs=3, async_scheduling=True),
    "small-budget": dict(max_num_batched_tokens=128, async_scheduling=True),
    "no-chunking": dict(enable_chunked_prefill=False, max_num_batched_tokens=512),
}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reqs=plain_workloads(), blocks=st.integers(33, 600), name=st.sampled_from(sorted(SETTINGS)),
       per_token=st.sampled_from([0.0, 1e-5, 3e-4]), token_times=st.booleans())
def test_arrival_stretches_and_step_by_step_agree_on_every_reported_figure(reqs, blocks, name, per_token,
                                                                          token_times):
    # max_model_len 512: prompts of 520 are rejected; pools of 33 blocks (512 tokens) preempt, so every hand-over
    # (budget, seats, one-token outputs, the block bound) is exercised next to long arrival stretches
    cfg = EngineConfig(num_gpu_blocks=blocks, block_size=16, max_model_len=512, **SETTINGS[name])
    cost = FixedStepCost(0.004, per_token)
    fast = simulate(reqs, cfg, cost, record_token_times=token_times)
    slow = simulate(reqs, cfg, cost, record_token_times=token_times, fast_forward=False)
    assert _all(fast) == _all(slow)


def test_the_common_run_takes_arrival_stretches_and_matches_step_by_step(monkeypatch):
    # Llama-3.1-8B on an H100 priced by the roofline, 600 Poisson-like arrivals at about 6 per second (fixed seed),
    # columnar workload and no token times as the CLI runs it: most steps run inside arrival stretches, and the
    # records and summary equal step-by-step execution's.
    rng = np.random.default_rng(7)
    n = 600
    work = WorkloadColumns(np.cumsum(rng.exponential(1 / 6, n)), rng.integers(20, 3000, n), rng.integers(2, 600, n),
                           "r")
    cfg = EngineConfig(num_gpu_blocks=20000, block_size=16, max_model_len=8192, async_scheduling=True)
    m, g = load_model("meta-llama/Llama-3.1-8B", allow_hub=False), get_gpu("H100")
    cost = RooflineStepCost(m, g, build_plan(m, g, PlanSettings(), with_roofline=False, with_advice=False).kv)
    steps = []
    real = open_stretch.settle

    def counting(rep, lives, K, *args):
        steps.append(K)
        return real(rep, lives, K, *args)

    monkeypatch.setattr(open_stretch, "settle", counting)
    fast = simulate(work, cfg, cost, record_token_times=False)
    monkeypatch.setattr(open_stretch, "settle", real)
    slow = simulate(work, cfg, cost, record_token_times=False, fast_forward=False)
    assert _all(fast) == _all(slow)
    assert sum(steps) > 0.9 * fast.summary.num_steps, (sum(steps), fast.summary.num_steps)


def _ttft(res, request_id):
    return next(r.ttft_s for r in res.records.records if r.request_id == request_id)


def test_a_finisher_holds_its_seat_until_the_next_schedule_under_async_scheduling():
    # max_num_seqs 2, 4 ms steps. Step 0 [0, 4 ms] prefills a (6 tokens out) and b (2 out); step 1 [4, 8] decodes both
    # and b finishes. Step 2 is scheduled when step 1 starts (4 ms), with b's last token in flight: b still holds a
    # seat, so c (arrived at 2 ms) cannot join (1 running + 1 finishing = 2). Step 3, scheduled at 8 ms, admits c: its
    # first token ends step 3 at 16 ms, TTFT 14 ms (12 ms − 2 ms = 10 ms if b's seat were free at step 2).
    reqs = [RequestSpec("a", 0.0, 10, 6), RequestSpec("b", 0.0, 10, 2), RequestSpec("c", 0.002, 10, 3)]
    cfg = EngineConfig(num_gpu_blocks=100, block_size=16, max_model_len=512, max_num_seqs=2, async_scheduling=True)
    fast = simulate(reqs, cfg, FixedStepCost(0.004))
    slow = simulate(reqs, cfg, FixedStepCost(0.004), fast_forward=False)
    assert _all(fast) == _all(slow)
    assert abs(_ttft(fast, "c") - 0.014) < 1e-12


def test_a_prompt_over_the_token_budget_left_is_chunked_not_admitted_whole():
    # max_num_batched_tokens 64, synchronous, 4 ms steps (step j spans [4j, 4j + 4] ms and is scheduled at its start).
    # a (10-token prompt, 40 out) runs from step 0; b (63 tokens) arrives at 5 ms and joins step 2 [8, 12] whole
    # (64 − 1 decode = 63 tokens left): first token at 12 ms, TTFT 7 ms. c (also 63 tokens) arrives at 21 ms, after
    # step 5 was scheduled; step 6 [24, 28] has 64 − 2 decodes = 62 tokens left for it and step 7 [28, 32] computes the
    # last one and samples its first token: TTFT 11 ms (7 ms if it were admitted whole in step 6).
    reqs = [RequestSpec("a", 0.0, 10, 40), RequestSpec("b", 0.005, 63, 20), RequestSpec("c", 0.021, 63, 5)]
    cfg = EngineConfig(num_gpu_blocks=100, block_size=16, max_model_len=512, max_num_batched_tokens=64,
                       async_scheduling=False)
    fast = simulate(reqs, cfg, FixedStepCost(0.004))
    slow = simulate(reqs, cfg, FixedStepCost(0.004), fast_forward=False)
    assert _all(fast) == _all(slow)
    assert abs(_ttft(fast, "b") - 0.007) < 1e-12
    assert abs(_ttft(fast, "c") - 0.011) < 1e-12
