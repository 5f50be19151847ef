"""Predicted-vs-measured rows on two hand-made runs: every figure worked out by hand."""

from __future__ import annotations

import pytest

from kvledger.calibration.compare import compare_runs
from kvledger.ledgers.slo import parse_slo
from kvledger.records import RequestRecord, RunMetadata, RunRecords


def _run(rows):
    return RunRecords([RequestRecord(f"r{i}", a, 100, 11, first_token_s=f, finish_s=e) for i, (a, f,
        e) in enumerate(rows)],
                      RunMetadata("x", "x"))


def test_rows_by_hand():
    # measured: TTFT 0.1 and 0.3 s (mean 0.2), E2E 1.1 and 1.3 s, TPOT (E2E − TTFT)/10 = 0.1 s each; last finish 2.3 s
    # predicted: TTFT 0.1 and 0.2 s (mean 0.15: −25%), TPOT 0.1 and 0.12 s (mean 0.11: +10%), last finish 2.4 s
    measured = _run([(0.0, 0.1, 1.1), (1.0, 1.3, 2.3)])
    predicted = _run([(0.0, 0.1, 1.1), (1.0, 1.2, 2.4)])
    c = compare_runs("hand", measured, predicted, parse_slo("ttft=250ms"))
    assert c.row("TTFT mean").measured == pytest.approx(0.2) and c.row("TTFT mean").rel_error == pytest.approx(-0.25)
    assert c.row("TPOT mean").rel_error == pytest.approx(0.10)
    # throughput: 2 requests / 2.3 s measured, / 2.4 s predicted → 2.3/2.4 − 1 = −4.17%
    assert c.row("throughput").rel_error == pytest.approx(2.3 / 2.4 - 1)
    # TTFT ≤ 250 ms: one of two measured requests is good, both predicted ones: attainment 0.5 → 1.0 (+100%)
    assert c.row("SLO attainment").measured == 0.5 and c.row("SLO attainment").rel_error == pytest.approx(1.0)
    assert any("ITL" in n for n in c.notes)  # no per-token times: no ITL rows
    with pytest.raises(KeyError):
        c.row("ITL mean")


def _chunked(n_chunks):
    # one request of 21 output tokens, first token at 0.1 s, then n_chunks − 1 more chunks 0.05 s apart
    times = [0.1 + 0.05 * k for k in range(n_chunks)]
    return RunRecords([RequestRecord("r0", 0.0, 100, 21, first_token_s=0.1, finish_s=times[-1], chunk_times_s=times)],
                      RunMetadata("x", "x"))


def test_multi_token_chunks_are_not_compared_as_per_token_itl():
    from kvledger.calibration.compare import tokens_per_chunk

    # 21 tokens in 3 chunks: the 20 tokens after the first in 2 chunks, 10 a chunk (vLLM 0.5's multi-step scheduling
    # streams so: LambdaLabs' H100 file holds 12 gaps for 120 output tokens); a gap there is 10 tokens' time
    measured, per_token = _chunked(3), _chunked(21)
    assert tokens_per_chunk(measured) == 10.0 and tokens_per_chunk(per_token) == 1.0
    c = compare_runs("chunks", measured, per_token)
    assert any(n.startswith("ITL: the measured server streamed 10.0 output tokens per chunk") for n in c.notes)
    with pytest.raises(KeyError):
        c.row("ITL mean")
    # one token a chunk on both sides: ITL compared, 0.05 s a gap each (0 error)
    assert compare_runs("tokens", per_token, per_token).row("ITL mean").rel_error == pytest.approx(0.0)


def test_an_aggregate_stage_of_multi_token_chunks_has_no_itl_row():
    from kvledger.calibration.sweep import Stage, stage_comparison

    # LambdaLabs' vLLM 0.5.4 H100 file kept as aggregates: mean ITL 50.3 ms against mean TPOT 6.0 ms, 8.4 tokens a
    # chunk (≥ 1.25): its ITL is per chunk, so no ITL row; TPOT is compared
    stats = {"ttft": {"mean": 0.063}, "tpot": {"mean": 0.006}, "itl": {"mean": 0.0503}}
    stage = Stage("x", 10.0, 2, 0.2, {m: {"p50": None, "p90": None, "p99": None, **v} for m, v in stats.items()},
                  [(0.0, 100.0), (1.0, 100.0)], [(0.0, 21.0), (1.0, 21.0)], 10.0, 210.0, 0, 10.0)
    c = stage_comparison("agg", stage, _chunked(21))
    assert [r.metric for r in c.rows if r.metric.startswith("ITL")] == []
    assert c.row("TPOT mean").measured == 0.006
    assert any(n.startswith("ITL: the stage's mean gap between chunks is 8.4 × its mean TPOT") for n in c.notes)
