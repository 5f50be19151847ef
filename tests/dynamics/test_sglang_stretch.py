"""SGLang's arrival stretches (dynamics/fast/sglang_stretch.py, sglang_settle.py) report what step-by-step execution
reports, and leave the radix tree as it does, leaf by leaf: random workloads under the CLI's preset (page size 1,
``ignore_eos``), pools small enough that finished requests' leaves are evicted inside stretches, few seats, small
budgets, one-token outputs, rejected prompts, shared prefixes now and then (the stretch then hands over)."""

from __future__ import annotations

import json

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvledger.accounting.stepcost import FixedStepCost
from kvledger.dynamics.engine.config import make_kv_manager
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.dynamics.fast import sglang_stretch
from kvledger.dynamics.simulator import EngineConfig, simulate
from kvledger.dynamics.workload.columns import WorkloadColumns

SGL = dict(batching="sglang", prefix_caching_policy="sglang", block_size=1)


def _tree(kv) -> list:
    """Every node under the root, depth first in key order: (key, tokens, lock count, last access); then the
    evictions counted and the prefix-cache lookups."""
    out, stack = [], [(kv.root, ())]
    while stack:
        node, path = stack.pop()
        for key in sorted(node.children, key=repr):
            child = node.children[key]
            out.append((path + (key,), child.ntok, child.lock_ref, child.last_access))
            stack.append((child, path + (key,)))
    s = kv.prefix_stats
    return [sorted(out, key=repr), kv.num_evictions, kv.tree_tokens, kv.evictable_tokens, kv.private_tokens,
            kv.held_slots, s.requests, s.queries, s.hits]


def _run(reqs, cfg, cost, fast: bool, **kw):
    kvs = []

    def factory(c, i):
        kvs.append(make_kv_manager(c))
        return kvs[-1]

    res = simulate(reqs, cfg, cost, fast_forward=fast, kv_manager_factory=factory, **kw)
    d = res.to_dict(include_records=True)
    return json.dumps(d, sort_keys=True, default=str), _tree(kvs[0])


def _count_stretches(monkeypatch) -> list:
    ran = []
    real = sglang_stretch.settle
    monkeypatch.setattr(sglang_stretch, "settle", lambda rep, run, out: ran.append(run.K) or real(rep, run, out))
    return ran


@st.composite
def workloads(draw):
    """Bursts and gaps; one request in eight with a shared 32-token segment; one-token outputs; prompts over
    max_model_len 512 (rejected)."""
    n = draw(st.integers(2, 60))
    t, out = 0.0, []
    for i in range(n):
        t += draw(st.sampled_from([0.0, 0.0005, 0.002, 0.006, 0.02, 0.1]))
        seg = draw(st.integers(0, 7)) == 0
        prompt = draw(st.sampled_from([1, 5, 30, 90, 200, 400, 600]))
        out.append(RequestSpec(f"q{i}", t, prompt + (32 if seg else 0), draw(st.integers(1, 120)),
                               (7,) if seg else (), 32))
    return out


# 40 examples, about 2 s on a loaded machine: pools from overload (refused admissions) to ample, evictions between
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reqs=workloads(), pool_tokens=st.sampled_from([700, 1200, 2500, 6000]),
       seqs=st.sampled_from([3, 256]), budget=st.sampled_from([256, 8192]), token_times=st.booleans())
def test_sglang_arrival_stretches_match_step_by_step_figures_and_radix_tree(reqs, pool_tokens, seqs, budget,
                                                                           token_times):
    cfg = EngineConfig(num_gpu_blocks=pool_tokens, max_model_len=512, max_num_seqs=seqs,
                       max_num_batched_tokens=budget, **SGL)
    cost = FixedStepCost(0.004, 2e-5)
    assert _run(reqs, cfg, cost, True, record_token_times=token_times) == \
        _run(reqs, cfg, cost, False, record_token_times=token_times)


def test_leaves_evicted_inside_stretches_are_those_step_by_step_evicts(monkeypatch):
    # 300 requests, about 12 per second, prompts 50–400 tokens, outputs 20–200, on a 4,000-token pool: finished
    # requests' leaves fill the pool within the first seconds, so admissions and decode steps inside stretches
    # evict the oldest leaves (the settling evicts once at the end); the tree (every leaf's tokens and last access),
    # the eviction count and every reported figure equal step-by-step execution's
    ran = _count_stretches(monkeypatch)
    rng = np.random.default_rng(5)
    n = 300
    work = WorkloadColumns(np.cumsum(rng.exponential(1 / 12, n)), rng.integers(50, 400, n), rng.integers(20, 200, n),
                           "e")
    cfg = EngineConfig(num_gpu_blocks=4000, max_model_len=2048, **SGL)
    cost = FixedStepCost(0.004, 2e-5)
    fast = _run(work, cfg, cost, True, record_token_times=False)
    assert len(ran) > 5 and sum(ran) > 5000  # most steps ran in stretches
    slow = _run(work, cfg, cost, False, record_token_times=False)
    assert fast[1][1] > 100  # leaves evicted
    assert fast == slow


def test_an_arrival_is_admitted_inside_a_stretch_exactly_when_the_reservation_leaves_room(monkeypatch):
    # A = 100 + 50 tokens at t=0, B = 60 + 40 at 50 ms. At B's prefill step A has computed 100 + j tokens and has
    # 49 − j left (after j decode steps): SGLang admits B iff 60 + 40 + 1 (page) < (pool − (100 + j)) − (49 − j),
    # i.e. iff pool > 250 token slots (num_gpu_blocks − 1: make_kv_manager keeps one back, as SGLang's pool does).
    # 251 slots: B's prefill step runs inside the arrival stretch (one general step: A's, from idle); 250: refused,
    # the stretch hands over and B waits for A to finish (general steps then)
    from kvledger.dynamics.replica import Replica

    general = []
    real = Replica._step
    monkeypatch.setattr(Replica, "_step", lambda self: general.append(self.num_steps) or real(self))
    reqs = [RequestSpec("A", 0.0, 100, 50), RequestSpec("B", 0.05, 60, 40)]
    cost = FixedStepCost(0.004, 0.0)
    for slots, steps in ((251, [0]), (250, None)):
        general.clear()
        cfg = EngineConfig(num_gpu_blocks=slots + 1, max_model_len=200, **SGL)
        fast = _run(reqs, cfg, cost, True)
        if steps is not None:
            assert general == steps
        else:
            assert len(general) > 1
        assert fast == _run(reqs, cfg, cost, False)


def test_a_retraction_between_stretches_matches_step_by_step(monkeypatch):
    # outputs of 6,000 tokens are reserved at SGLang's clip, 4,096: A (100 + 6,000 at t=0) and B (100 + 6,000 at
    # 10 ms) are both admitted on 12,000 slots (B: 100 + 4,096 + 1 < 12,000 − (100 + j) − 4,096 after A's j decode
    # steps), then need 2 × 6,100 > 12,000 slots: a decode step retracts B (fewer outputs), which returns with its
    # tokens as a leaf of its own and a cache hit; C and D (300 + 50) arrive while A runs alone. Stretches run before
    # and after the retraction (the general step does the retraction and B's re-admission); every figure, the tree
    # and its evictions equal step-by-step execution's
    ran = _count_stretches(monkeypatch)
    reqs = [RequestSpec("A", 0.0, 100, 6000), RequestSpec("B", 0.01, 100, 6000), RequestSpec("C", 30.0, 300, 50),
            RequestSpec("D", 30.5, 300, 50)]
    cfg = EngineConfig(num_gpu_blocks=12001, max_model_len=8192, **SGL)
    cost = FixedStepCost(0.004, 0.0)
    fast = _run(reqs, cfg, cost, True, record_token_times=False)
    assert len(ran) >= 2
    assert json.loads(fast[0])["summary"]["num_preemptions"] == 1
    assert fast == _run(reqs, cfg, cost, False, record_token_times=False)
