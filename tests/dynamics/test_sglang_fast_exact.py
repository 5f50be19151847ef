"""Under SGLang's scheduler the fast paths (the single-replica driver's decode stretches up to each arrival, radix
stretches) report exactly what step-by-step execution reports: random workloads with shared prefixes, overload, page
sizes 1 and 16, float reservations, chunked prompts, few seats, lpm; and the common SGLang run."""

from __future__ import annotations

import json
import random

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
from kvledger.dynamics.replica import Replica
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
    "lpm": dict(block_size=1, scheduling_policy="lpm"),
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


# 80 examples, about 3 s: seven settings × overload and ample pools
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reqs=workloads(), pool_tokens=st.sampled_from([600, 700, 900, 1500, 4000, 12000]),
       name=st.sampled_from(sorted(SETTINGS)),
       per_token=st.sampled_from([0.0, 1e-5, 3e-4]), token_times=st.booleans(), steps=st.booleans())
def test_sglang_fast_paths_and_step_by_step_agree_on_every_reported_figure(reqs, pool_tokens, name, per_token,
                                                                          token_times, steps):
    # max_model_len 512 (prompts over it rejected); pools of 600–900 tokens overload (refused admissions, in about one
    # run in ten a retraction), 12,000 hold everyone: the hand-overs (chunk pending, refusal, retraction, one-token
    # outputs) are exercised
    kw = {**SGL, **SETTINGS[name]}
    cfg = EngineConfig(num_gpu_blocks=pool_tokens // kw["block_size"], max_model_len=512, **kw)
    cost = FixedStepCost(0.004, per_token)
    fast = simulate(reqs, cfg, cost, record_token_times=token_times, record_steps=steps)
    slow = simulate(reqs, cfg, cost, record_token_times=token_times, record_steps=steps, fast_forward=False)
    assert _all(fast, steps) == _all(slow, steps)


def test_a_retraction_under_overload_and_shared_prefixes_match_step_by_step():
    # 40 requests (seeded: random.Random(1), the workloads() mix) on a 600-token pool, sent without ignore_eos: SGLang's
    # reservation decays (new_token_ratio 0.7 down to 0.098), admits more than fits, and decode steps retract two
    # requests; shared segments give 512 cached tokens. (With ignore_eos the ratio is 1 and the whole output is
    # reserved, matched prefix locked: nothing is ever retracted.) Fast and step-by-step runs report the same figures,
    # step log included.
    rng = random.Random(1)
    reqs, t = [], 0.0
    for i in range(40):
        t += rng.choice([0.0, 0.0005, 0.003, 0.01, 0.05])
        nseg = rng.randint(0, 3)
        reqs.append(RequestSpec(f"q{i}", t, nseg * 32 + rng.choice([1, 7, 33, 100, 250]), rng.randint(1, 200),
                                tuple(rng.randint(0, 2) * 100 + j for j in range(nseg)), 32))
    cfg = EngineConfig(num_gpu_blocks=600, block_size=1, max_model_len=512, ignore_eos=False, **SGL)
    cost = FixedStepCost(0.004, 1e-5)
    fast = simulate(reqs, cfg, cost, record_steps=True)
    slow = simulate(reqs, cfg, cost, record_steps=True, fast_forward=False)
    assert _all(fast, True) == _all(slow, True)
    recs = fast.records.records
    # 448 cached tokens: 384 once admission waited for a leave after a refusal (batch_is_full; 512 before), + 2 × 32
    # since a prompt enters the tree at the end of its prefill (checkpoint_kv_cache): q8 and q34 each match one
    # 32-token segment of a request still running when they are admitted
    assert sum(r.num_preemptions or 0 for r in recs) == 2 and sum(r.num_cached_tokens or 0 for r in recs) == 448


def test_the_common_sglang_run_decodes_in_stretches_and_matches_step_by_step(monkeypatch):
    # Llama-3.1-8B on an H100 priced by the roofline, 400 arrivals at about 6 per second (fixed seed), columnar
    # workload and no token times, the sglang preset with page size 1 as the CLI runs it: the general step runs only
    # the arrivals' prefill steps (and a few more), every decode step is in a stretch, and the records and summary
    # equal step-by-step execution's.
    rng = np.random.default_rng(11)
    n = 400
    work = WorkloadColumns(np.cumsum(rng.exponential(1 / 6, n)), rng.integers(20, 3000, n), rng.integers(2, 600, n),
                           "r")
    cfg = EngineConfig(num_gpu_blocks=300000, block_size=1, max_model_len=8192, **SGL)
    m, g = load_model("meta-llama/Llama-3.1-8B", allow_hub=False), get_gpu("H100")
    cost = RooflineStepCost(m, g, build_plan(m, g, PlanSettings(), with_roofline=False, with_advice=False).kv)
    general = []
    real = Replica._step
    monkeypatch.setattr(Replica, "_step", lambda self: general.append(1) or real(self))
    fast = simulate(work, cfg, cost, record_token_times=False)
    monkeypatch.setattr(Replica, "_step", real)
    slow = simulate(work, cfg, cost, record_token_times=False, fast_forward=False)
    assert _all(fast) == _all(slow)
    # at most one general step per arrival plus a few (idle restarts, hand-overs); steps number far more
    assert len(general) < 1.1 * n < fast.summary.num_steps / 10, (len(general), fast.summary.num_steps)
