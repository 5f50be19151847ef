"""The fell-behind rule's drain allowance (``ledgers/fell_behind.py``): a short open-loop run whose requests take long
to finish is not called behind its load for the E2E of its last requests; one whose queue grew still is."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from kvledger.evidence import read_run
from kvledger.ledgers.capacity_basis import check_load
from kvledger.ledgers.fell_behind import fell_behind, typical_e2e_s
from kvledger.ledgers.goodput import goodput
from kvledger.ledgers.slo import parse_slo
from kvledger.records import RequestRecord, RunRecords

ROOT = Path(__file__).resolve().parents[2]
QWEN32B = ROOT / "benchmarks" / "data" / "public-runs" / "llmservingsim-rtxpro6000-qwen3-32b" / "vllm" / \
    "requests.jsonl"
QWEN30B_A3B = Path("/work/shared/data/measured-runs/llmservingsim/bench/examples/RTXPRO6000/"
                   "Qwen3-30B-A3B-Instruct-2507/vllm/requests.jsonl")
LOOSE = parse_slo("ttft=1000s,tpot=10s")  # every request good: the over-load rule stays out of the way


def _at_10_req_s(path: Path) -> RunRecords:
    """An LLMServingSim run with the rate its SOURCES.md states (Poisson 10 req/s), which meta.json does not carry."""
    run = read_run(path)
    return RunRecords(run.records, dataclasses.replace(run.metadata, request_rate=10.0))


def test_the_drain_allowance_is_the_rate_a_kept_up_server_completes():
    # 100 requests offered at 10 req/s arrive over 10 s; with a 5 s typical E2E a server keeping up completes
    # 100 ÷ (10 + 5) = 6.667 req/s. Served 6.5 req/s: 6.5 × 15 ÷ 100 = 97.5% of it, kept up (the plain share, 65%,
    # would have failed); served 5.5: 82.5%, fell behind.
    assert fell_behind(10.0, 6.5, num_requests=100, drain_s=5.0) is None
    got = fell_behind(10.0, 5.5, num_requests=100, drain_s=5.0)
    assert got["value"] == pytest.approx(0.825)
    assert "82.5% of the 6.667 req/s a server keeping up completes: 100 requests over 10 s of arrivals, then a " \
           "typical E2E of 5 s, below 90%" in got["text"]
    # no drain known (aggregates): the plain share, 6.5 ÷ 10 = 65%
    assert fell_behind(10.0, 6.5)["value"] == pytest.approx(0.65)


def test_the_typical_e2e_is_the_first_quarters_median_not_a_grown_queues():
    # 8 requests 1 s apart whose E2E grows 1, 2, … 8 s: the first quarter (2 requests) has median 1.5 s; the whole
    # run's median (4.5 s) would carry the queue's growth into the allowance
    recs = [RequestRecord(str(i), float(i), 100, 10, i + 0.5, i + 1.0 + i) for i in range(8)]
    assert typical_e2e_s(recs) == pytest.approx(1.5)


def test_a_short_run_of_long_requests_at_the_pace_offered_is_not_called_behind():
    if not QWEN30B_A3B.exists():
        pytest.skip("the shared LLMServingSim Qwen3-30B-A3B run is not on this machine")
    # Qwen3-30B-A3B on two RTX PRO 6000, vLLM 0.19.0: 300 requests at 10 req/s, last finish 64.017 s after the first
    # arrival: 4.686 req/s served, 46.9% of 10 — the old rule called it behind. Its first quarter's median E2E is
    # 36.58 s (median TTFT 0.11 s there, 3.9 s in the last quarter: no backlog to speak of), so a server keeping up
    # completes 300 ÷ (30 + 36.58) = 4.506 req/s, and 4.686 ÷ 4.506 = 104% of it.
    run = _at_10_req_s(QWEN30B_A3B)
    gp = goodput(run, LOOSE)
    assert gp.throughput_req_per_s == pytest.approx(300 / 64.017, rel=1e-3)
    assert typical_e2e_s(run.records) == pytest.approx(36.58, abs=0.01)
    load = check_load(run, gp, LOOSE)
    # the under-load rule's kept-pace check takes the same allowance: 104% kept pace, and every request was good
    # with SLO limits far above its p90s, so the run is under-loaded, not behind
    assert load.status == "under_loaded"
    assert "(104.0% of the 4.506 req/s a server keeping up completes: 300 requests over 30 s" in load.reason


def test_a_short_run_whose_queue_grew_is_still_behind():
    # Qwen3-32B TP 2 on two RTX PRO 6000, vLLM 0.19.0, the same 300 requests at 10 req/s: last finish 159.65 s after
    # the first arrival (1.879 req/s), first quarter's median E2E 69.30 s (its median TTFT grew 3.65 → 82.0 s from the
    # first to the last quarter): 1.879 × (30 + 69.30) ÷ 300 = 62.2% of what a server keeping up completes
    run = _at_10_req_s(QWEN32B)
    load = check_load(run, goodput(run, LOOSE), LOOSE)
    assert load.status == "fell_behind"
    assert load.checks[0]["value"] == pytest.approx(0.622, abs=1e-3)
    assert "a typical E2E of 69.3 s" in load.reason
