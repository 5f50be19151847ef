"""``cost --simulate --seeds N``: each seed's SLO capacity priced by the same ledger, the range, and the verdict's flip,
worked by hand on stand-in searches and ledgers."""

from __future__ import annotations

from types import SimpleNamespace

from kvledger.analyses.serving.cost_seeds import cheaper_side, cost_seed_spread


def _cap(rate: float):
    # a SimCapacity's parts the spread reads: its rate and its search (a SimBoundary's boundary value and goodputs)
    search = SimpleNamespace(boundary=SimpleNamespace(boundary_value=rate), boundary_per_gpu=rate,
                             goodput_at_boundary_req_per_s=0.8 * rate)
    return SimpleNamespace(rate_req_per_s=rate, sizing_req_per_s=rate, search=search)  # no bound binds


def _payload(goodput: float, usd_in: float, usd_out: float, verdict: str | None, sh_req=None, api_req=None):
    return {"capacity": {"goodput_req_per_s": goodput},
            "totals": {"self_host_usd_per_mtok_input": usd_in, "self_host_usd_per_mtok_output": usd_out},
            "decision": None if verdict is None else {"verdict": verdict},
            "inputs": {"self_host_usd_per_request": sh_req, "api_usd_per_request": api_req}}


def test_the_range_over_the_seeds_and_a_verdict_that_flips():
    # seeds 3, 4, 5 with capacities 20, 18, 22 req/s; at a given volume the monthly bills put self-hosting cheaper
    # for seeds 3 and 5 and the API for seed 4 (its lower capacity needs one more replica): the verdict flips.
    # Ranges: input $0.10–$0.12, output $0.50–$0.61 per 1M tokens, goodput 14.4–17.6 good req/s (0.8 × capacity)
    caps = {4: _cap(18.0), 5: _cap(22.0)}
    pays = {4: _payload(14.4, 0.12, 0.61, "api"), 5: _payload(17.6, 0.10, 0.50, "self-host")}
    s = cost_seed_spread(_cap(20.0), _payload(16.0, 0.11, 0.55, "self-host"), [3, 4, 5],
                         lambda seed: (caps[seed], pays[seed]))
    assert [r["sizing_req_per_s"] for r in s.per_seed] == [r["slo_capacity_req_per_s"] for r in s.per_seed] == \
        [20.0, 18.0, 22.0]  # no bound binds: each seed sized on the rate its search found
    assert [r["cheaper"] for r in s.per_seed] == ["self-host", "api", "self-host"]
    assert s.metrics["usd_per_mtok_input"] == {"min": 0.10, "max": 0.12, "n_seeds": 3}
    assert s.metrics["usd_per_mtok_output"] == {"min": 0.50, "max": 0.61, "n_seeds": 3}
    assert s.metrics["goodput_req_per_s"] == {"min": 14.4, "max": 17.6, "n_seeds": 3}
    assert s.flips and s.note.startswith("the verdict FLIPS across seeds 3–5 — seed 3: self-hosting (capacity 20 "
                                         "req/s); seed 4: the API (capacity 18 req/s)")
    # the capacity's own spread is goodput's (seed_spread.capacity_spread): 18–22 req/s, a width of 4 req/s, more than
    # 10 % of the first seed's 20 (2 req/s): its note says −10 % to +10 %
    d = s.to_dict()
    assert d["slo_capacity_req_per_s"] == d["sizing_req_per_s"] == {"min": 18.0, "max": 22.0, "n_seeds": 3}
    assert d["capped_by_bound_seeds"] == [] and d["verdict_flips"] is True and "capacity_req_per_s" not in d
    assert s.capacity.note.startswith("the SLO capacity moves -10% to +10% of the first seed's over seeds 3–5")
    assert s.text() == ("over seeds 3–5 (min–max; the ledger above is seed 3's): SLO capacity 18–22 req/s; "
                        "self-hosted $0.1000–$0.1200 per 1M input and $0.5000–$0.6100 per 1M output tokens")


def test_a_verdict_that_holds_and_a_workload_without_a_draw():
    # without a volume the cheaper side is one good request's cost against the API's: $0.0003 < $0.0039 each seed
    pay = _payload(16.0, 0.11, 0.55, None, sh_req=0.0003, api_req=0.0039)
    assert cheaper_side(pay) == "self-host" and cheaper_side(_payload(1, 1, 1, None, 0.005, 0.0039)) == "api"
    s = cost_seed_spread(_cap(20.0), pay, [0, 1], lambda seed: (_cap(21.0), pay))
    assert not s.flips and s.note is None and s.metrics["usd_per_mtok_input"]["min"] == 0.11
    # a trace replayed at its own arrival times draws nothing from the seed: the first search stands for each
    s = cost_seed_spread(_cap(20.0), pay, [0, 1, 2], None)
    assert s.capacity.seed_free and [r["sizing_req_per_s"] for r in s.per_seed] == [20.0] * 3
    assert s.text() == "over seeds 0–2: the same — the workload draws nothing from the seed"
