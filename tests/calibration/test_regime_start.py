"""The regime-by-regime start of the model-scope fit, on two hand-made runs."""

from __future__ import annotations

import pytest

from kvledger.accounting.fitted_cost import LinearStepCost
from kvledger.calibration.regime_start import regime_start
from kvledger.calibration.replay import MeasuredRun
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.records import RequestRecord, RunMetadata, RunRecords

PROJ = LinearStepCost(0.02, 3e-4, 1e-8, 2e-4, 5e-7)


def _run(label: str, rows: list[tuple[float, int, float, float]]) -> MeasuredRun:
    """rows: (arrival, prompt, TTFT, decode seconds), 11 output tokens each (10 decode tokens)."""
    recs = [RequestRecord(f"{label}{i}", a, p, 11, first_token_s=a + t, finish_s=a + t + d)
            for i, (a, p, t, d) in enumerate(rows)]
    specs = [RequestSpec(r.request_id, r.arrival_s, r.num_prompt_tokens, 11) for r in recs]
    return MeasuredRun(label, label, specs, RunRecords(recs, RunMetadata("x", "x")))


def test_start_by_hand():
    # run A (least loaded: mean TTFT 0.105 s): arrivals 0, 10, …, 90 s, prompts 100 … 1000, TTFT = 0.05 + 1e-4·prompt
    # (0.06 … 0.15 s): the prefill slope is 1e-4 s per token. Each decodes 10 tokens in 1 s: TPOT 10/100 = 0.1 s, mean
    # decoding requests 10 s / (91.15 − 0) s (last finish 90 + 0.15 + 1).
    a = _run("a", [(10.0 * i, 100 * (i + 1), 0.05 + 1e-4 * 100 * (i + 1), 1.0) for i in range(10)])
    # run B: ten 500-token prompts at 0 s, TTFT 1 s, 2 s of decoding each: TPOT 20/100 = 0.2 s, 20 s / 3 s decoding
    b = _run("b", [(0.0, 500, 1.0, 2.0)] * 10)
    s = regime_start([a, b], PROJ)
    assert s.prefill_token_s == pytest.approx(1e-4, rel=1e-9)
    # decode slope through the two points (10/91.15, 0.1) and (20/3, 0.2)
    assert s.decode_seq_s == pytest.approx(0.1 / (20 / 3 - 10 / 91.15), rel=1e-9)
    assert (s.prefill_pair_s, s.decode_kv_token_s, s.fixed_s) == (0.0, 0.0, 0.02)


def test_no_start_from_one_run():
    a = _run("a", [(10.0 * i, 100 * (i + 1), 0.05 + 1e-4 * 100 * (i + 1), 1.0) for i in range(10)])
    assert regime_start([a], PROJ) is None
