"""At a volume the self-hosted cost of one good request is one figure: the month's bill ÷ the volume's good requests.
The answer's secondary line states it, and ``inputs.self_host_usd_per_request`` (what --json carries) is the same
number, not the per-token ledgers × the capacity run's mean tokens per good request (which part from it in the 4th
digit once the ledgers are priced on a run at the volume's load, whose good requests are not the capacity run's)."""

from __future__ import annotations

import pytest

from kvledger.catalog.api_match import find_api_price
from kvledger.ledgers.api_cost import ApiMix
from kvledger.ledgers.cost import GpuRate, SelfHostSetup
from kvledger.ledgers.cost_summary import DecisionFactors, DecisionInputs, MonthlyVolume, build_cost_report
from kvledger.ledgers.goodput import goodput
from kvledger.ledgers.load_share import LoadShare
from kvledger.ledgers.self_host_only import build_self_host_report
from kvledger.ledgers.slo import parse_slo
from kvledger.records import RequestRecord, RunMetadata, RunRecords

PEOPLE = dict(engineer_months_per_month=0.25, engineer_usd_per_month=20_000.0)  # $5,000 a month
REQUESTS = 1e7
# 10⁷ requests a month = 10⁷ ÷ (730 × 3600) = 3.8052 req/s; the run's goodput 3 req/s (below) sizes
# ⌈3.8052 ÷ (3 × 0.8)⌉ = 2 replicas, each at 1.9026 req/s
RATE_PER_REPLICA = REQUESTS / (730 * 3600) / 2
# a run at that load: 50 of 100 requests within the SLO, its good ones 800 in / 80 out tokens (the capacity run's
# good requests are 1000 / 100: the two runs' good requests differ, as a simulated volume's do)
LOAD = LoadShare(RATE_PER_REPLICA, 0, 100, 50, 50 * 800.0, 50 * 80.0, 100 * 1000.0, 100 * 100.0)
# the bill: 2 replicas × 730 h × $2/GPU-h + $5,000 people = $7,920; good requests 10⁷ × 50/100 = 5 × 10⁶;
# per good request $7,920 ÷ 5 × 10⁶ = $0.001584. The per-token ledgers × the capacity run's 1000 / 100 tokens per
# good request gave $7,920 ÷ (10⁷ × 400 / 1000) = $0.00198 instead (the ledgers count 50 × 800 ÷ 100 = 400 good
# input tokens per offered request: the bill's 20% prefill share over 10⁷ × 400, × 1000, and likewise for output)
PER_GOOD_REQUEST_USD = 7_920.0 / 5e6


def _run() -> RunRecords:
    """100 requests in 10 s, 1000 in / 100 out tokens each, 30 with TTFT ≤ 200 ms: goodput 3 req/s on 1 GPU."""
    recs = [RequestRecord(str(i), i * 0.1, 1000, 100, i * 0.1 + (0.1 if i < 30 else 0.4),
                          i * 0.1 + 1.0) for i in range(100)]
    return RunRecords(recs, RunMetadata("per-request", "test", duration_s=10.0, num_gpus=1))


def _setup() -> SelfHostSetup:
    return SelfHostSetup(GpuRate.given(2.0, "H100"), 1, None, prefill_share=0.2, **PEOPLE)


def test_cost_json_per_request_is_the_secondary_line_s_figure():
    run = _run()
    rep = build_cost_report(run, goodput(run, parse_slo("ttft=200ms")), _setup(), find_api_price("OpenAI:gpt-4.1"),
                            ApiMix(), DecisionFactors(), MonthlyVolume(requests=REQUESTS), load=LOAD)
    assert rep.decision.replicas == 2 and rep.decision.self_host_usd == pytest.approx(7_920.0)
    assert rep.inputs["self_host_usd_per_request"] == pytest.approx(PER_GOOD_REQUEST_USD, rel=1e-12)
    assert f"a good request costs ${PER_GOOD_REQUEST_USD:.6f} self-hosted (" in rep.secondary  # $0.001584


def test_self_host_only_json_per_request_is_the_month_s_per_good_request():
    run = _run()
    rep = build_self_host_report(run, goodput(run, parse_slo("ttft=200ms")), _setup(),
                                 MonthlyVolume(requests=REQUESTS), inputs=DecisionInputs(), load=LOAD)
    m = rep.month.to_dict()
    assert m["good_requests"] == pytest.approx(5e6) and m["self_host_usd_per_month"] == pytest.approx(7_920.0)
    assert m["usd_per_1k_good_requests"] == pytest.approx(PER_GOOD_REQUEST_USD * 1e3, rel=1e-12)  # $1.584 per 1k
    assert rep.inputs["self_host_usd_per_request"] == pytest.approx(PER_GOOD_REQUEST_USD, rel=1e-12)
