"""Bounded goodput from percentiles: hand-checked bounds, the exact count inside them on the same AIPerf run, and what
cannot be bounded."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from kvledger.errors import FormatError
from kvledger.evidence import read_run, read_runs
from kvledger.evidence.aggregate import MetricSummary
from kvledger.ledgers.estimate import metric_bounds
from kvledger.ledgers.goodput import goodput
from kvledger.ledgers.slo import parse_slo

DATA = Path(__file__).resolve().parents[1] / "evidence" / "data"


def test_percentile_rule_by_hand():
    # 40 requests, p99 = 0.58 s: k = ⌊0.99 × 39⌋ = 38, so x₍₃₈₎ ≤ p99 → at least 39 requests ≤ 0.6 s
    m = MetricSummary("ttft", "request", {50.0: 0.26, 99.0: 0.58}, count=40)
    assert metric_bounds(m, 0.6, 40)[:2] == (39, 40)
    # threshold between median and p99: at least ⌊0.5 × 39⌋ + 1 = 20, at most ⌈0.99 × 39⌉ = 39
    assert metric_bounds(m, 0.3, 40)[:2] == (20, 39)
    # below the median: at most ⌈0.5 × 39⌉ = 20
    assert metric_bounds(m, 0.2, 40)[:2] == (0, 20)


def test_pooled_gap_distribution_bounds_only_through_min_and_max():
    m = MetricSummary("itl", "gap", {50.0: 0.02, 99.0: 0.1}, min_s=0.005, max_s=0.16)
    assert metric_bounds(m, 0.15, 89)[:2] == (0, 89)   # p99 of pooled gaps says nothing per request
    assert metric_bounds(m, 0.17, 89)[:2] == (89, 89)  # every gap ≤ max ≤ SLO
    assert metric_bounds(m, 0.004, 89)[:2] == (0, 0)   # every gap ≥ min > SLO


def test_inferencex_conc4_bounds():
    agg = read_run(DATA / "inferencex/inferencex_glm5_fp8_vllm_tp8_isl1024_osl128_conc4.json")
    g = goodput(agg, parse_slo("ttft=600ms,tpot=30ms"))
    # ttft p99 0.5848 s ≤ 0.6 s → ≥ 39 of 40; tpot p99 0.02645 s ≤ 0.03 s → ≥ 39 of 40
    # joint (Fréchet): ≥ 40 − 1 − 1 = 38; ≤ min(40, 40) = 40
    assert g.estimate and (g.num_good, g.num_good_upper) == (38, 40)
    assert (g.attainment, g.attainment_upper) == (0.95, 1.0)
    # goodput lower bound 38 ÷ 31.08160568587482 s; throughput 40 ÷ same
    assert g.goodput_req_per_s == pytest.approx(38 / 31.08160568587482)
    assert g.effective_cost_multiplier == pytest.approx(40 / 38)  # an upper bound on the multiplier


def test_exact_count_lies_within_the_bounds_of_the_same_run():
    # The same AIPerf run exported twice: per request (jsonl) and as percentiles (aggregate JSON, numpy 'linear').
    exact = read_run(DATA / "aiperf/run1_profile_export.jsonl")
    agg = read_run(DATA / "aiperf/run1_profile_export_aiperf.json")
    checked = 0
    for ttft, tpot, e2e in itertools.product(("500ms", "1s", "2s", "3.8s", "5s"), ("23ms", "28ms", "33ms", "40ms"),
                                             (None, "9s", "9.25s")):
        slo = parse_slo(f"ttft={ttft},tpot={tpot}" + (f",e2e={e2e}" if e2e else ""))
        n_exact = goodput(exact, slo).num_good
        est = goodput(agg, slo)
        assert est.num_good <= n_exact <= est.num_good_upper, (slo.describe(), est.num_good, n_exact,
                                                               est.num_good_upper)
        checked += 1
    assert checked == 60
    # one case by hand: TTFT ≤ 600 ms → the file's min 464.66 ms gives ≥ 1, p5 728.68 ms gives ≤ ⌈0.05 × 88⌉ = 5;
    # the per-request file shows 4 (464.66, 597.09, 597.51, 597.56 ms)
    est = goodput(agg, parse_slo("ttft=600ms"))
    assert (est.num_good, goodput(exact, parse_slo("ttft=600ms")).num_good, est.num_good_upper) == (1, 4, 5)


def test_llmperf_summary_cannot_bound_tpot():
    agg = read_run(DATA / "llmperf/leaderboard_summary_anyscale_70b.json")
    # TPOT has no statistics (inter_token_latency_s is not TPOT): nothing bounds it (0 … 150 of 150), so the SLO is
    # refused as one on a missing field is, naming what the file can judge (its TTFT and E2E summaries)
    with pytest.raises(FormatError, match=r"missing TPOT statistics: the SLO's tpot cannot be judged on this file "
                                          r"\(it states summaries of ttft, e2e\); the SLO keys it can judge: "
                                          r"ttft, e2e"):
        goodput(agg, parse_slo("ttft=600ms,tpot=30ms"))


def test_guidellm_token_weighted_tpot_uses_only_min_and_max():
    first = read_runs(DATA / "guidellm/llmd_fixture_guidellm_report_v2_mockserver.json")[0]
    # inter_token_latency_ms successful: min 1.046 ms, max 1.256 ms, count 14 for 2 requests
    assert (goodput(first, parse_slo("tpot=1.3ms")).num_good, goodput(first,
                                                                      parse_slo("tpot=1.3ms")).num_good_upper) == (2, 2)
    g = goodput(first, parse_slo("tpot=1.2ms"))
    assert (g.num_good, g.num_good_upper) == (0, 2)


def test_failures_enter_the_denominator_of_estimates():
    agg = read_run(DATA / "llmperf/leaderboard_summary_bedrock_70b.json")
    g = goodput(agg, parse_slo("ttft=10s"))
    # every completed TTFT ≤ max ≤ 10 s → 101 good of 150 requests (49 errors)
    assert (g.num_good, g.num_requests) == (101, 150) and g.attainment == pytest.approx(101 / 150)


def test_no_per_request_data_is_explained_not_hidden():
    from kvledger.errors import InputError

    agg = read_run(DATA / "inferencex/inferencex_glm5_fp8_vllm_tp8_isl1024_osl128_conc4.json")
    g = goodput(agg, parse_slo("ttft=600ms"))
    assert any("no per-request arrays (run without --save-detailed)" in n for n in g.notes)
    assert any("estimate from percentiles only (no per-request data)" in n for n in g.notes)
    with pytest.raises(InputError, match="individual requests are unknown"):
        g.good_request_ids()


def test_aggregate_without_any_request_count_points_to_the_per_request_export(tmp_path):
    import json

    from kvledger.errors import FormatError

    # constructed GenAI-Perf aggregate export whose metrics carry no counts
    p = tmp_path / "profile_export_genai_perf.json"
    p.write_text(json.dumps({"time_to_first_token": {"unit": "ms", "avg": 120.0, "p99": 300.0},
                             "request_throughput": {"unit": "requests/sec", "avg": 4.0}}))
    with pytest.raises(FormatError, match="neither per-request data nor a completed-request count.*GenAI-Perf "
                                          "profile_export.json"):
        goodput(read_run(p), parse_slo("ttft=200ms"))


def _mean_gap_run(chunk_gaps: int):
    from kvledger.evidence.aggregate import AggregateRun
    from kvledger.records import RunMetadata

    # 40 requests of 101 output tokens: 40 × 100 = 4,000 token gaps; TPOT per request p50 20 ms, p99 30 ms; the pooled
    # chunk gaps only their min 5 ms and max 200 ms
    return AggregateRun(RunMetadata("x", "aiperf-json"), num_completed=40, num_failed=0, duration_s=10.0,
                        total_input_tokens=4000, total_output_tokens=40 * 101,
                        metrics={"tpot": MetricSummary("tpot", "request", {50.0: 0.02, 99.0: 0.03}, count=40),
                                 "itl": MetricSummary("itl", "gap", {50.0: 0.02}, count=chunk_gaps, min_s=0.005,
                                                      max_s=0.2)})


def test_a_mean_gap_slo_is_bounded_by_the_per_request_tpot_too():
    # a request's mean gap between chunks, (last − first)/(chunks − 1), is at least its TPOT, (last − first)/(output −
    # 1), when every chunk carries a token; equal when each carries one. itl_mean ≤ 25 ms: the pooled gaps (5 … 200 ms)
    # decide nothing, 0 … 40; the TPOT's p50 20 ms ≤ 25 gives ≥ ⌊0.5 × 39⌋ + 1 = 20, its p99 30 ms > 25 gives
    # ≤ ⌈0.99 × 39⌉ = 39
    slo = parse_slo("itl_mean=25ms")
    exact = goodput(_mean_gap_run(4000), slo)  # 4,000 chunk gaps = 4,000 token gaps: one token a chunk
    assert (exact.num_good, exact.num_good_upper) == (20, 39)
    fewer = goodput(_mean_gap_run(3990), slo)  # some chunks carried several tokens: the TPOT bounds from above only
    assert (fewer.num_good, fewer.num_good_upper) == (0, 39)
    more = goodput(_mean_gap_run(4010), slo)  # more chunk gaps than token gaps: some chunk carried none, no TPOT bound
    assert (more.num_good, more.num_good_upper) == (0, 40)
    assert any("bounds it neither way (4,010 chunk gaps against 4,000 token gaps" in n for n in more.notes)


def test_the_mean_gap_bounds_hold_on_a_real_run():
    # AIPerf's run1 exported twice: 21,537 chunk gaps against 21,535 token gaps (89 requests, Σ(output − 1)) — two more
    # chunks than tokens, so the TPOT gives no bound and the pooled gaps' min/max stand; the exact per-request count
    # of the same run lies inside at every threshold
    exact = read_run(DATA / "aiperf/run1_profile_export.jsonl")
    agg = read_run(DATA / "aiperf/run1_profile_export_aiperf.json")
    for ms in (15, 20, 23, 25, 28, 30, 33, 40, 60):
        slo = parse_slo(f"itl_mean={ms}ms")
        n_exact, est = goodput(exact, slo).num_good, goodput(agg, slo)
        assert est.num_good <= n_exact <= est.num_good_upper, (ms, est.num_good, n_exact, est.num_good_upper)
    est = goodput(agg, parse_slo("itl_mean=28ms"))
    assert (est.num_good, est.num_good_upper) == metric_bounds(agg.metrics["itl"], 0.028, 89)[:2] == (0, 89)
    assert any("21,537 chunk gaps against 21,535 token gaps: some chunks may carry no token" in n for n in est.notes)
