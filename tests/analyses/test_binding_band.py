"""An SLO capacity bound by a latency limit below saturation takes its band from that latency's error, carried to the
rate by time rescaling (``binding_band``), not from the saturation throughput's band."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace as NS

import pytest
from typer.testing import CliRunner

from kvledger.analyses.serving.binding_band import Binding, latency_binding
from kvledger.cli.main import app
from kvledger.ledgers.error_band import error_band
from kvledger.ledgers.slo import parse_slo


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


def _run(tpot_s: float) -> NS:
    # one request of 11 tokens whose decode took 10 gaps of tpot_s: its TPOT is tpot_s
    return NS(run=NS(records=[NS(arrival_s=0.0, first_token_s=0.05, finish_s=0.05 + 10 * tpot_s,
                                 num_output_tokens=11)]))


def test_the_ceiling_is_on_the_axis_so_the_band_holds_the_capacity():
    # A short probe's throughput (its requests over first arrival → last finish, drain included) is below its
    # nominal rate: the capacity probe at 5 req/s offered 4.6 req/s over its arrivals and served 4.3 req/s. On the
    # axis that is 5 × 4.3 / 4.6 = 4.674 req/s, and the first probe's 1 × 0.85 / 0.9 = 0.944, so the ceiling is the
    # capacity itself, 5 (its probe kept up: 4.3 ≥ 0.9 × 4.6). Capped by the raw 4.3 instead, rate_at(1) was 4.3 and
    # the band missed its own capacity (RTX 4090 at 10.62 req/s: 7.923–9.53 req/s; 8.833–11.87 with the axis ceiling).
    probes = [NS(value=1.0, offered_rate_req_per_s=0.9, throughput_req_per_s=0.85),
              NS(value=5.0, offered_rate_req_per_s=4.6, throughput_req_per_s=4.3)]
    sb = NS(boundary=NS(boundary_value=5.0), probes=probes, target=0.9, first_run=_run(0.010),
            boundary_run=_run(0.020), goodputs=[NS(num_missed={}), NS(num_missed={"tpot": 3, "ttft": 1})])
    b = latency_binding(sb, parse_slo("ttft=1s,tpot=20ms"))
    assert b is not None and b.metric == "tpot" and b.saturation_req_per_s == pytest.approx(5.0)
    assert b.rate_at(1.0) == pytest.approx(5.0)
    # k = 0.8: the line gives 8.75 (first test), above the ceiling 5 / 0.8 = 6.25; k = 1.25: 2.72, under it
    assert b.rate_at(0.8) == pytest.approx(6.25)
    assert b.rate_at(1.25) == pytest.approx(2.72)
    # a probe past saturation at 8 req/s that offered 7.4 and served 5.55: 8 × 5.55 / 7.4 = 6.0 on the axis, the
    # ceiling; a 0.8× engine then serves at most 6.0 / 0.8 = 7.5
    probes.append(NS(value=8.0, offered_rate_req_per_s=7.4, throughput_req_per_s=5.55))
    b = latency_binding(sb, parse_slo("ttft=1s,tpot=20ms"))
    assert b.saturation_req_per_s == pytest.approx(6.0) and b.rate_at(0.8) == pytest.approx(7.5)


def _goodput(gpu: str, slo: str, prompts: str = "uniform:512:1024", outputs: str = "uniform:64:128",
             *more: str) -> dict:
    """``goodput --simulate`` Llama-3.1-8B on ``gpu``, 300 requests a probe, at 90% under ``slo``: its --json."""
    res = CliRunner().invoke(app, ["goodput", "--simulate", "meta-llama/Llama-3.1-8B", "--gpu", gpu, *more,
                                   "--prompt-lengths", prompts, "--output-lengths", outputs, "--num-requests", "300",
                                   "--slo", slo, "--target", "0.9", "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_a_tpot_bound_capacity_on_a_short_search_keeps_its_capacity_inside_the_band():
    # RTX 4090, 300 requests per probe: the capacity 10.625 req/s, p90 TPOT 19.01 ms at 1 req/s and 48.68 ms there.
    # TPOT's k (measured ÷ simulated) spans 0.8948 … 1.0763 (gpu/dense/vllm, widened to the uncalibrated band), so
    # x(1.0763) = (1 + (48.68/1.0763 − 19.01) · 9.625/29.67) / 1.0763 = (1 + 8.506) / 1.0763 = 8.833 req/s and the top
    # is the ceiling 10.625 / 0.8948 = 11.87 req/s (the line's own x(0.8948) = 13.98 is above it)
    band = _goodput("rtx-4090", "ttft=500ms,tpot=50ms", "fixed:512", "fixed:128", "--max-model-len", "32768")[
        "error_band"]
    assert "TPOT binds there, below saturation" in band["text"]
    assert band["value"] == pytest.approx(10.625)
    assert band["low"] == pytest.approx(8.833, rel=1e-3) and band["high"] == pytest.approx(11.87, rel=1e-3)
    assert band["low"] <= band["value"] <= band["high"]


def test_a_tpot_bound_capacity_takes_the_tpot_band():
    d = _goodput("H100", "ttft=500ms,tpot=9ms")
    band = d["error_band"]
    # the ceiling on the axis: each probe's throughput × its value ÷ its offered rate, never below the capacity
    served = max([band["value"], *(p["value"] * p["throughput_req_per_s"] / p["offered_rate_req_per_s"]
                                   for p in d["probes"] if p["throughput_req_per_s"] and p["offered_rate_req_per_s"])])
    assert "TPOT binds there, below saturation" in band["text"]
    assert "with a run or stage below saturation" in band["source"]  # TPOT's measured points, not throughput's
    # the text's p90 TPOT at the first probe and at the capacity, carried through TPOT's multipliers; the upper end
    # no more than what a faster engine serves at all (the axis ceiling ÷ TPOT's low multiplier)
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
    band = _goodput("H100", "ttft=60ms,tpot=50ms")["error_band"]
    thr = error_band(band["regime"], "throughput")
    assert "binds there" not in band["text"] and "with a run past saturation" in band["source"]
    assert (band["low"], band["high"]) == pytest.approx((band["value"] * thr.low, band["value"] * thr.high))
