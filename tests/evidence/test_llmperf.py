"""llmperf: the leaderboard's individual responses and summaries (Anyscale and Bedrock, Llama-2-70B)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kvledger.errors import FormatError
from kvledger.evidence import read_run

DATA = Path(__file__).parent / "data" / "llmperf"


def test_anyscale_records_units_and_summary_duration():
    run = read_run(DATA / "leaderboard_individual_anyscale_70b.json")
    assert len(run.records) == 150 and all(r.ok for r in run.records)
    # summary: results_num_completed_requests 150, results_num_completed_requests_per_min 84.73327721639254
    # → duration = 150 / 84.73327721639254 × 60 = 106.2156… s (llmperf divides both by end − start)
    assert run.metadata.duration_s == pytest.approx(150 / 84.73327721639254 * 60, rel=1e-12)
    # cross-check: Σ output tokens 22042 ÷ results_mean_output_throughput_token_per_s 207.52121071152493 = same window
    assert sum(r.num_output_tokens for r in run.records) / 207.52121071152493 == pytest.approx(run.metadata.duration_s,
        rel=1e-9)
    assert (run.metadata.model, run.metadata.concurrency) == ("meta-llama/Llama-2-70b-chat-hf", 5)
    assert run.metadata.extra["shared_clock"] is False


def test_tpot_trap_inter_token_latency_is_not_tpot():
    run = read_run(DATA / "leaderboard_individual_anyscale_70b.json")
    rec = run.records[143]
    # record 143: ttft_s 0.18272414300002993, end_to_end_latency_s 2.054311885000004, 151 output tokens
    # canonical TPOT = (2.054311885000004 − 0.18272414300002993) / 150 = 0.012477251613… s
    assert rec.tpot_s == pytest.approx((2.054311885000004 - 0.18272414300002993) / 150, rel=1e-12)
    # llmperf's own inter_token_latency_s for it is 0.01309651192715048 (TTFT folded in): 5 % higher
    assert rec.tpot_s < 0.01309651192715048
    assert rec.chunk_times_s is None  # llmperf stores no per-chunk times


def test_bedrock_error_records_fail_even_with_good_latencies():
    run = read_run(DATA / "leaderboard_individual_bedrock_70b.json")
    failed = [r for r in run.records if not r.ok]
    assert len(failed) == 49  # summary: results_number_errors 49, error code −100
    rec = run.records[115]  # ttft 0.2936 s, 85 tokens, error_code −100 "Output too few tokens 85"
    assert rec.error == "error_code -100: Output too few tokens 85" and rec.first_token_s is None


def test_without_summary_the_duration_is_unknown(tmp_path):
    p = tmp_path / "llama_550_150_individual_responses.json"
    shutil.copy(DATA / "leaderboard_individual_anyscale_70b.json", p)
    run = read_run(p)
    assert run.metadata.duration_s is None and run.metadata.model is None
    assert any("no sibling *_summary.json" in d for d in run.metadata.definitions)


def test_llmperf_naming_convention_finds_the_summary(tmp_path):
    # llmperf writes {model}_{in}_{out}_individual_responses.json next to {model}_{in}_{out}_summary.json
    shutil.copy(DATA / "leaderboard_individual_anyscale_70b.json", tmp_path / "m_550_150_individual_responses.json")
    shutil.copy(DATA / "leaderboard_summary_anyscale_70b.json", tmp_path / "m_550_150_summary.json")
    assert read_run(tmp_path / "m_550_150_individual_responses.json").metadata.concurrency == 5


def test_summary_aggregates():
    agg = read_run(DATA / "leaderboard_summary_bedrock_70b.json")
    # results_num_completed_requests 101, results_number_errors 49, started 150
    assert (agg.num_completed, agg.num_failed, agg.num_requests) == (101, 49, 150)
    ttft = agg.metrics["ttft"]
    assert set(ttft.percentiles_s) == {25.0, 50.0, 75.0, 90.0, 95.0, 99.0}
    assert "tpot" not in agg.metrics  # inter_token_latency_s is not TPOT, so it is not offered as one


def test_negative_latency_and_inverted_e2e(tmp_path):
    rows = json.loads((DATA / "leaderboard_individual_anyscale_70b.json").read_text())[:3]
    rows[1]["ttft_s"] = -0.2
    p = tmp_path / "x_individual_responses.json"
    p.write_text(json.dumps(rows))
    with pytest.raises(FormatError, match=r"\[1\]\.ttft_s: negative latency"):
        read_run(p)
    rows[1]["ttft_s"] = 9.0  # later than its end_to_end_latency_s
    p.write_text(json.dumps(rows))
    with pytest.raises(FormatError, match=r"\[1\]\.end_to_end_latency_s: .*shorter than ttft_s"):
        read_run(p)
