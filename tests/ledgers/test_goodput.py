"""Exact goodput: hand-checked on the real AIPerf and llmperf runs (requests named by id), DistServe's 10 → 3 example,
and edge cases."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from kvledger.errors import InputError
from kvledger.evidence import read_run, read_runs
from kvledger.ledgers.goodput import goodput
from kvledger.ledgers.slo import parse_slo
from kvledger.records import RequestRecord, RunMetadata, RunRecords

DATA = Path(__file__).resolve().parents[1] / "evidence" / "data"


@pytest.fixture(scope="module")
def aiperf():
    return read_run(DATA / "aiperf/run1_profile_export.jsonl")


def test_aiperf_ttft_and_tpot_by_request_id(aiperf):
    # The 10 completed requests with TTFT ≤ 900 ms (file line: id, TTFT ms, TPOT = (E2E − TTFT)/(OSL − 1) ms):
    #   15 b96e4209 464.66 34.861 ✗   17 0947cc39 597.56 33.566 ✗   18 e5b2c057 597.09 33.578 ✗
    #   19 4634090c 597.51 33.566 ✗   20 419ecf0c 730.15 33.120 ✓   21 e3425765 729.85 33.121 ✓
    #   22 2752bc20 727.90 33.135 ✓   23 1abfcb16 861.68 32.666 ✓   24 d99bfcc6 861.45 32.668 ✓
    #   25 02bc0c13 863.23 33.484 ✗   (TPOT ≤ 33.2 ms)
    g = goodput(aiperf, parse_slo("ttft=900ms,tpot=33.2ms"))
    assert [i[:8] for i in g.good_request_ids()] == ["419ecf0c", "e3425765", "2752bc20", "1abfcb16", "d99bfcc6"]
    # all 100 requests (11 cancelled), 5 good: attainment 5/100 (errors in the denominator, as AIPerf's fraction)
    assert (g.num_requests, g.num_failed, g.num_completed, g.num_good) == (100, 11, 89, 5)
    assert g.attainment == 0.05 and g.attainment_of_completed == pytest.approx(5 / 89)
    # duration 9.317788951 s (AIPerf benchmark_duration): goodput 5/9.3178 = 0.53661 req/s, throughput 89/9.3178
    assert g.goodput_req_per_s == pytest.approx(5 / 9.317788951) and g.throughput_req_per_s == pytest.approx(
        9.551622221540914
    )
    assert g.effective_cost_multiplier == pytest.approx(89 / 5)  # 17.8×
    # 79 completed requests miss TTFT; 5 of the remaining 10 miss TPOT
    assert g.num_missed == {"ttft": 79, "tpot": 5}
    # good output tokens: 247 × 5 = 1235 tokens in 9.3178 s
    assert g.goodput_output_tok_per_s == pytest.approx(1235 / 9.317788951)


def test_aiperf_itl_max_gap(aiperf):
    # same TTFT filter; largest gap ≤ 150 ms fails only lines 15 (160.56 ms) and 25 (164.30 ms) → 8 good
    g = goodput(aiperf, parse_slo("ttft=900ms,itl=150ms"))
    assert g.num_good == 8 and g.num_missed["itl"] == 28
    assert "b96e4209-a4b9-4428-b339-4472a9db45b4" not in g.good_request_ids()


def test_llmperf_anyscale_by_index():
    run = read_run(DATA / "llmperf/leaderboard_individual_anyscale_70b.json")
    # TTFT ≤ 183 ms: 99 (175.0), 82 (177.1), 100 (178.8), 66 (179.5), 131 (180.8), 7 (182.1), 64 (182.1), 143 (182.7)
    # their TPOT (e2e − ttft)/150 ms: 13.91, 19.33, 17.19, 14.97, 11.14 ✓, 11.92 ✓, 12.06 ✓, 12.48 ✓ (≤ 12.5)
    g = goodput(run, parse_slo("ttft=183ms,tpot=12.5ms"))
    assert g.good_request_ids() == ["7", "64", "131", "143"]
    # llmperf's own inter_token_latency_s would have failed 143 (13.10 ms): the recomputed TPOT is used
    assert g.goodput_req_per_s == pytest.approx(4 / (150 / 84.73327721639254 * 60))
    assert g.effective_cost_multiplier == pytest.approx(150 / 4)


def test_llmperf_bedrock_errors_are_never_good():
    run = read_run(DATA / "llmperf/leaderboard_individual_bedrock_70b.json")
    # TTFT ≤ 300 ms: 135 (285.7 ms, TPOT 44.03 ms ✗), 115 (293.6 ms, TPOT 43.31 ms but error −100), 95 ✓, 106 ✓
    g = goodput(run, parse_slo("ttft=300ms,tpot=44ms"))
    assert g.good_request_ids() == ["95", "106"]
    assert (g.num_requests, g.num_failed) == (150, 49)


def _records(ttfts, *, error_at=(), n_out=2) -> RunRecords:
    recs = []
    for i, t in enumerate(ttfts):
        err = "failed" if i in error_at else None
        recs.append(RequestRecord(str(i), float(i) * 0.1, 10, n_out, None if err else float(i) * 0.1 + t,
                                  None if err else float(i) * 0.1 + t + 0.5, error=err))
    return RunRecords(recs, RunMetadata("synthetic", "test", duration_s=10.0))


def test_distserve_ten_served_three_good():
    # DistServe blog Fig. 1: 10 req/s served, 3 req/s within the SLO → goodput 3 req/s, effective cost 3.3×.
    # 100 requests in 10 s; 30 have TTFT 0.1 s (≤ 200 ms), 70 have 0.4 s.
    run = _records([0.1] * 30 + [0.4] * 70)
    g = goodput(run, parse_slo("ttft=200ms"))
    assert (g.throughput_req_per_s, g.goodput_req_per_s) == pytest.approx((10.0, 3.0))
    assert g.effective_cost_multiplier == pytest.approx(10 / 3)  # 3.33×
    assert g.attainment == pytest.approx(0.3)


def test_equal_to_the_slo_is_good_and_failures_never_are():
    # 0.25 and 0.125 are exact in binary: TTFT exactly at the threshold passes (≤, as vLLM and AIPerf)
    run = _records([0.25, 0.25 + 1e-9, 0.125], error_at=(2,))
    g = goodput(run, parse_slo("ttft=250ms"))
    assert g.good_request_ids() == ["0"]
    assert (g.num_requests, g.num_failed, g.attainment) == (3, 1, pytest.approx(1 / 3))


def test_itl_statistics_by_hand():
    md = RunMetadata("synthetic", "test", duration_s=1.0)
    # binary-exact times so the comparisons at the threshold are exact
    recs = [RequestRecord("a", 0.0, 1, 5, 0.125, 0.625, [0.125, 0.1875, 0.25, 0.5, 0.625]),  # gaps 1/16 1/16 1/4 1/8
            # one chunk: no gap to violate
            RequestRecord("b", 0.0, 1, 1, 0.125, 0.125, [0.125]),
            RequestRecord("c", 0.0, 1, 3, 0.125, 0.375, None)]                             # no chunk times
    run = RunRecords(recs, md)
    # a: max gap 0.25 > 0.2 ✗; mean 0.5/4 = 0.125 ≤ 0.125 ✓; median of (1/16, 1/16, 1/8, 1/4) = 3/32 = 0.09375 ≤ 0.09375
    # ✓
    assert goodput(run, parse_slo("itl=200ms")).good_request_ids() == ["b"]
    assert goodput(run, parse_slo("itl_mean=125ms")).good_request_ids() == ["a", "b"]
    assert goodput(run, parse_slo("itl_p50=93.75ms")).good_request_ids() == ["a", "b"]
    g = goodput(run, parse_slo("itl_p50=93.74ms"))
    assert g.good_request_ids() == ["b"]
    assert any("1 completed requests have no itl value" in n for n in g.notes)  # c: unknown → not good


def test_itl_slo_without_any_chunk_times_is_explained():
    run = read_run(DATA / "llmperf/leaderboard_individual_anyscale_70b.json")
    with pytest.raises(InputError, match="ITL SLO needs per-chunk times.*use tpot"):
        goodput(run, parse_slo("itl=50ms"))


def test_negative_latency_in_records_is_refused():
    recs = [RequestRecord("x", 1.0, 1, 2, 0.5, 2.0)]  # first token before arrival
    with pytest.raises(InputError, match="request 'x' has a negative TTFT"):
        goodput(RunRecords(recs, RunMetadata("sim", "simulator")), parse_slo("ttft=1s"))


def test_unknown_duration_gives_attainment_but_no_rates(tmp_path):
    p = tmp_path / "a_individual_responses.json"
    shutil.copy(DATA / "llmperf/leaderboard_individual_anyscale_70b.json", p)
    g = goodput(read_run(p), parse_slo("ttft=183ms,tpot=12.5ms"))
    assert g.num_good == 4 and g.goodput_req_per_s is None and g.throughput_req_per_s is None
    assert g.effective_cost_multiplier == pytest.approx(37.5)  # a ratio of counts needs no duration


def test_sampled_guidellm_counts_are_scaled_and_flagged(tmp_path):
    import json

    def req(i, s):
        timings = {"request_start": s, "first_token_iteration": s + 0.1, "last_token_iteration": s + 0.5}
        return {"request_id": f"q{i}", "info": {"timings": timings}, "prompt_tokens": 10, "output_tokens": 5}

    bench = {"type_": "generative_benchmark", "config": {"strategy": {"type_": "constant", "rate": 2.0}},
             "duration": 4.0,
             "metrics": {"request_totals": {"successful": 8, "errored": 0, "incomplete": 0}},
             "requests": {"successful": [req(0, 10.0), req(1, 11.0)], "errored": [], "incomplete": []}}
    p = tmp_path / "b.json"
    p.write_text(json.dumps({"metadata": {"version": 2}, "benchmarks": [bench]}))
    (run,) = read_runs(p)
    g = goodput(run, parse_slo("ttft=200ms"))
    # 2 kept of 8 successful → each stands for 4: 8 good over 4 s = 2 req/s, flagged as an estimate
    assert g.estimate and g.num_good == 8 and g.goodput_req_per_s == pytest.approx(2.0)


def test_no_slo_constraints_means_throughput():
    from kvledger.ledgers.slo import SLO

    g = goodput(_records([0.1, 0.9]), SLO())
    assert g.num_good == 2 and g.effective_cost_multiplier == 1.0
    assert any("no SLO given" in n for n in g.notes)


def test_good_mask_is_a_boolean_array(aiperf):
    g = goodput(aiperf, parse_slo("ttft=900ms,tpot=33.2ms"))
    assert g.good_mask.dtype == np.bool_ and int(g.good_mask.sum()) == 5
    assert "good_mask" not in g.to_dict()


def test_vllm_detailed_at_the_limit_counts_as_vllm_request_goodput(tmp_path):
    # A vllm bench serve --save-detailed file run with --goodput ttft:300 tpot:50 e2el:800. vLLM's calculate_metrics
    # judges the file's own numbers, successful requests only: ttft 0.3 ≤ 0.3; TPOT (latency − ttft)/(output − 1) =
    # (0.8 − 0.3)/10 = 0.05 ≤ 0.05; e2el 0.8 ≤ 0.8; a 1-token output has TPOT 0 (ttft 0.2, latency 0.2). So the 8
    # at-the-limit requests and the 1-token one are good, the failed one is not: 9 good in 10 s, request_goodput 0.9.
    # kvledger rebuilds the latencies from send times 0.1i + 0.03i² s (not binary-exact): (a + 0.3) − a comes back
    # 5.6e-17 s over 0.3 for i = 2..6, so the plain ≤ counted 4 good, not 9; ≤ is now judged within 4 ulp of the
    # request's times (clock_slack_s), so every at-the-limit one passes as in vLLM.
    n = 10
    starts = [1000.0 + 0.1 * i + 0.03 * i * i for i in range(n)]
    out = [11] * 8 + [1, 0]
    doc = {"backend": "vllm", "model_id": "m", "num_prompts": n, "request_rate": 1.0, "duration": 10.0,
           "completed": 9, "failed": 1, "request_throughput": 0.9, "request_goodput": 0.9,
           "input_lens": [10] * n, "output_lens": out, "ttfts": [0.3] * 8 + [0.2, 0.0],
           "itls": [[0.05] * 10] * 8 + [[], []], "latencies": [0.8] * 8 + [0.2, 0.0], "start_times": starts,
           "errors": [""] * 9 + ["HTTP 500"]}
    path = tmp_path / "vllm_goodput.json"
    path.write_text(json.dumps(doc))
    g = goodput(read_run(path), parse_slo("ttft=300ms,tpot=50ms,e2e=800ms"))
    assert g.num_good == 9 == round(doc["request_goodput"] * doc["duration"])
    assert g.goodput_req_per_s == pytest.approx(0.9)
    assert g.good_request_ids() == [str(i) for i in range(9)]
