"""The early-stop rule of SLO probes (early_stop.py): hand-checked stops, and searches whose boundary does not move."""

from __future__ import annotations

import pytest

from kvledger.accounting.stepcost import FixedStepCost
from kvledger.dynamics.early_stop import MissRule
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.dynamics.simulator import EngineConfig, simulate
from kvledger.ledgers.goodput import goodput
from kvledger.ledgers.slo import SLO

# Ten requests at t = 0, prompt 10 and output 10 tokens, one at a time (max_num_seqs 1), 10 ms per step, synchronous:
# request i's prefill step emits its first token at 0.1·i + 0.01 s, nine decode steps follow, it finishes at 0.1·(i + 1)
# s.
REQS = [RequestSpec(f"r{i}", 0.0, 10, 10) for i in range(10)]
CFG = EngineConfig(num_gpu_blocks=100, block_size=16, max_model_len=512, max_num_seqs=1, async_scheduling=False)
STEP = FixedStepCost(per_step_s=0.01)


def _run(stop):
    return simulate(REQS, CFG, STEP, record_token_times=False, stop=stop)


def test_full_run_is_as_derived():
    res = _run(None)
    assert [r.first_token_s for r in res.records.records][:3] == pytest.approx([0.01, 0.11, 0.21])
    assert res.records.records[9].finish_s == pytest.approx(1.0)
    assert goodput(res.records, SLO(ttft_s=0.05)).attainment == 0.1  # only r0's TTFT (10 ms) is within 50 ms


def test_ttft_stop_after_the_first_finish():
    """TTFT ≤ 50 ms, target 50 %: when r0 finishes (t = 0.1 s) the nine others have waited 0.1 s > 50 ms with no token,
    so k = 9 and attainment ≤ (10 − 9)/10 = 10 % < 50 %: the run stops there and misses, as the full run (10 %) does."""
    rule = MissRule(0.5, ttft_s=0.05, check_every=1)
    res = _run(rule)
    assert rule.stopped_at_s == pytest.approx(0.1) and rule.num_certain_misses == 9 and rule.attainment_upper == 0.1
    assert res.extra["stopped_early"]["certain_misses"] == 9
    assert res.records.records[0].error is None and all(r.error and "stopped early" in r.error
                                                        for r in res.records.records[1:])
    gp = goodput(res.records, SLO(ttft_s=0.05))
    assert gp.attainment == 0.1 and gp.attainment < 0.5  # the verdict of the full run: 10 % misses 50 %


def test_no_stop_when_the_target_can_still_be_met():
    """Target 10 %: (10 − 9)/10 = 10 % is not below it, so the run goes to the end (and meets it, at exactly 10 %)."""
    rule = MissRule(0.1, ttft_s=0.05, check_every=1)
    res = _run(rule)
    assert rule.stopped_at_s is None and "stopped_early" not in res.extra
    assert res.records.records == _run(None).records.records


def test_e2e_stop_counts_finished_and_waiting():
    """E2E ≤ 250 ms, target 50 %: r0 (0.1 s) and r1 (0.2 s) meet it; when r2 finishes at 0.3 s it has missed, and
    r3 … r9 have waited 0.3 s > 250 ms: k = 8, attainment ≤ 2/10 < 50 %, stop at 0.3 s."""
    rule = MissRule(0.5, e2e_s=0.25, check_every=1)
    res = _run(rule)
    assert rule.stopped_at_s == pytest.approx(0.3) and rule.num_certain_misses == 8
    assert [r.error is None for r in res.records.records] == [True] * 3 + [False] * 7


def test_search_boundary_unchanged_by_early_stop():
    """Llama-3.1-8B on an H100, 600 Azure conversation requests per probe: the same boundary and the same verdict at
    every probe with and without early stop, and at least one overloaded probe stopped."""
    from kvledger.analyses.serving.sim_boundary import search_sim_boundary
    from kvledger.analyses.serving.sim_setup import SimRequestArgs

    args = SimRequestArgs(model="meta-llama/Llama-3.1-8B", gpu="H100", trace="azure-conv", num_requests=600)
    slo = SLO(ttft_s=0.5, tpot_s=0.05)
    fast = search_sim_boundary(args, slo, 0.9, "request_rate", early_stop=True)
    full = search_sim_boundary(args, slo, 0.9, "request_rate", early_stop=False)
    assert fast.boundary.boundary_value == full.boundary.boundary_value is not None
    assert [(p.value, p.meets_target) for p in fast.probes] == [(p.value, p.meets_target) for p in full.probes]
    stopped = [p for p in fast.probes if p.stopped_early]
    assert stopped and all(not p.meets_target and p.stopped_early["attainment_upper"] < 0.9 for p in stopped)
    for p, q in zip(fast.probes, full.probes):
        if p.stopped_early:  # the full run's attainment lies between the stopped probe's bounds
            assert p.attainment <= q.attainment <= p.stopped_early["attainment_upper"]
        else:
            assert p.attainment == q.attainment
    assert any("early stop" in n for n in fast.notes) and not any("early stop" in n for n in full.notes)
