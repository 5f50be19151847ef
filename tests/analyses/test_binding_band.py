"""An SLO capacity bound by a latency limit below saturation takes its band from that latency's error, carried to the
rate by time rescaling (``binding_band``), not from the saturation throughput's band."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from kvledger.analyses.serving.binding_band import Binding
from kvledger.cli.main import app
from kvledger.ledgers.error_band import error_band


def test_a_slower_engine_meets_the_limit_at_a_lower_rate():
    # p90 TPOT 10 ms at 1 req/s, 20 ms at the capacity 5 req/s; the probes served at most 8 req/s.
    # k = 1: the capacity itself. k = 1.25: (1 + (20/1.25 − 10) · (5 − 1)/(20 − 10)) / 1.25 = (1 + 2.4) / 1.25 = 2.72.
    # k = 0.8: (1 + (25 − 10) · 0.4) / 0.8 = 8.75, under what a 0.8× engine serves at all (8 / 0.8 = 10)
    b = Binding("tpot", 0.9, (1.0, 0.010), (5.0, 0.020), 8.0)
    assert b.rate_at(1.0) == pytest.approx(5.0)
    assert b.rate_at(1.25) == pytest.approx(2.72)
    assert b.rate_at(0.8) == pytest.approx(8.75)
    # probes that served at most 6 req/s: a 0.8× engine serves at most 6 / 0.8 = 7.5, the band's ceiling
    assert Binding("tpot", 0.9, (1.0, 0.010), (5.0, 0.020), 6.0).rate_at(0.8) == pytest.approx(7.5)
    # the line falls to 7.5 ms at rate 0: an engine 3× slower needs q = 20/3 = 6.67 ms, below it: no rate meets it
    assert b.rate_at(3.0) == 0.0


def test_a_tpot_bound_capacity_takes_the_tpot_band():
    res = CliRunner().invoke(app, ["goodput", "--simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100",
                                   "--prompt-lengths", "uniform:512:1024", "--output-lengths", "uniform:64:128",
                                   "--num-requests", "300", "--slo", "ttft=500ms,tpot=9ms", "--target", "0.9",
                                   "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    band, served = d["error_band"], max(p["throughput_req_per_s"] for p in d["probes"])
    assert "TPOT binds there, below saturation" in band["text"]
    assert "with a run or stage below saturation" in band["source"]  # TPOT's measured points, not throughput's
    # the text's p90 TPOT at the first probe and at the capacity, carried through TPOT's multipliers; the upper end
    # no more than what a faster engine serves at all (the probes' largest throughput ÷ TPOT's low multiplier)
    c, tpot = band["value"], error_band(band["regime"], "tpot_mean")
    q1, qc = (float(x) / 1e3 for x in re.findall(r"([0-9.]+) ms at", band["text"]))
    b = Binding("tpot", 0.9, (1.0, q1), (c, qc), served)
    assert band["low"] == pytest.approx(b.rate_at(tpot.high), rel=2e-3)
    assert band["high"] == pytest.approx(b.rate_at(tpot.low), rel=2e-3)
    thr = error_band(band["regime"], "throughput")
    assert (band["low"], band["high"]) != pytest.approx((c * thr.low, c * thr.high), rel=1e-3)


def test_a_ttft_bound_capacity_keeps_the_throughput_band():
    # TTFT ≤ 60 ms binds (TPOT ≤ 50 ms is far): TTFT near a capacity is the queue's wait, whose band was not measured
    # there, so the capacity keeps the saturation throughput's band, C × its multipliers
    res = CliRunner().invoke(app, ["goodput", "--simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100",
                                   "--prompt-lengths", "uniform:512:1024", "--output-lengths", "uniform:64:128",
                                   "--num-requests", "300", "--slo", "ttft=60ms,tpot=50ms", "--target", "0.9",
                                   "--json"])
    assert res.exit_code == 0, res.output
    band = json.loads(res.stdout)["error_band"]
    thr = error_band(band["regime"], "throughput")
    assert "binds there" not in band["text"] and "with a run past saturation" in band["source"]
    assert (band["low"], band["high"]) == pytest.approx((band["value"] * thr.low, band["value"] * thr.high))
