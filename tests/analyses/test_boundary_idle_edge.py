"""A rate search whose target is met only within sampling noise even near idle answers "no SLO capacity you can bank
on", not the rate the bisection settled on (a fresh-user trial: Llama-3.1-70B on 8 L40S, azure-conv, TTFT ≤ 1 s,
TPOT ≤ 60 ms, target 90 % gave "0.002533 req/s", and search priced it with 2,200 GPUs)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from kvledger.analyses.serving.idle_edge import check_idle_edge, noise_half_width, within_noise
from kvledger.cli.main import app


def test_noise_rule_is_the_binomial_interval():
    # one standard error (NOISE_Z = 1): √(0.9005·0.0995/2000) = 0.0066933: 0.9005 − 0.0067 = 0.8938 < 0.9 → within
    assert noise_half_width(0.9005, 2000) == pytest.approx(0.0066933, abs=1e-6)
    assert within_noise(0.9005, 2000, 0.9)
    # 0.93 − √(0.93·0.07/2000) = 0.93 − 0.00571 = 0.9243 ≥ 0.9 → clearly above
    assert not within_noise(0.93, 2000, 0.9)
    # over 60 requests 93.33% is √(0.9333·0.0667/60) = 0.0322 from 90.11%: above a 90% target, a capacity kept
    assert not within_noise(56 / 60, 60, 0.9)
    assert not within_noise(1.0, 2000, 1.0)  # every request met at idle: a 100 % target is met, not noise


class _Prober:
    """A stand-in for ``sim_prober.SimProber``: attainment by rate from ``curve``, 2,000 requests a probe."""

    def __init__(self, probed, curve):
        self.curve, self.current_phase = curve, "bisection"
        self.runs, self.results = {}, {}
        for r in probed:
            self.run_at(r)

    def run_at(self, rate):
        self.runs[float(rate)] = SimpleNamespace(stopped_early=None)
        self.results[float(rate)] = SimpleNamespace(attainment=self.curve(rate), num_requests=2000)


def test_flat_attainment_at_the_target_is_no_capacity():
    p = _Prober([0.001953125, 0.00253, 0.0039], lambda r: 0.9005 if r < 0.0025 else 0.8995)
    edge = check_idle_edge(p, 0.00253, 0.9)
    # the check probes 0.001953125 / 16 = 0.0001220703 req/s, still 90.05 %: within ±1.34 points of 90 %
    assert edge is not None and edge.rate_req_per_s == pytest.approx(0.0001220703)
    assert edge.attainment == 0.9005 and edge.bisected_req_per_s == 0.00253
    assert "no SLO capacity you can bank on" in edge.note and "≈90.05%" in edge.note


def test_a_lowest_probe_on_the_load_cliff_keeps_the_capacity():
    # 90.2 % at 8 req/s (within noise) but 99 % at 0.5 req/s: the lowest probe sat on the cliff, not at idle
    p = _Prober([8.0, 9.0], lambda r: 0.99 if r < 1 else 0.902)
    assert check_idle_edge(p, 8.0, 0.9) is None
    p = _Prober([1.0, 46.0], lambda r: 0.995)  # clearly above at the lowest probe: no check probe is run
    assert check_idle_edge(p, 46.0, 0.9) is None and len(p.runs) == 2


def test_goodput_simulate_says_no_capacity_and_exits_1():
    res = CliRunner().invoke(app, ["goodput", "--simulate", "meta-llama/Llama-3.1-70B", "--gpu", "L40S", "--tp", "8",
                                   "--trace", "azure-conv", "--slo", "ttft=1s,tpot=60ms", "--target", "0.9", "--json",
                                   "--gemm-efficiency", "flat"])  # the figures below: the flat roofline (no floors)
    assert res.exit_code == 1
    d = json.loads(res.output)
    assert d["boundary"]["boundary_value"] is None
    edge = d["idle_edge"]
    # before: boundary 0.002533 req/s; the lowest probe 0.001953125 req/s, 90.05 %; near idle (÷16) 90.25 % of 2,000
    assert edge["bisected_req_per_s"] == pytest.approx(0.002533, rel=1e-3)
    assert edge["rate_req_per_s"] == pytest.approx(0.001953125 / 16)
    assert edge["attainment"] == pytest.approx(0.9025)


def test_goodput_json_says_the_largest_passing_rate_is_not_a_capacity():
    # Llama-3.1-8B on one H100, flat GEMM efficiency, 100 requests, TTFT ≤ 60 ms with 25 ms of client latency: 90 of
    # 100 requests meet it even near idle (90 % ± 3.00 %): the bisection settled on 0.35546875 req/s
    res = CliRunner().invoke(app, ["goodput", "--simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--tp", "1",
                                   "--slo", "ttft=60ms", "--num-requests", "100", "--client-latency", "25ms",
                                   "--gemm-efficiency", "flat", "--max-model-len", "8192", "--target", "0.9", "--json"])
    assert res.exit_code == 1
    b = json.loads(res.output)["boundary"]
    assert b["boundary_value"] is None and b["largest_passing_value"] == 0.35546875
    assert b["largest_passing_note"] == ("not a capacity: the target was met up to 0.355469 only within sampling "
                                         "noise, even near idle (see idle_edge), so no rate can be banked on "
                                         "(boundary_value is null)")
