"""A capacity search's tier probe (``tier_runs.simulate_with_tier(compare=False)``) runs the simulation with the tier
alone: the same run with the tier as the full tier run (the twin without the tier comes after it and shares nothing
with it), so the same records and attainment, and a report without the twin's figures (TTFT without the tier, HBM's
hit rate without it, the judgment comparing them)."""

from __future__ import annotations

from kvledger.accounting.kv_tier_rules import TierSettings
from kvledger.analyses.serving import sim_cache
from kvledger.analyses.serving.sim_ledgers import SyntheticSpec
from kvledger.analyses.serving.sim_setup import SimRequestArgs
from kvledger.analyses.serving.tier_runs import simulate_with_tier
from kvledger.dynamics import offload_sim
from kvledger.ledgers.goodput import goodput
from kvledger.ledgers.slo import parse_slo

# tests/cli/test_report_tier_capacity.py's case at 57.5 req/s, its capacity with the 8 GiB host tier
ARGS = SimRequestArgs("meta-llama/Llama-3.1-8B", "H100", rate=57.5, num_requests=400,
                      document_pool="40:1024:uniform", gpu_memory_utilization=0.24, max_model_len=4096)
SYN = SyntheticSpec("fixed:16", "fixed:16")


def _run(monkeypatch, compare: bool):
    calls = []
    real = offload_sim.simulate
    monkeypatch.setattr(offload_sim, "simulate", lambda *a, **k: calls.append(1) or real(*a, **k))
    with sim_cache.using(False):
        sim, rep = simulate_with_tier(ARGS, TierSettings(kv_offloading_size_gib=8), SYN, compare=compare)
    return sim, rep, len(calls)


def test_the_probe_skips_the_twin_not_the_attainment(monkeypatch):
    full, full_rep, n_full = _run(monkeypatch, True)
    probe, probe_rep, n_probe = _run(monkeypatch, False)
    assert (n_full, n_probe) == (2, 1)  # with and without the tier; with it alone
    slo = parse_slo("ttft=300ms")
    # goodput --simulate … --rate 57.5 --kv-offloading-size 8: 361 of 400 within 300 ms (0.9025), both ways
    assert goodput(full.run, slo).num_good == goodput(probe.run, slo).num_good == 361
    assert [r.ttft_s for r in full.run.records] == [r.ttft_s for r in probe.run.records]
    assert probe_rep.per_tier == full_rep.per_tier  # the hit shares the capacity block quotes
    assert full_rep.judgment is not None and full_rep.ttft_s_without_tier is not None
    assert (probe_rep.judgment, probe_rep.ttft_s_without_tier, probe_rep.hbm_hit_rate_without_tier) == (None,) * 3
    assert "alone" in probe_rep.source and "without it" in full_rep.source
