"""The under-load rule behind the cost ledger's capacity basis, on hand-built runs and the real inference-perf rate
sweep."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvledger.evidence import read_run
from kvledger.ledgers.capacity_basis import check_load, measured_basis
from kvledger.ledgers.goodput import goodput
from kvledger.ledgers.slo import parse_slo
from kvledger.records import RequestRecord, RunMetadata, RunRecords

DATA = Path(__file__).resolve().parents[1] / "evidence" / "data"
SLO = parse_slo("ttft=200ms,tpot=50ms")


def steady_run(ttft_s: float, *, rate: float | None = 1.0, concurrency: int | None = None, n: int = 100) -> RunRecords:
    """n requests one second apart, each TTFT ``ttft_s`` and E2E 1 s with 100 output tokens: last finish at n s.

    Goodput = n ÷ (last finish − first arrival) = 100 ÷ 100 s = 1 req/s; TPOT = (1 − ttft) ÷ 99.
    """
    recs = [RequestRecord(str(i), float(i), 500, 100, i + ttft_s, i + 1.0) for i in range(n)]
    return RunRecords(recs, RunMetadata("hand", "test", request_rate=rate, concurrency=concurrency))


def test_a_run_that_kept_pace_with_slack_everywhere_is_under_loaded():
    run = steady_run(0.05)
    load = check_load(run, goodput(run, SLO), SLO)
    # goodput 1 req/s of the 100 ÷ (100 + 1) = 0.990 req/s a server keeping up completes (100 requests over 100 s,
    # then a 1 s E2E: fell_behind.kept_up_rate), 101% ≥ 90%; TTFT p90 50 ms = 25% of 200 ms; TPOT p90 0.95/99 =
    # 9.6 ms = 19% of 50 ms
    assert load.status == "under_loaded"
    assert [c["value"] for c in load.checks] == pytest.approx([1.01, 0.25, 0.95 / 99 / 0.05])
    assert load.reason.startswith("offered 1 req/s, served 1 good req/s (101.0% of the 0.9901 req/s a server keeping "
                                  "up completes: 100 requests over 100 s of arrivals, then a typical E2E of 1 s); "
                                  "TTFT p90 50.00 ms = 25% of its 200.00 ms")
    basis = measured_basis(goodput(run, SLO), load)
    assert basis.kind == "measured_run" and "UNDER-LOADED" in basis.warning
    assert "kvledger goodput FILES… --target 0.9" in basis.warning
    # its JSON: no search notes and no sweep (left out while None), the load check written by LoadCheck
    assert list(basis.to_dict()) == ["kind", "text", "warning", "load_check"]
    assert basis.to_dict()["load_check"]["status"] == "under_loaded"


def test_ttft_near_its_limit_means_the_slo_binds_and_the_run_is_not_flagged():
    run = steady_run(0.15)  # TTFT p90 150 ms = 75% of 200 ms > 50%
    load = check_load(run, goodput(run, SLO), SLO)
    assert load.status == "not_flagged"
    assert load.reason == "TTFT p90 150.00 ms = 75% of its 200.00 ms limit (above 50%: the SLO is close to binding)"
    assert measured_basis(goodput(run, SLO), load).warning is None


def test_what_the_run_does_not_state_cannot_be_judged():
    run = steady_run(0.05, rate=None)
    load = check_load(run, goodput(run, SLO), SLO)
    assert (load.status, load.reason) == ("cannot_tell", "the file states neither its request rate nor its concurrency")
    burst = steady_run(0.05, rate=float("inf"))
    assert check_load(burst, goodput(burst, SLO), SLO).status == "not_flagged"  # all at t = 0 saturates the server


def test_closed_loop_uses_attainment():
    # 4 users; requests 0..9 have TTFT 300 ms (miss), the other 90 meet: attainment 90% < 95% → the SLO binds
    recs = [RequestRecord(str(i), float(i), 500, 100, i + (0.3 if i < 10 else 0.05), i + 1.0) for i in range(100)]
    run = RunRecords(recs, RunMetadata("hand", "test", concurrency=4))
    load = check_load(run, goodput(run, SLO), SLO)
    assert load.status == "not_flagged" and load.reason.startswith("4 concurrent users, 90.0% of requests good (below "
                                                                   "95%")
    # the SLO rejected 10%: it binds, so no "more clients may fit" is added
    assert "more clients may fit" not in load.reason
    # every request good (TTFT 150 ms, TPOT (1.0 − 0.15)/99 = 8.6 ms), TTFT p90 75% of its 200 ms limit (close to
    # binding): a closed loop of 4 clients whose requests all meet the SLO — its throughput is what they drew, said
    recs = [RequestRecord(str(i), float(i), 500, 100, i + 0.15, i + 1.0) for i in range(100)]
    slack = check_load(RunRecords(recs, RunMetadata("hand", "test", concurrency=4)),
                       goodput(RunRecords(recs, RunMetadata("hand", "test", concurrency=4)), SLO), SLO)
    assert slack.status == "not_flagged" and slack.reason.endswith(
        "; but a closed loop of 4 clients: its throughput is what they drew (clients ÷ mean latency), not necessarily "
        "what the deployment can serve — more clients may fit within the SLO (a concurrency sweep, or `cost "
        "--simulate`, finds the capacity)")


def test_a_zero_rate_with_clients_is_judged_and_named_as_the_same_closed_loop():
    # request_rate 0 is "not rate-limited" (evidence/read.py turns a file's 0 into None; a RunRecords built in code
    # keeps it): not an open loop, so the pace check is the closed loop's (4 clients, 100 of 100 good = 100% ≥ 95%).
    # TTFT p90 150 ms = 75% of 200 ms fails the slack test, and the verdict names the closed loop as it does with no
    # rate — the words had tested "a finite rate" without "above 0" and left them out here.
    run = steady_run(0.15, rate=0.0, concurrency=4)
    load = check_load(run, goodput(run, SLO), SLO)
    assert load.checks[0]["check"] == "SLO rejected almost nothing (closed loop)" and load.checks[0]["value"] == 1.0
    assert load.status == "not_flagged" and load.reason == (
        "TTFT p90 150.00 ms = 75% of its 200.00 ms limit (above 50%: the SLO is close to binding); but a closed loop "
        "of 4 clients: its throughput is what they drew (clients ÷ mean latency), not necessarily what the deployment "
        "can serve — more clients may fit within the SLO (a concurrency sweep, or `cost --simulate`, finds the "
        "capacity)")
    # an open loop (rate 1 req/s, served 1 good req/s) with the same cap of 4 clients gets no such words
    run = steady_run(0.15, rate=1.0, concurrency=4)
    assert check_load(run, goodput(run, SLO), SLO).reason == (
        "TTFT p90 150.00 ms = 75% of its 200.00 ms limit (above 50%: the SLO is close to binding)")

def test_no_ttft_slo_says_queueing_was_not_judged():
    run, slo = steady_run(0.05), parse_slo("tpot=50ms")
    load = check_load(run, goodput(run, slo), slo)
    assert load.status == "under_loaded" and "no TTFT SLO: queueing was not judged" in load.reason


@pytest.mark.parametrize("stage, status", [(0, "under_loaded"), (1, "under_loaded"), (2, "under_loaded"),
                                           (3, "not_flagged"), (4, "over_loaded")])
def test_the_real_inference_perf_rate_sweep(stage, status):
    # vLLM on one H100 (kubecon-na-2025 batch-size sweep): stages offered 1, 38, 75, 112, 149 req/s; throughput
    # saturates at ~113 req/s (stages 4–6). Under ttft=500ms,tpot=50ms the rule flags stages 0–2 (goodput ≈ offered,
    # TTFT p90 39/38/49 ms ≤ 250 ms) and not stage 3 (TTFT p90 300 ms = 60%: near capacity); stage 4 fell behind and
    # is over-loaded (≤ 1.0% good, TTFT p90 2.36 s = 4.7× the limit ≥ 2×)
    run = read_run(DATA / f"inference-perf/stage_{stage}_lifecycle_metrics.json")
    slo = parse_slo("ttft=500ms,tpot=50ms")
    assert check_load(run, goodput(run, slo), slo).status == status


def test_aggregates_use_the_smallest_stated_percentile_at_or_above_p90():
    # InferenceX (vLLM client) states only p50 and p99: p99 TTFT 0.585 s stands in for p90 (an upper bound)
    run = read_run(DATA / "inferencex/inferencex_glm5_fp8_vllm_tp8_isl1024_osl128_conc4.json")
    slo = parse_slo("ttft=2s,tpot=100ms")
    load = check_load(run, goodput(run, slo), slo)
    ttft = next(c for c in load.checks if c["check"] == "ttft slack")
    assert ttft["value"] == pytest.approx(0.5848183088190854 / 2.0)
    # and the text names the statistic it is (it said "TTFT p90 584.82 ms" of the file's p99)
    assert ttft["text"].startswith("TTFT p99 (the file's smallest percentile ≥ p90, standing in for p90) 584.82 ms = "
                                   "29% of its 2.000 s limit")


@pytest.mark.parametrize("stage, share", [(4, 0.758), (5, 0.615), (6, 0.510)])
def test_a_stage_whose_server_fell_behind_its_offered_rate_is_flagged(stage, share):
    # the same kubecon batch-size sweep under a loose SLO (ttft=10s,tpot=1s: every request good, so the over-load
    # rule does not apply): stage 4 was sent 148.9 req/s and completed 112.855 per s (8,933 requests), stage 5
    # 185.86 and 114.314 (11,151), stage 6 222.83 and 113.66 (13,369): 112.855 / 148.9 = 0.758, 114.314 / 185.86 =
    # 0.615, 113.66 / 222.83 = 0.510, each below 0.9; stage 3 (111.9 sent, 110.76 completed, 99 %) kept up
    slo = parse_slo("ttft=10s,tpot=1s")
    run = read_run(DATA / f"inference-perf/stage_{stage}_lifecycle_metrics.json")
    load = check_load(run, goodput(run, slo), slo)
    assert load.status == "fell_behind" and load.checks[0]["value"] == pytest.approx(share, abs=5e-4)
    assert "below 90%): the server fell behind its load" in load.reason
    run3 = read_run(DATA / "inference-perf/stage_3_lifecycle_metrics.json")
    assert check_load(run3, goodput(run3, slo), slo).status != "fell_behind"
