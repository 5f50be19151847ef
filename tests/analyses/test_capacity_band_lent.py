"""The capacity band a decision prices with says when it is borrowed from another regime (Band.lent_from), from the
band's declared field rather than from words in its source."""

from types import SimpleNamespace

import pytest

from kvledger.analyses.serving import decision_inputs, prediction_bands
from kvledger.ledgers.error_band import Band


def _band(lent_from):
    # measured/simulated capacity ×0.80–×1.10 on 80% of 12 runs: sides 1 − 0.80 = 0.20 and 1.10 − 1 = 0.10
    return Band("gpu/moe/sglang", "throughput", 0.80, 1.10, 12, "leave-one-deployment-out errors", lent_from)


def test_a_lent_band_names_the_regime_it_came_from(monkeypatch):
    monkeypatch.setattr(prediction_bands, "setup_band", lambda setup, metric: _band("gpu/dense/vllm"))
    frac, src, sides = decision_inputs._measured_band(SimpleNamespace(setup=object()))
    assert frac == pytest.approx(0.2) and sides == pytest.approx((0.2, 0.1))
    assert src.endswith("12 runs left out one deployment at a time; borrowed from gpu/dense/vllm, the nearest "
                        "regime with runs: a floor")


def test_an_own_band_says_nothing_of_borrowing_even_if_its_source_mentions_a_floor(monkeypatch):
    own = _band(None)
    monkeypatch.setattr(prediction_bands, "setup_band",
                        lambda setup, metric: Band(own.regime, own.metric, own.low, own.high, own.num_runs,
                                                   "errors at 12 points; floor of the fit", None))
    _, src, _ = decision_inputs._measured_band(SimpleNamespace(setup=object()))
    assert "borrowed" not in src
