"""``cost --simulate`` with a monthly volume prices the good share at the load each replica carries (a run of the same
workload and seed at the volume's mean rate ÷ replicas), not the share at the SLO capacity, and splits a token volume
by the mean tokens of all the run's requests, not of its good ones (``ledgers/load_share.py``,
``analyses/serving/load_run.py``).
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from kvledger.cli.main import app
from kvledger.ledgers.cost import Capacity
from kvledger.ledgers.decision_notes import volume_good_requests
from kvledger.ledgers.volume import MonthlyVolume, resolve_volume

runner = CliRunner()
# The L4 case of test_sized_rate_figures.py: 60 requests of 1,000 prompt tokens and 1 output token under ttft ≤ 10 s,
# fixed-interval arrivals (--arrival-cv 0), 3B tokens a month.
CMD = ["cost", "--simulate", "meta-llama/Llama-3.1-8B", "--gpu", "L4", "--prompt-lengths", "fixed:1000",
       "--output-lengths", "fixed:1", "--num-requests", "60", "--max-model-len", "8192", "--monthly-tokens", "3B",
       "--slo", "ttft=10s", "--arrival-cv", "0"]
PEAK = 121e12 * 0.7  # L4 bf16 dense peak × the roofline's achievable FLOP fraction, FLOP/s
# One request's whole step (test_sized_rate_figures.py): matmuls + LM head + causal attention over 500,500 pairs
STEP_S = (2 * 6_979_588_096 * 1000 + 2 * 4096 * 128_256 + 4 * 32 * 32 * 128 * 500_500) / PEAK  # 0.1679177 s
W_S = (2 * 6_979_588_096 * 1000 + 2 * 4096 * 128_256) / PEAK + 131_072 * 1000 / 240e9  # 0.1653658 s
BOUND = 1 / W_S  # the capacity bound sized on, 6.0472 req/s
# The volume: 3e9 tokens ÷ 1,001 tokens per request = 2,997,003 requests a month ÷ (730 × 3600 s) = 1.140412 req/s;
# ⌈1.1404 ÷ (6.0472 × 0.8)⌉ = 1 replica, so the replica carries r = 1.140412 req/s (18.86% of 6.0472).
REQUESTS = 3e9 / 1001
RATE = REQUESTS / (730 * 3600)
# At the capacity (the run at B, worked in test_sized_rate_figures.py) the engine never idles and its goodput is 1 / s
# good req/s: the good share there is (1 / s) ÷ B = w ÷ s = 0.98480 (every request good, but the run's drain makes
# goodput ÷ offered rate < 1).
SHARE_AT_CAPACITY = W_S / STEP_S
# At r one request arrives every 1 / r = 0.8769 s and takes one step of s = 0.1679 s: each is alone on the engine, its
# TTFT is s ≤ 10 s, so all 60 meet the SLO: share exactly 1.0. Good input tokens per second per replica = r × 1,000 ×
# 60 ÷ 60 = 1,140.41; GPU-hours per 1M input tokens = 10⁶ ÷ (1,140.41 × 3600) × prefill share 1 (one output token: the
# step is all prefill) = 0.243577 (the capacity's share gave u × 5,955.30 = 1,123.10 tok/s, 0.247332 GPU-h).


def _cost(*extra: str) -> dict:
    res = runner.invoke(app, [*CMD, *extra, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def test_hand_figures():
    assert STEP_S == pytest.approx(0.1679177, rel=1e-6) and SHARE_AT_CAPACITY == pytest.approx(0.98480, abs=1e-5)
    assert RATE == pytest.approx(1.140412, rel=1e-6) and 1 / RATE > STEP_S


def test_the_share_at_the_volumes_load_is_a_run_there():
    d = _cost()
    cap, dec = d["capacity"], d["decision"]
    # (the bound is shaded by 1e-9: work_bounds.SHADE)
    assert dec["replicas"] == 1 and dec["realized_utilization"] == pytest.approx(RATE / BOUND, rel=1e-8)
    # the good rate at the SLO capacity is what a replica fed that rate sustains: the bound × the run's attainment,
    # 6.0472 × 1.0 (ledgers/sustained_rate.py; the run's own goodput, × 0.98480, counted its drain tail) ...
    assert cap["attainment_at_sizing_rate"] == 1.0
    assert cap["goodput_req_per_s"] == pytest.approx(BOUND, rel=1e-8)
    # ... but what is priced is the run at r, seed 0: all 60 within the SLO
    at = cap["at_volume_load"]
    assert at["rate_req_per_s"] == pytest.approx(RATE, rel=1e-12) and at["seed"] == 0
    assert (at["num_requests"], at["num_good"], at["attainment"]) == (60, 60, 1.0)
    assert at["good_input_tok_per_s"] == pytest.approx(RATE * 1000, rel=1e-9)
    gpu = d["ledgers"]["self_host_input"]["items"][0]
    assert gpu["quantity"] == pytest.approx(1e6 / (RATE * 1000 * 3600), rel=1e-9)  # 0.243577 GPU-h
    assert gpu["quantity"] == pytest.approx(0.243577, rel=1e-5)
    assert "in a run of the same workload and seed (0) at 1.14 req/s, the volume's mean load per replica" in gpu["note"]
    # the volume's good requests: all of them (2,997,003 × 1.000), not × 0.985
    assert ("the volume's 2,997,003 good requests: 2,997,003 × 1.000, the share within the SLO in a run of the same "
            "workload and seed (0) at 1.14 req/s") in d["secondary"]
    self_usd = dec["self_host_usd_per_month"]
    assert d["secondary"].count(f"${self_usd / REQUESTS:.6f}") == 1


def test_without_a_run_at_the_load_the_volume_counts_the_share_at_the_capacity():
    # Where no run is made at the volume's load (r equal to the rate priced, a session workload), the volume's good
    # requests are its requests × the good share at the SLO capacity (the run at the 6.047 req/s sized on, seed 0),
    # the share of that run's requests within the SLO. (--utilization, which once priced this path with a volume, is
    # refused there now:
    # tests/cli/test_cost_utilization_volume_cli.py.)
    c = _cost()["capacity"]
    # the run at the capacity: all 60 of its requests within the SLO (attainment 1.0), so all 2,997,003 are good —
    # goodput ÷ offered rate, 0.9848, would count its drain tail as failed requests
    assert c["attainment_at_sizing_rate"] == 1.0
    assert c["sized_on_req_per_s"] == c["sizing_req_per_s"] < c["slo_capacity_req_per_s"]  # the bound caps what's found
    cap = SimpleNamespace(load=None, seed=0, goodput_req_per_s=c["sizing_req_per_s"] * SHARE_AT_CAPACITY,
                          searched_req_per_s=c["sizing_req_per_s"], attainment=c["attainment_at_sizing_rate"])
    good, how = volume_good_requests(REQUESTS, cap)
    assert good == REQUESTS
    assert how == ("the self-hosted bill ÷ the volume's 2,997,003 good requests: 2,997,003 × 1.000, the share within "
                   "the SLO at the SLO capacity (the run at 6.047 req/s, seed 0)")
    # without an attainment (a capacity known only by its goodput: here the run's own over its first arrival → last
    # finish, 1 / s) the share is goodput ÷ SLO capacity, with the decimals its product needs: 2,997,003 × 0.9848025
    # = 2,951,456.05 → the 2,951,456 beside it
    good, how = volume_good_requests(REQUESTS, SimpleNamespace(**{**vars(cap), "attainment": None}))
    assert round(good) == 2_951_456
    assert how == ("the self-hosted bill ÷ the volume's 2,951,456 good requests: 2,997,003 × 0.9848025, the good share "
                   "at the SLO capacity (5.955 good req/s ÷ 6.047 req/s, the run at that rate, seed 0)")


def test_the_printed_report_says_which_run():
    res = runner.invoke(app, CMD)
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert ("at the volume's load: a run of the same workload and seed (0) at 1.14 req/s per replica (the volume's "
            "mean rate ÷ replicas): 60 of 60 requests within the SLO (100.0%)") in text
    # the good share at the rate sized on is the share of that run's requests within the SLO, all 60 of them: 1.000,
    # not goodput ÷ offered rate, 0.985, which counts the run's drain tail as failed requests
    assert "not on the good share at the 6.047 req/s sized on (1.000, a replica's share at full load)" in text


def test_token_volume_split_by_all_requests_not_good_ones():
    # A run whose good requests average 1,000 in / 300 out tokens (10 good req/s, 10,000 and 3,000 good tok/s) while
    # all its completed requests average 1,100 in / 200 out (the mix the volume is sent in):
    #   3e9 tokens ÷ 1,300 tokens per request = 2,307,692.3 requests; input 2,307,692.3 × 1,100 = 2.53846e9 tokens,
    #   output × 200 = 4.61538e8 (by the good requests' mix: 3e9 × 1,000 ÷ 1,300 = 2.30769e9 and 6.92308e8).
    cap = Capacity(10.0, 10_000.0, 3_000.0, 13_200.0, 2_400.0, 0.5, "given", False, None, 12.0, 1_100.0, 200.0)
    v = resolve_volume(MonthlyVolume(tokens=3e9), cap)
    assert v.requests == pytest.approx(3e9 / 1300, rel=1e-12)
    assert v.input_tokens == pytest.approx(2.538461538e9, rel=1e-9)
    assert v.output_tokens == pytest.approx(4.615384615e8, rel=1e-9)
    assert "split 85% input / 15% output as in the run's requests (all its completed requests: mean 1,100 in / 200 " \
           "out tokens)" in v.how
    # a run that gives no token counts for all its requests: its good ones stand in, and the text says so
    v = resolve_volume(MonthlyVolume(tokens=3e9), Capacity(10.0, 10_000.0, 3_000.0, 0.0, 0.0, 0.5, "given", False))
    assert v.input_tokens == pytest.approx(3e9 * 1000 / 1300, rel=1e-12)
    assert "its good requests (no counts for all of them)" in v.how
