"""``search``, ``goodput --simulate --target`` and ``cost --simulate`` give one SLO capacity one band: the search's
candidate starts its rate search at its capacity bound and guesses the bracket, so its first probe is not theirs;
where TPOT binds the capacity below saturation the band is read from the search redone from 1 req/s, as theirs
(``serving.origin_band``), and the ranking's band ends are that band's."""

from __future__ import annotations

import pytest
from cli_run import cli_json, run_cli

from kvledger.ledgers.error_band import error_band

# Llama-3.1-8B on one H100 under TPOT ≤ 9 ms, 300 requests a probe: the capacity 13.375 req/s is TPOT-bound below
# saturation (tests/analyses/test_binding_band.py's case), its band TPOT's error carried to the rate
MODEL, SETUP = ["meta-llama/Llama-3.1-8B"], ["--prompt-lengths", "uniform:512:1024", "--output-lengths",
                                             "uniform:64:128", "--num-requests", "300", "--slo", "ttft=500ms,tpot=9ms",
                                             "--target", "0.9"]


def test_search_goodput_and_cost_give_one_capacity_band():
    gp = cli_json("goodput", "--simulate", *MODEL, "--gpu", "H100", *SETUP)["error_band"]
    cost = cli_json("cost", "--simulate", *MODEL, "--gpu", "H100", *SETUP)["simulation"]["capacity_search"][
        "error_band"]
    # 8.295 req/s = 21.8M requests a month (21.8e6 / (3600 × 730)); $10/GPU-h: the search sizes and ranks
    s = cli_json("search", *MODEL, "--gpus", "H100", "--tp", "1", *SETUP, "--rate", "8.295",
                 "--gpu-usd-per-hour", "10")
    (e,) = [c for c in s["candidates"] if c["status"] == "feasible"]
    assert e["capacity"]["probes"][0][0] != 1.0  # the search started elsewhere (its capacity bound), not at 1 req/s
    mine, ranked = e["capacity"]["error_band"], e["capacity_band"]
    assert "TPOT binds there, below saturation" in gp["text"] and "6.517 ms at 1 req/s" in gp["text"]
    for band in (cost, mine):
        assert (band["value"], band["low"], band["high"], band["text"]) == (gp["value"], gp["low"], gp["high"],
                                                                           gp["text"])
    # the ranking's band: the same req/s, multipliers ÷ the capacity 13.375 (×0.736–×1.296), not the throughput's
    assert (ranked["low"], ranked["high"]) == (gp["low"], gp["high"])
    assert (ranked["low_multiplier"], ranked["high_multiplier"]) == pytest.approx(
        (gp["low"] / 13.375, gp["high"] / 13.375))
    thr = error_band(gp["regime"], "throughput")  # ×0.816–×1.119, the band the search used before
    assert ranked["low_multiplier"] < thr.low - 0.05
    # the winner line prints it as goodput and cost do: 9.844–17.33 req/s (the low end TPOT's line at k = 1/(1 + q10)
    # = 1/(1 − 0.063468) = 1.067769: (1 + (8.98/1.067769 − 6.517) · 12.375/(8.98 − 6.517)) / 1.067769 = 9.844; the top
    # is TPOT's line at its low multiplier under the axis ceiling, test_binding_band.py's rule; a probe's raw
    # throughput capped it at 14.93)
    text = " ".join(run_cli("search", *MODEL, "--gpus", "H100", "--tp", "1", *SETUP, "--rate", "8.295",
                            "--gpu-usd-per-hour", "10").output.split())
    assert "80% band 9.844–17.33 req/s" in gp["text"]
    assert "SLO capacity 13.38 req/s per replica (12.04 good req/s there), 80% band 9.844–17.33 req/s" in text
    # sized at the band's ends as cost redoes its decision there: 8.295 / (9.844 × 0.8) → 2 replicas, at 17.33 → 1
    ends = e["sizing"]["at_band_low"], e["sizing"]["at_band_high"]
    assert [x["replicas"] for x in ends] == [2, 1]
    assert [x["sizing_req_per_s"] for x in ends] == pytest.approx([gp["low"], gp["high"]])


def test_report_and_the_web_app_carry_the_same_band():
    # report prices at cost --simulate's capacity search (decision_data.build_report_data → sim_capacity); the web
    # app's serving answer is that report's, its headline the band's ends and sentence
    gp = cli_json("goodput", "--simulate", *MODEL, "--gpu", "H100", *SETUP)["error_band"]
    rep = cli_json("report", *MODEL, "--gpu", "H100", *SETUP)["cost"]["simulation"]["capacity_search"]["error_band"]
    assert (rep["low"], rep["high"], rep["text"]) == (gp["low"], gp["high"], gp["text"])
    from kvledger.report.webapp import serving_payload

    head = serving_payload(MODEL[0], "H100", "ttft=500ms,tpot=9ms", None, num_requests=300,
                           workload={"prompt_lengths": "uniform:512:1024", "output_lengths": "uniform:64:128"})[
        "headline"]
    assert head["sizing_req_per_s_range"] == [gp["low"], gp["high"]] and head["capacity_band"] == gp["text"]
