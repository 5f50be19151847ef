"""GuideLLM 0.5 with warmup and cooldown: only the requests GuideLLM's own metrics summarise are read.

The fixture (tests/fixtures/bench_public/guidellm_0_5_warmup_cooldown.json) is synthetic, in the layout of a public
GuideLLM 0.5.0.dev0 benchmarks.json (SOURCES.md there says which and why not a copy). Its 15 requests run back to back
(synchronous): request rk starts at T + 75 + 10·k s (T = 1772470000), its last token 9.5 s later, its request end
9.6 s later; r07 errored (ends 5 s after its start); r14 was cancelled when the run stopped (incomplete). The
measured window is start_time … end_time = T + 100 … T + 200 s (warmup 25 s before, cooldown 15 s after). Its
``metrics`` were computed by GuideLLM's rule (GenerativeRequestsAccumulator.get_within_range: request end ≥ start_time
and request start ≤ end_time), which keeps r02 … r12: 10 successful and 1 errored.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kvledger.evidence import AggregateRun, read_runs
from kvledger.ledgers.goodput import goodput
from kvledger.ledgers.slo import parse_slo
from kvledger.records import RunRecords

FIXTURE = Path(__file__).parents[1] / "fixtures" / "bench_public" / "guidellm_0_5_warmup_cooldown.json"


def _summary() -> dict:
    return json.loads(FIXTURE.read_text())["benchmarks"][0]["metrics"]


def test_warmup_and_cooldown_requests_are_left_out():
    (run,) = read_runs(FIXTURE)
    assert isinstance(run, RunRecords)
    # the file's own count: metrics.request_totals = {successful 10, errored 1, incomplete 0}
    totals = _summary()["request_totals"]
    ok = [r for r in run.records if r.ok]
    failed = [r for r in run.records if not r.ok]
    assert (len(ok), len(failed)) == (totals["successful"], totals["errored"]) == (10, 1)
    # r00 and r01 ended before start_time (warmup), r13 started after end_time (cooldown); r02 straddles the start
    # (starts T + 95, ends T + 104.6) and r12 the end (starts T + 195): GuideLLM keeps both
    ids = [r.request_id for r in run.records]
    assert ids == ["r02", "r03", "r04", "r05", "r06", "r08", "r09", "r10", "r11", "r12", "r07"]
    assert "sample_weights" not in run.metadata.extra


def test_ttft_and_tpot_means_reproduce_the_files_summary():
    (run,) = read_runs(FIXTURE)
    ok = [r for r in run.records if r.ok]
    m = _summary()
    # time_to_first_token_ms.successful.mean = (72 + 66 + 64 + 59 + 58 + 71 + 56 + 55 + 57 + 68) / 10 = 62.6 ms
    assert np.mean([r.ttft_s for r in ok]) * 1e3 == pytest.approx(m["time_to_first_token_ms"]["successful"]["mean"])
    assert m["time_to_first_token_ms"]["successful"]["mean"] == pytest.approx(62.6)
    # inter_token_latency_ms is summarised token-weighted (count Σ(output − 1) = 10 × 99 = 990); every request has 100
    # output tokens, so its mean is the plain mean of the per-request TPOTs kvledger computes from first/last token
    itl = m["inter_token_latency_ms"]["successful"]
    assert itl["count"] == 990
    assert np.mean([r.tpot_s for r in ok]) * 1e3 == pytest.approx(itl["mean"])


def test_a_requests_mean_itl_is_its_tpot():
    (run,) = read_runs(FIXTURE)
    doc = json.loads(FIXTURE.read_text())["benchmarks"][0]["requests"]["successful"]
    by_id = {r["request_id"]: r for r in doc}
    # GuideLLM inter_token_latency_ms = (last − first token)/(output − 1); r03: (9.5 − 0.066)/99 s = 95.29 ms
    r03 = next(r for r in run.records if r.request_id == "r03")
    assert r03.tpot_s * 1e3 == pytest.approx(by_id["r03"]["inter_token_latency_ms"])
    assert r03.tpot_s == pytest.approx((9.5 - 0.066) / 99)
    assert any("mean ITL as GuideLLM reports it" in d and "tpot" in d for d in run.metadata.definitions)


def test_incomplete_request_is_left_out_not_failed():
    (run,) = read_runs(FIXTURE)
    # r14 (cancelled at the end) is in no record; the one failure is r07's timeout
    assert all(r.request_id != "r14" for r in run.records)
    assert [r.error for r in run.records if not r.ok] == ["errored: Request timed out"]
    assert any(d.startswith("1 incomplete request(s)") and "not failures" in d for d in run.metadata.definitions)


def test_duration_is_the_span_of_the_kept_requests_and_rates_follow():
    (run,) = read_runs(FIXTURE)
    # the kept requests run past the 100 s window: from r02's start (T + 95) to r12's last token (T + 195 + 9.5)
    assert run.metadata.duration_s is None and run.duration_s == pytest.approx(109.5)
    g = goodput(run, parse_slo("ttft=70ms"))
    # 10 completed over 109.5 s; good: TTFT ≤ 70 ms leaves out r02 (72 ms) and r10 (71 ms) → 8
    assert g.num_completed == 10 and g.num_failed == 1 and g.num_good == 8
    assert g.throughput_req_per_s == pytest.approx(10 / 109.5)
    # the note gives GuideLLM's own figure: 9 completions inside the window (r12 ends after it) ÷ 100 s = 0.0900
    assert _summary()["requests_per_second"]["successful"]["mean"] == pytest.approx(0.09)
    assert any("9 ÷ 100.0 s = 0.0900 req/s" in d for d in run.metadata.definitions)


def test_without_a_window_every_kept_request_is_read(tmp_path):
    doc = json.loads(FIXTURE.read_text())
    b = doc["benchmarks"][0]
    del b["start_time"], b["end_time"]
    p = tmp_path / "no_window.json"
    p.write_text(json.dumps(doc))
    (run,) = read_runs(p)
    # 13 successful + 1 errored in the lists; r14 (incomplete) still left out; the stated duration (100 s) kept
    assert len(run.records) == 14 and run.metadata.duration_s == pytest.approx(100.0)


def test_sampled_lists_are_weighted_after_the_window(tmp_path):
    doc = json.loads(FIXTURE.read_text())
    succ = doc["benchmarks"][0]["requests"]["successful"]
    doc["benchmarks"][0]["requests"]["successful"] = [r for r in succ if r["request_id"] != "r05"]
    p = tmp_path / "sampled.json"
    p.write_text(json.dumps(doc))
    (run,) = read_runs(p)
    # request_totals: 10 successful in the window, 9 of them kept → each stands for 10/9; errored 1 of 1
    assert run.metadata.extra["sample_weights"] == pytest.approx({"ok": 10 / 9, "failed": 1.0})


def test_aggregate_only_counts_incomplete_as_no_failure(tmp_path):
    doc = json.loads(FIXTURE.read_text())
    b = doc["benchmarks"][0]
    b["requests"] = {"successful": [], "errored": [], "incomplete": []}
    b["metrics"]["request_totals"]["incomplete"] = 2
    p = tmp_path / "aggregate.json"
    p.write_text(json.dumps(doc))
    (agg,) = read_runs(p)
    assert isinstance(agg, AggregateRun)
    # num_failed = request_totals.errored (1); the 2 incomplete are named in the notes, not counted
    assert (agg.num_completed, agg.num_failed) == (10, 1)
    assert any("incomplete ones (cancelled when the run stopped: 2) left out" in d for d in agg.metadata.definitions)
