"""``kvledger search`` prices a candidate whose capacity bound caps the SLO capacity found as ``cost --simulate`` does:
on a run of the same workload and seed at the bound (``sim_capacity.run_at_sized_rate``), not on the probe at the rate
found, whose goodput is that of a load the replica cannot sustain.
"""

from __future__ import annotations

import pytest

# 60 requests of 1,000 prompt tokens and 2 output tokens on one L4 under ttft ≤ 10 s (Poisson arrivals, seed 0): two
# output tokens so that the search's bounds exist (a bound on tokens/s per user needs a TPOT), the case of
# test_capacity_bound_cap otherwise.
CASE = ["meta-llama/Llama-3.1-8B", "--gpu", "L4", "--prompt-lengths", "fixed:1000", "--output-lengths", "fixed:2",
        "--num-requests", "60", "--max-model-len", "8192", "--monthly-tokens", "3B", "--slo", "ttft=10s",
        "--gemm-efficiency", "flat"]  # the flat roofline of test_capacity_bound_cap (no carried layer-kernel floors)


def test_search_prices_the_run_at_the_bound_as_cost_does(cli_json):
    cost = cli_json("cost", "--simulate", *CASE)["simulation"]["capacity_search"]
    entry = next(e for e in cli_json("search", *CASE, "--tp", "1", "--workers", "1")["candidates"]
                 if e["status"] == "feasible")
    cap = entry["capacity"]
    # Both searches find 11.125 req/s (the probe's 60 requests all within 10 s, its goodput 5.8751 good req/s: the
    # engine busy throughout; faster probes are too short to show their load, probe_length) and both
    # cap it at the same capacity bound, 6.0209 req/s (1,000-token prefills: about 1 ÷ 0.166 s, test_capacity_bound_cap)
    assert cap["slo_capacity_req_per_s"] == cost["slo_capacity_req_per_s"] == 11.125
    assert cap["sized_on_req_per_s"] == cost["sized_on_req_per_s"] == pytest.approx(6.0209, abs=1e-4)
    assert entry["sizing"]["sizing_req_per_s"] == cap["sized_on_req_per_s"]
    # the probe at 11.125 req/s, kept as found
    assert cap["goodput_at_boundary_req_per_s"] == cost["goodput_at_boundary_req_per_s"] == pytest.approx(5.8751,
                                                                                                          abs=1e-4)
    # priced: the run at the bound, the very figures cost --simulate prices (the same simulation, byte for byte)
    assert cap["goodput_at_sized_rate_req_per_s"] == cost["goodput_at_sized_rate_req_per_s"] == pytest.approx(
        5.1516, abs=1e-4)
    assert cap["attainment_at_sized_rate"] == cost["attainment_at_sized_rate"] == 1.0
    # good requests at the load: 3B tokens ÷ 1,002 tokens a request ÷ (730 × 3600 s) = 1.139 req/s, one replica, below
    # the 6.021 sized on, so offered × the share within the SLO of a run at 1.139 req/s, as cost --simulate prices
    # (analyses/serving/load_run.load_share_at): all 60 within 10 s, 1.000
    assert ("good requests at that load = offered × 1.000 (the share within the SLO in a run of the same workload "
            "and seed (0) at 1.139 req/s") in entry["sizing"]["how"]
    assert cap["at_volume_load"]["num_good"] == cap["at_volume_load"]["num_requests"] == 60
    # USD per 1,000 good requests at capacity = 1 GPU × $/GPU-h × 1,000 ÷ (3600 × 6.0209 req/s × 1.0 attainment)
    usd_h = entry["sizing"]["rental_usd_per_month"] / (entry["sizing"]["num_gpus"] * 730)
    assert entry["cost"]["usd_per_1k_requests_at_capacity"] == pytest.approx(
        usd_h * 1000 / (3600 * cap["sized_on_req_per_s"]), rel=1e-6)


def test_the_sized_keys_are_null_where_the_bound_does_not_bind(cli_json):
    # ttft ≤ 500 ms: the capacity found is below the bound, so nothing is re-simulated and the sized-rate keys are
    # null (there, as in cost's capacity_search, so a script reads them without .get()); the boundary run's own
    # goodput is goodput_at_boundary_req_per_s either way (goodput_req_per_s: the good rate priced)
    case = [a if a != "ttft=10s" else "ttft=500ms" for a in CASE]
    entry = next(e for e in cli_json("search", *case, "--tp", "1", "--workers", "1")["candidates"]
                 if e["status"] == "feasible")
    cap = entry["capacity"]
    assert cap["slo_capacity_req_per_s"] < entry["bounds"]["capacity_bound_req_per_s"]
    assert [cap[k] for k in ("sized_on_req_per_s", "attainment_at_sized_rate", "goodput_at_sized_rate_req_per_s")] \
        == [None] * 3
    # the good req/s sustained at the rate found is then goodput_req_per_s itself: not said twice under two names
    assert cap["sustained_good_req_per_s_at_boundary"] is None
    assert cap["goodput_req_per_s"] == pytest.approx(cap["slo_capacity_req_per_s"] * cap["attainment"])
    assert "goodput_at_boundary_req_per_s" in cap
    # the good share at the load: a run at the volume's 1.139 req/s (its own key, not the sized-rate ones)
    assert cap["at_volume_load"]["rate_req_per_s"] == pytest.approx(3e9 / 1002 / (730 * 3600))
