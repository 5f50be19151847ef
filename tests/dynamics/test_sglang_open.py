"""SGLang's open loop (fast/sglang_open.py, fast/sglang_prefill.py) reports exactly what step-by-step execution reports,
keeps early stops where they were, and is the path the common SGLang run takes."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvledger.accounting.plan import build_plan
from kvledger.accounting.roofline import RooflineStepCost
from kvledger.accounting.settings import PlanSettings
from kvledger.accounting.stepcost import FixedStepCost
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model
from kvledger.dynamics.early_stop import MissRule
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.dynamics.fast import sglang_open
from kvledger.dynamics.simulator import EngineConfig, simulate
from kvledger.dynamics.workload.columns import WorkloadColumns

SGL = dict(batching="sglang", prefix_caching_policy="sglang")
SETTINGS = {
    "page1": dict(block_size=1),  # the CLI's sglang preset
    "page16": dict(block_size=16),
    "eos": dict(block_size=1, ignore_eos=False),  # new_token_ratio below 1: float reservations
    "small-budget": dict(block_size=1, max_num_batched_tokens=64),  # prompts chunked
    "no-chunking": dict(block_size=16, enable_chunked_prefill=False, max_num_batched_tokens=512),
    "few-seqs": dict(block_size=1, max_num_seqs=3),
    "lpm": dict(block_size=1, scheduling_policy="lpm"),  # the general step's own order; the loop still fuses
}


def _all(res, steps: bool = False) -> str:
    d = res.to_dict(include_records=True)
    if steps:
        d["steps"] = [list(log.dicts()) for log in res.steps]
    return json.dumps(d, sort_keys=True, default=str)


@st.composite
def workloads(draw):
    """Bursts and gaps, shared prefixes (three groups of 32-token segments), one-token outputs, prompts over
    max_model_len (rejected)."""
    n = draw(st.integers(1, 40))
    t, out = 0.0, []
    for i in range(n):
        t += draw(st.sampled_from([0.0, 0.0005, 0.003, 0.01, 0.05, 0.3]))
        nseg = draw(st.integers(0, 3))
        group = draw(st.integers(0, 2))
        prompt = nseg * 32 + draw(st.sampled_from([1, 7, 33, 100, 250, 520]))
        out.append(RequestSpec(f"q{i}", t, prompt, draw(st.integers(1, 200)), tuple(group * 100 + j for j in
                                                                                       range(nseg)), 32))
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reqs=workloads(), pool_tokens=st.integers(600, 12000), name=st.sampled_from(sorted(SETTINGS)),
       per_token=st.sampled_from([0.0, 1e-5, 3e-4]), token_times=st.booleans(), steps=st.booleans())
def test_sglang_open_loop_and_step_by_step_agree_on_every_reported_figure(reqs, pool_tokens, name, per_token,
                                                                         token_times, steps):
    # max_model_len 512 (prompts over it rejected); pools of 600 tokens overload (retraction, refused admissions),
    # 12,000 hold everyone: every hand-over (chunk pending, refusal, retraction, one-token outputs) is exercised
    kw = {**SGL, **SETTINGS[name]}
    cfg = EngineConfig(num_gpu_blocks=pool_tokens // kw["block_size"], max_model_len=512, **kw)
    cost = FixedStepCost(0.004, per_token)
    fast = simulate(reqs, cfg, cost, record_token_times=token_times, record_steps=steps)
    slow = simulate(reqs, cfg, cost, record_token_times=token_times, record_steps=steps, fast_forward=False)
    assert _all(fast, steps) == _all(slow, steps)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reqs=workloads(), pool_tokens=st.integers(600, 12000), ttft_ms=st.sampled_from([5, 20, 80]),
       target=st.sampled_from([0.5, 0.9, 0.99]), every=st.integers(1, 4))
def test_early_stops_are_checked_where_the_driver_checked_them(reqs, pool_tokens, ttft_ms, target, every):
    # The open loop checks a due early stop after each arrival's step, as the driver does after each general step:
    # the same run with the loop switched off (run_open and general steps from the driver, as before it) stops at the
    # same moment with the same records.
    cfg = EngineConfig(num_gpu_blocks=pool_tokens, block_size=1, max_model_len=512, **SGL)
    cost = FixedStepCost(0.004, 1e-5)

    def run():
        rule = MissRule(target, ttft_s=ttft_ms / 1000, check_every=every)
        res = simulate(reqs, cfg, cost, record_token_times=False, stop=rule)
        return _all(res), rule.evidence()

    fused = run()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sglang_open, "eligible", lambda rep: False)
        assert fused == run()


def test_the_common_sglang_run_takes_the_fast_prefill_step_and_matches_step_by_step(monkeypatch):
    # Llama-3.1-8B on an H100 priced by the roofline, 400 arrivals at about 6 per second (fixed seed), columnar
    # workload and no token times, the sglang preset with page size 1 as the CLI runs it: most arrivals' prefill
    # steps take sglang_prefill.py's path, and the records and summary equal step-by-step execution's.
    rng = np.random.default_rng(11)
    n = 400
    work = WorkloadColumns(np.cumsum(rng.exponential(1 / 6, n)), rng.integers(20, 3000, n), rng.integers(2, 600, n),
                           "r")
    cfg = EngineConfig(num_gpu_blocks=300000, block_size=1, max_model_len=8192, **SGL)
    m, g = load_model("meta-llama/Llama-3.1-8B", allow_hub=False), get_gpu("H100")
    cost = RooflineStepCost(m, g, build_plan(m, g, PlanSettings(), with_roofline=False, with_advice=False).kv)
    taken = []
    real = sglang_open.prefill_step

    def counting(rep):
        out = real(rep)
        taken.append(out is not None)
        return out

    monkeypatch.setattr(sglang_open, "prefill_step", counting)
    fast = simulate(work, cfg, cost, record_token_times=False)
    monkeypatch.setattr(sglang_open, "prefill_step", real)
    slow = simulate(work, cfg, cost, record_token_times=False, fast_forward=False)
    assert _all(fast) == _all(slow)
    assert sum(taken) > 0.9 * n, (sum(taken), n)
