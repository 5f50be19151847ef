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
    assert "band of gpu/dense/vllm, which is a floor" in error_band("model/dense/vllm", "tpot_mean").source


def test_one_measured_moe_point_widens_the_nearest_band_to_take_it_in():
    # the leave-one-deployment-out table holds one MoE run (DeepSeek-V3.2-Exp-16L64E on an RTX PRO 6000, saturated,
    # throughput +25.0% uncalibrated, its routed experts priced by the fused-MoE kernel term): no interval of its own,
    # so an MoE throughput figure takes the dense vLLM band
    # [q10, q90] widened to [min(q10, p), max(q90, p)] over n + 1 points — and an SGLang MoE figure (no run of its own)
    # takes the same point; the dense band itself is untouched
    from kvledger.ledgers.error_band import ONE_POINT, stored_bands

    reg = stored_bands()["regimes"]
    dense, point = reg["uncalibrated/dense/vllm"]["throughput"], reg["uncalibrated/moe/vllm"]["throughput"]
    assert point["method"] == ONE_POINT and point["num_runs"] == 1
    assert point["q10"] == point["q90"] == pytest.approx(0.250, abs=0.001)
    for regime in ("uncalibrated/moe/vllm", "uncalibrated/moe/sglang"):
        b = error_band(regime, "throughput")
        assert b.errors() == pytest.approx((min(dense["q10"], point["q10"]), max(dense["q90"], point["q10"])))
        assert b.num_runs == dense["num_runs"] + 1 and f"uncalibrated/moe/vllm {point['q10']:+.1%}" in b.source
    d = error_band("uncalibrated/dense/vllm", "throughput")
    assert d.errors() == pytest.approx((dense["q10"], dense["q90"])) and d.lent_from is None
