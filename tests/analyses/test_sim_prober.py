"""The SLO search's prober (sim_prober.py) holds the full runs of three probes at most and simulates each once."""

from __future__ import annotations

import pytest

from kvledger.analyses.serving import sim_boundary, sim_prober
from kvledger.analyses.serving.sim_setup import SimRequestArgs
from kvledger.ledgers.slo import SLO


@pytest.mark.parametrize("guess", [False, True])
def test_search_holds_only_the_runs_it_reports(monkeypatch, guess):
    """A 600-request search on azure-conv (Llama-3.1-8B, H100) of 10 or so probes, several stopped early: afterwards
    the prober holds the first probe's run, the boundary's and the lowest miss's (the bracket's ends) and no other —
    a 100,000-request probe stopped early holds ~30 MiB of records, and holding them all grew the search's peak RSS
    by that much per probe — and no probe was simulated twice to get a released run back."""
    probers, calls = [], []

    class Recorded(sim_prober.SimProber):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            probers.append(self)

    def counted(args, *a, **k):
        calls.append(args.rate)
        return simulate(args, *a, **k)

    simulate = sim_prober.simulate_run
    monkeypatch.setattr(sim_boundary, "SimProber", Recorded)
    monkeypatch.setattr(sim_prober, "simulate_run", counted)
    args = SimRequestArgs(model="meta-llama/Llama-3.1-8B", gpu="H100", trace="azure-conv", num_requests=600)
    sb = sim_boundary.search_sim_boundary(args, SLO(ttft_s=0.2, tpot_s=0.05), 0.9, "request_rate",
                                          start=40.0 if guess else 1.0, guess=guess)
    (p,) = probers
    values = [pr.value for pr in sb.probes]
    assert len(values) >= 6 and sum(pr.stopped_early is not None for pr in sb.probes) >= 2
    assert sorted(calls) == sorted(values)  # each probe simulated once: none run again for a released run
    b, bad = sb.boundary.boundary_value, sb.boundary.first_failing_value
    assert set(p.held) <= {values[0], b, bad} and len(p.held) <= 3
    assert sb.first_run is p.held[values[0]] and sb.boundary_run is p.held[b]
    assert list(p.runs) == values  # every probe's facts stay, in the order run


def test_probers_inside_one_sharing_call_simulate_a_rate_once(monkeypatch):
    """Inside ``sharing_probes`` (one search candidate's evaluation: its own rate search, then the band's from 1 req/s
    in origin_band) a second prober's probe at a rate the first already ran is that run, not a second simulation;
    outside it each prober simulates its own. Two probers, each at 4 req/s on the same 600-request azure-conv run:
    1 simulation shared, 2 apart, and the same records either way (the simulator is seeded)."""
    calls = []

    def counted(args, *a, **k):
        calls.append(args.rate)
        return simulate(args, *a, **k)

    simulate = sim_prober.simulate_run
    monkeypatch.setattr(sim_prober, "simulate_run", counted)
    args = SimRequestArgs(model="meta-llama/Llama-3.1-8B", gpu="H100", trace="azure-conv", num_requests=600)
    slo = SLO(ttft_s=0.2, tpot_s=0.05)

    def two_probers(*rates):
        a, b = (sim_prober.SimProber(args, None, "request_rate", slo, 0.9) for _ in range(2))
        return [a.run_at(r) for r in rates] + [b.run_at(rates[0])]

    shared = sim_prober.sharing_probes(two_probers)(4.0)
    assert shared[0] is shared[1] and calls == [4.0]
    apart = two_probers(4.0)
    assert apart[0] is not apart[1] and calls == [4.0, 4.0, 4.0]
    assert [r.ttft_s for r in apart[1].records] == [r.ttft_s for r in shared[1].records]
    # past SHARED_MAX_REQUESTS the oldest run goes: at 1,000 requests two 600-request runs do not fit, so 4 req/s,
    # dropped when 8 req/s was kept, is simulated again: 4, 8, 4
    monkeypatch.setattr(sim_prober, "SHARED_MAX_REQUESTS", 1000)
    calls.clear()
    sim_prober.sharing_probes(two_probers)(4.0, 8.0)
    assert calls == [4.0, 8.0, 4.0]
