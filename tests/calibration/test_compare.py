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
