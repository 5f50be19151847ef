"""The cost ledger's load check reads an inference-perf stage's TPOT as goodput does: (E2E − TTFT)/(output − 1), not
the file's time_per_output_token (which is below what the GPU can do; ledgers/tpot_derived.py), with goodput's note."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from kvledger.evidence import read_run
from kvledger.ledgers.capacity_basis import check_load, measured_basis
from kvledger.ledgers.goodput import goodput
from kvledger.ledgers.slo import parse_slo
from kvledger.ledgers.tpot_derived import derived_tpot_percentile, tpot_derivation

STAGES = Path(__file__).resolve().parents[1] / "evidence" / "data" / "inference-perf"


def _stage(i: int):
    return read_run(STAGES / f"stage_{i}_lifecycle_metrics.json")


def test_the_derived_p90_upper_bound_by_hand():
    # stage 0: n = 60 requests, 64 output tokens each (config.yaml, ignore_eos), so TPOT = (E2E − TTFT)/63.
    # p90 lies between order statistics 54 and 55 (h = 0.9 × 59 = 53.1, k = 53): it is ≤ x once 55 requests surely
    # have TPOT ≤ x. Split at TTFT p5 = 27.357 ms (at most ⌊0.05 × 59⌋ + 1 = 3 TTFTs below it) with E2E p99 =
    # 493.350 ms (⌊0.99 × 59⌋ + 1 = 59 E2Es at or below it): 59 − 3 = 56 ≥ 55 requests have E2E − TTFT ≤
    # 493.350 − 27.357 ms, so p90 ≤ (0.493350 − 0.027357)/63 = 7.3967 ms, the smallest such bound over the splits.
    run = _stage(0)
    lo, hi = derived_tpot_percentile(run, tpot_derivation(run), 90.0, 60)
    e2e_p99, ttft_p5 = run.metrics["e2e"].percentiles_s[99.0], run.metrics["ttft"].percentiles_s[5.0]
    assert hi == pytest.approx((e2e_p99 - ttft_p5) / 63, rel=1e-12) and hi == pytest.approx(7.3967e-3, abs=1e-7)
    assert 7.0e-3 < lo < hi  # the file's own TPOT p90 (3.51 ms) lies far below both bounds
    assert run.metrics["tpot"].percentiles_s[90.0] < lo / 2


@pytest.mark.parametrize("stage", range(7))
def test_the_load_check_agrees_with_goodput_on_a_tpot_slo(stage):
    # goodput bounds how many requests have (E2E − TTFT)/63 ≤ 10 ms; the load check's p90 bounds come from the same
    # counts: p90 > 10 ms for sure exactly when at most k = ⌊0.9 (n − 1)⌋ can meet it, p90 ≤ 10 ms exactly when at
    # least k + 2 (k + 1 if 0.9 (n − 1) is whole) surely do
    run, slo = _stage(stage), parse_slo("tpot=10ms")
    gp, n = goodput(run, slo), run.num_completed
    lo, hi = derived_tpot_percentile(run, tpot_derivation(run), 90.0, n)
    h = 0.9 * (n - 1)
    k = math.floor(h)
    assert (lo > 0.010) == (gp.num_good_upper <= k)
    assert (hi is not None and hi <= 0.010) == (gp.num_good >= min(n, k + 1 if h == k else k + 2))


def test_stage_0_is_no_longer_called_under_loaded_on_the_files_tpot():
    # before: TPOT p90 3.51 ms (the file's field) = 35% of 10 ms ≤ 50%, so "under-loaded"; goodput judges
    # (E2E − TTFT)/63 instead, whose p90 is at most 7.40 ms (above) = 74% of the limit: close to binding
    run, slo = _stage(0), parse_slo("tpot=10ms")
    load = check_load(run, goodput(run, slo), slo)
    assert load.status == "not_flagged"
    assert load.reason.startswith("TPOT p90 (E2E − TTFT)/(output − 1) at most 7.40 ms = 74% of its 10.00 ms limit")
    basis = measured_basis(goodput(run, slo), load)
    assert basis.warning is None and len(basis.notes) == 1
    assert basis.notes[0].startswith("TPOT judged as (E2E − TTFT)/(output − 1), output from config.yaml")
    # the same note goodput gives for its TPOT bound
    assert any(basis.notes[0] in n for n in goodput(run, slo).notes)


def test_stage_3_is_over_loaded_on_the_derived_tpot():
    # stage 3 (112 req/s): goodput finds 1 of 6,715 requests within TPOT 10 ms (0.01% < 90%); the derived p90 is at
    # least 24.96 ms = 2.5× the limit (≥ 2×): over-loaded. The file's TPOT p90, 12.91 ms = 1.3×, said not flagged.
    run, slo = _stage(3), parse_slo("tpot=10ms")
    load = check_load(run, goodput(run, slo), slo)
    assert load.status == "over_loaded"
    assert "TPOT p90 (E2E − TTFT)/(output − 1) at least 24.96 ms = 2.5× its 10.00 ms limit" in load.reason


def test_a_file_with_a_trusted_tpot_has_no_note():
    # InferenceX states its own TPOT percentiles and no tpot_from_e2e: read as before, nothing added
    run = read_run(STAGES.parent / "inferencex/inferencex_glm5_fp8_vllm_tp8_isl1024_osl128_conc4.json")
    slo = parse_slo("ttft=2s,tpot=100ms")
    assert tpot_derivation(run) is None and check_load(run, goodput(run, slo), slo).notes is None
