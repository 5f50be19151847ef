"""The error band of a prediction: multipliers from the stored leave-one-deployment-out errors, the borrowed band of a
regime without runs, and the flip test of a decision."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest

from kvledger.ledgers.error_band import Band, error_band, flips_inside, regime_of


def _stored(regime: str, metric: str) -> dict:
    path = Path(str(resources.files("kvledger.ledgers") / "data" / "error_bands.json"))
    return json.loads(path.read_text())["regimes"][regime][metric]


def test_band_multipliers_from_the_stored_errors():
    # errors e = predicted/measured − 1, so measured = predicted/(1 + e): q90 bounds the measured value from below
    e = _stored("uncalibrated/dense/vllm", "throughput")
    b = error_band("uncalibrated/dense/vllm", "throughput")
    assert b.low == pytest.approx(1 / (1 + e["q90"])) and b.high == pytest.approx(1 / (1 + e["q10"]))
    assert b.num_runs == e["num_runs"] and "leave-one-deployment-out" in b.source
    lo, hi = b.around(20.0)
    assert lo == pytest.approx(20.0 / (1 + e["q90"])) and hi == pytest.approx(20.0 / (1 + e["q10"]))


def test_a_regime_without_runs_borrows_and_says_so():
    # no MoE run is replayable (the only one is DP2+EP): the uncalibrated MoE band is the dense one, named a floor
    b = error_band(regime_of("uncalibrated", is_moe=True), "ttft_mean")
    dense = error_band("uncalibrated/dense/vllm", "ttft_mean")
    assert (b.low, b.high) == (dense.low, dense.high) and "floor" in b.source
    # an uncalibrated regime never borrows a (narrower) calibrated band
    assert regime_of("something else") == "uncalibrated/dense/vllm"


def test_a_decision_flips_inside_the_band():
    # band ×0.8 … ×1.1: width ratio 1.1/0.8 = 1.375. Costs 10 vs 13 (ratio 1.3) can swap; 10 vs 14 (1.4) cannot.
    band = Band("uncalibrated/dense/vllm", "throughput", 0.8, 1.1, 10, "test")
    assert flips_inside(10.0, 13.0, band) and not flips_inside(10.0, 14.0, band)
    assert flips_inside(10.0, 14.0, None)  # no band: nothing settles the decision


def test_a_borrowed_band_names_the_regime_it_was_lent_from():
    # error_bands.json holds two regimes, uncalibrated/dense/vllm and gpu/dense/vllm. Their own bands are lent by no
    # one; an uncalibrated MoE regime borrows only from uncalibrated regimes (the dense one), a model-calibrated or a
    # GPU-calibrated SGLang regime from the nearest calibrated one with runs, gpu/dense/vllm (_nearest ranks scope
    # "gpu" before "uncalibrated" after the regime's own scope)
    assert error_band("uncalibrated/dense/vllm", "ttft_mean").lent_from is None
    assert error_band("gpu/dense/vllm", "throughput").lent_from is None
    assert error_band("uncalibrated/moe/vllm", "ttft_mean").lent_from == "uncalibrated/dense/vllm"
    assert error_band("model/dense/vllm", "tpot_mean").lent_from == "gpu/dense/vllm"
    assert error_band("gpu/dense/sglang", "throughput").lent_from == "gpu/dense/vllm"
    # the source sentence still names it, as before the field existed
    src = error_band("model/dense/vllm", "tpot_mean").source
    assert "band of gpu/dense/vllm, its width a floor for the error there" in src


def test_moe_bands_are_measured_on_moe_deployments():
    # the MoE regime's own bands (benchmarks/public_moe_rows.py): published MoE serving figures nobody fitted, replayed
    # uncalibrated, beside the one measured MoE run (DeepSeek-V3.2-Exp-16L64E, saturated, +20.6%). Mean TPOT: 7 values
    # of 3 deployments (Qwen3-30B-A3B on an A100 at concurrency 1, −17.8 … −21.0%; gpt-oss-120b on H100 at TP 1 and 2,
    # +5.4%, −5.0%); saturation throughput: 10 values of 4 deployments (gpt-oss-20b +39.9 … +45.9% as a stock 0.11.0's
    # Marlin experts, gpt-oss-120b +22.5 … +28.0%, Qwen3-235B-A22B −7.67 … +16.8%, DeepSeek +20.6%; the lodo rerun of
    # stop 66, validate_all.py --sections lodo).
    # Below nine deployments the band is the t prediction
    # interval of ln(1 + e) with each deployment weighted once, never inside the smallest … largest error, so both
    # bands hold every value: an MoE figure prints a band as wide as what was measured, not the dense one borrowed
    from kvledger.ledgers.error_band import stored_bands

    reg = stored_bands()["regimes"]["uncalibrated/moe/vllm"]
    tpot, thr = reg["tpot_mean"], reg["throughput"]
    assert (tpot["num_runs"], tpot["num_deployments"], thr["num_runs"], thr["num_deployments"]) == (7, 3, 10, 4)
    assert tpot["q10"] <= -0.210 and tpot["q90"] >= 0.054 and thr["q10"] <= -0.0767 and thr["q90"] >= 0.459
    assert tpot["method"].startswith("t prediction interval") and thr["method"].startswith("t prediction interval")
    b = error_band("uncalibrated/moe/vllm", "throughput")
    assert b.lent_from is None and b.errors() == pytest.approx((thr["q10"], thr["q90"]))
    dense = error_band("uncalibrated/dense/vllm", "tpot_mean")
    assert error_band("uncalibrated/moe/vllm", "tpot_mean").errors()[0] < dense.errors()[0]  # wider than borrowed


def test_a_setting_no_measured_run_had_is_named_once_as_a_floor():
    b = Band("uncalibrated/moe/vllm", "throughput", 0.58, 1.02, 10, "leave-one-deployment-out errors")
    dp = b.beyond("data parallelism")
    # the multipliers stay (no run measured the error under DP to widen them); the source says it is a floor
    assert (dp.low, dp.high) == (0.58, 1.02)
    assert dp.source == ("leave-one-deployment-out errors; measured on runs without data parallelism (none with it)"
                         ": its width a floor for the error there, not a measurement")
    # a source that already calls the band a floor (another GPU, a borrowed regime) is not told twice
    said = dp.beyond("a TP group across nodes").source
    assert said.count("a floor for the error there") == 1
    assert said.endswith("without a TP group across nodes (none with it)")
    assert b.beyond(None) is b


def test_the_step_costs_that_need_it():
    from types import SimpleNamespace

    from kvledger.analyses.serving.prediction_bands import unmeasured_setting

    assert unmeasured_setting(SimpleNamespace(dp=8, allreduce_span=None)) == "data parallelism"
    assert unmeasured_setting(SimpleNamespace(allreduce_span=object())) == "a TP group across nodes"
    assert unmeasured_setting(SimpleNamespace(allreduce_span=None)) is None and unmeasured_setting(None) is None
