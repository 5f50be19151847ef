"""The KV tiers caption's capacity clause (``figures_tiers._capacities``) where the search with the tiers found no
capacity, or no measured band stands for the regime: said, never a number it does not have."""

from __future__ import annotations

from kvledger.report.figures_tiers import _capacities

WO = {"slo_capacity_req_per_s": 35.5, "sized_on_req_per_s": 35.5, "error_band": None}


def test_no_capacity_with_the_tiers_names_the_lowest_rate_probed():
    # probes halved from 1 req/s to 0.015625 (1/64) and every one missed: no capacity with the tiers
    sec = {"capacity": {"target": 0.9, "without_tier": WO, "with_tier": None, "inside_band": None,
                        "probes_with_tier": [[1.0, 0.5, False], [0.5, 0.6, False], [0.015625, 0.7, False]]}}
    assert _capacities(sec).endswith("35.5 req/s without the tiers; with them no rate down to 0.015625 req/s meets "
                                     "the target (their loads delay TTFT).")


def test_no_capacity_either_way_does_not_blame_the_tiers_loads():
    # no rate met the target without the tiers either (a near-idle step over the TTFT limit, say): the caption says
    # the tiers do not lift it, not that their loads delayed TTFT
    none = {"slo_capacity_req_per_s": None, "sized_on_req_per_s": None, "error_band": None}
    sec = {"capacity": {"target": 0.9, "without_tier": none, "with_tier": None, "inside_band": None,
                        "probes_with_tier": [[1.0, 0.5, False], [0.0009765625, 0.6, False]]}}
    assert _capacities(sec).endswith("no rate meets the target without the tiers, nor with them down to "
                                     "0.000976562 req/s: the tiers do not lift it.")


def test_no_band_no_judgment():
    w = {"slo_capacity_req_per_s": 40.0, "sized_on_req_per_s": 38.0, "error_band": None,
         "hit_share": {"hbm": 0.25, "host_dram": 0.5}}
    sec = {"capacity": {"target": 0.9, "without_tier": WO, "with_tier": w, "inside_band": None,
                        "probes_with_tier": [[40.0, 0.91, True]]}}
    got = _capacities(sec)
    # the capacity bound caps the 40 found at 38: sized on 38, as cost sizes; no band: the difference is not judged
    assert ("35.5 req/s without the tiers → 38 req/s with them, sized on the deployment's capacity bound; 40 req/s "
            "found; the share of prompt tokens each tier served at 40 req/s: hbm 25.0%, host_dram 50.0%; no measured "
            "band stands for this regime, so whether the difference matters is not judged.") in got
    assert _capacities({}) == ""


def test_the_ttft_at_the_capacity_without_the_tiers_where_none_with_them():
    # no rate met the target with the tiers: the TTFT is taken at the capacity without them, 35.5 req/s, each figure
    # in ms to one decimal (0.4123 s → 412.3 ms; 1.25 s → 1,250.0 ms)
    t = {"rate_req_per_s": 35.5, "capacity": "without_tier", "with_tier": {"mean_s": 0.4123, "p90_s": 1.25},
         "without_tier": {"mean_s": 0.1, "p90_s": 0.2}}
    sec = {"capacity": {"target": 0.9, "without_tier": WO, "with_tier": None, "inside_band": None,
                        "probes_with_tier": [[1.0, 0.5, False]], "ttft_at_capacity": t}}
    assert _capacities(sec).endswith("with them no rate down to 1 req/s meets the target (their loads delay TTFT). At "
                                     "35.5 req/s (the capacity without them) TTFT mean 412.3 ms, p90 1,250.0 ms with "
                                     "the tiers against 100.0 ms and 200.0 ms without (the same requests simulated "
                                     "twice).")
