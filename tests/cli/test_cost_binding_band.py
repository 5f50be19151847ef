"""``cost --simulate`` judges its verdict on the SLO capacity's band that the capacity search shows: a TPOT-bound
capacity below saturation takes TPOT's band (``binding_band``), and the decision is redone at that band's ends, not
at the saturation throughput's (``capacity_bands.band_inputs``, ``cost_band``)."""

from __future__ import annotations

import math

import pytest
from cli_run import cli_json

from kvledger.ledgers.decision_notes import band_sides_text
from kvledger.ledgers.error_band import error_band

# Llama-3.1-8B on one H100 under TPOT ≤ 9 ms: the search finds 13.375 req/s, where TPOT binds below saturation (the
# case of tests/analyses/test_binding_band.py); its band comes from TPOT's error, ×0.75–×1.12 of the capacity.
CASE = ["cost", "--simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--prompt-lengths", "uniform:512:1024",
        "--output-lengths", "uniform:64:128", "--num-requests", "300", "--slo", "ttft=500ms,tpot=9ms", "--target",
        "0.9"]
# 21.8M requests a month = 21.8e6 / (3600 × 730) = 8.295 req/s; one replica at 80% serves 0.8 × capacity, so it needs
# a capacity of 8.295 / 0.8 = 10.37 req/s: one replica at the 13.375 found (×0.775 and up), two below. At $10/GPU-h
# one replica is 730 × $10 = $7,300/month, two $14,600; gpt-4.1-mini bills $10,087.96: self-host, unless the capacity
# is under ×0.775 of the one found.
VOLUME = ["--monthly-requests", "21.8M", "--engineer-months-per-month", "0", "--api", "OpenAI:gpt-4.1-mini",
          "--gpu-usd-per-hour", "10"]


def test_a_tpot_bound_verdict_flips_inside_the_capacity_band_shown():
    d = cli_json(*CASE, *VOLUME)
    cap, dec, band = d["simulation"]["capacity_search"]["error_band"], d["decision"], d["error_band"]
    assert "TPOT binds there, below saturation" in cap["text"]
    lo, hi = cap["low"] / cap["value"], cap["high"] / cap["value"]
    # the decision is redone at the capacity band's own ends (its req/s, not the throughput band's)
    assert (dec["capacity_band_low"], dec["capacity_band_high"]) == pytest.approx((lo, hi))
    ends = dec["band_ends"]
    assert [e["sizing_req_per_s"] for e in ends] == pytest.approx([cap["low"], cap["high"]])
    assert (band["capacity_low_req_per_s"], band["capacity_high_req_per_s"]) == pytest.approx((cap["low"], cap["high"]))
    # one replica, $7,300, at the capacity found; two, $14,600, at the low end (9.844 req/s × 0.8 < 8.295 req/s)
    assert (dec["replicas"], dec["self_host_usd_per_month"], dec["verdict"]) == (1, 7300.0, "self-host")
    assert [(e["replicas"], e["self_host_usd_per_month"], e["verdict"]) for e in ends] == [
        (2, 14600.0, "API"), (1, 7300.0, "self-host")]
    assert dec["flips"]["capacity_multiplier"] == pytest.approx(21.8e6 / (3600 * 730) / 0.8 / cap["value"], rel=1e-3)
    assert not dec["holds_within_band"] and band["decision_flips_inside_band"]
    assert "FLIPS inside the band" in band["text"]
    assert f"band {cap['low']:.4g}–{cap['high']:.4g} req/s, a latency limit's, as the capacity search bands it" in band[
        "text"]
    # on the saturation throughput's band (×0.82–×1.12 here) the verdict held: its low end still needs one replica
    thr = error_band(cap["regime"], "throughput")
    assert lo < thr.low and math.ceil(21.8e6 / (3600 * 730) / (cap["value"] * thr.low * 0.8)) == 1


def test_per_good_request_the_band_is_the_capacity_bands_ends():
    d = cli_json(*CASE)
    cap, band = d["simulation"]["capacity_search"]["error_band"], d["error_band"]
    lo, hi = cap["low"] / cap["value"], cap["high"] / cap["value"]
    # a good request costs 1/k of the one priced where the capacity is k × the one found
    sh = band["self_host_usd"]
    assert (band["self_host_usd_at_low_capacity"], band["self_host_usd_at_high_capacity"]) == pytest.approx(
        (sh / lo, sh / hi))
    assert (band["goodput_low_req_per_s"], band["goodput_high_req_per_s"]) == pytest.approx(
        (band["goodput_req_per_s"] * lo, band["goodput_req_per_s"] * hi))


def test_a_ttft_bound_capacity_keeps_the_throughput_band_in_the_decision():
    # TTFT ≤ 60 ms binds: the capacity band is the throughput's around the capacity, the decision's as before
    d = cli_json(*CASE[:-4], "--slo", "ttft=60ms,tpot=50ms", "--target", "0.9", *VOLUME)
    cap, dec = d["simulation"]["capacity_search"]["error_band"], d["decision"]
    thr = error_band(cap["regime"], "throughput")
    assert "binds there" not in cap["text"]
    assert (dec["capacity_band_low"], dec["capacity_band_high"]) == pytest.approx((thr.low, thr.high))
    assert [e["sizing_req_per_s"] for e in dec["band_ends"]] == pytest.approx([cap["low"], cap["high"]])
    assert dec["band_source"].startswith("measured 80% band of simulated capacity")
    assert "latency limit" not in d["error_band"]["text"]  # the throughput band's words, as before


def test_a_band_wholly_below_the_capacity_is_two_minus_sides():
    # ×0.79–×0.94 (the SGLang 70B case's TPOT band): 21% and 6% below the capacity priced
    assert band_sides_text(0.79, 0.94) == "−21%/−6%"
    assert band_sides_text(0.58, 1.07) == "−42%/+7%"
    assert band_sides_text(0.7, 1.3) == "±30%"
