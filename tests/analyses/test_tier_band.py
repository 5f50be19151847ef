"""A capacity found with a KV tier in the simulator takes the band every simulated capacity takes
(``serving.tier_band``): TPOT's, carried through the tier's own probes, where TPOT binds it below saturation — for
``cost --simulate --kv-tier-host`` and a search's ``--offload`` variant alike (one function, one set of probes)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kvledger.analyses.serving import capacity_bands
from kvledger.analyses.serving.capacity_bands import CapacityBand
from kvledger.analyses.serving.tier_band import tier_capacity_band
from kvledger.ledgers.error_band import Band
from kvledger.ledgers.slo import parse_slo

_REGIME = "uncalibrated/dense/vllm"
_BANDS = {"tpot_mean": Band(_REGIME, "tpot_mean", 0.8, 1.25, 4, "tpot points"),
          "throughput": Band(_REGIME, "throughput", 0.9, 1.1, 4, "throughput points")}


def _run(rate: float, tpot_s: float, n: int = 10) -> SimpleNamespace:
    """A run of ``n`` requests of 11 output tokens, each with TPOT ``tpot_s`` (finish − first token = 10 × it)."""
    recs = [SimpleNamespace(arrival_s=0.0, first_token_s=0.1, finish_s=0.1 + 10 * tpot_s, num_output_tokens=11)
            for _ in range(n)]
    return SimpleNamespace(records=recs, metadata=SimpleNamespace(request_rate=rate))


class _Prober:
    """A tier prober's state after its search (``tier_probe.TierProber``): runs in the order run, their goodputs."""

    target = 0.9

    def __init__(self, rows: list[tuple[float, float, float, dict[str, int]]], hits: int = 100) -> None:
        self.runs, self.goodputs, self.sims, self.host_hit_tokens = {}, {}, {}, {}
        for rate, tpot_s, served, missed in rows:  # rate req/s, TPOT s, throughput req/s, missed requests by limit
            self.runs[rate] = _run(rate, tpot_s)
            self.sims[rate] = SimpleNamespace(run=self.runs[rate], setup="setup")
            self.goodputs[rate] = SimpleNamespace(throughput_req_per_s=served, num_missed=missed)
            self.host_hit_tokens[rate] = hits


@pytest.fixture
def bands(monkeypatch):
    monkeypatch.setattr(capacity_bands, "setup_regime", lambda setup: _REGIME)
    monkeypatch.setattr(capacity_bands, "setup_band", lambda setup, metric: _BANDS[metric])


# the tier's search from 2 req/s (the capacity without it): 2 met (p90 TPOT 10 ms), 4 met (20 ms, served 3.8 of 4:
# below saturation, its missing requests missed TPOT), 8 missed (served 5.6, the most any probe served)
_SEARCH = [(2.0, 0.010, 2.0, {}), (4.0, 0.020, 3.8, {"tpot": 1}), (8.0, 0.040, 5.6, {"tpot": 9, "ttft": 2})]
_SLO = parse_slo("ttft=500ms,tpot=25ms")


def test_a_tpot_bound_tier_capacity_takes_tpot_band_carried_through_the_tier_probes(bands):
    # x(k) = (r₁ + (q_C/k − q₁)(C − r₁)/(q_C − q₁)) / k with r₁ = 2, q₁ = 10 ms, C = 4, q_C = 20 ms: (C − r₁)/(q_C − q₁)
    # = 200 req/s per s. TPOT's high end k = 1.25: (2 + (16 − 10) ms × 200) / 1.25 = 3.2 / 1.25 = 2.56 req/s (the
    # band's low end); its low end k = 0.8: (2 + (25 − 10) ms × 200) / 0.8 = 5 / 0.8 = 6.25 req/s, under 5.6 / 0.8 = 7
    band = tier_capacity_band(_Prober(_SEARCH), 4.0, 4.0, _SLO)
    assert (band.value, band.low, band.high) == pytest.approx((4.0, 2.56, 6.25))
    assert band.source == "tpot points" and "TPOT binds there, below saturation" in band.text
    # not the throughput's around it, 4 × 0.9 – 4 × 1.1 = 3.6–4.4
    assert (band.low, band.high) != pytest.approx((3.6, 4.4))


def test_a_tier_capacity_capped_by_the_bound_or_past_saturation_keeps_the_throughput_band(bands):
    # sized on a bound of 3 req/s below the 4 found: the throughput band around the bound, 3 × 0.9 – 3 × 1.1
    capped = tier_capacity_band(_Prober(_SEARCH), 4.0, 3.0, _SLO)
    assert (capped.low, capped.high) == pytest.approx((2.7, 3.3))
    # the probe at 4 req/s served 3.5 (< 0.9 × 4 = 3.6): past saturation, 4 × 0.9 – 4 × 1.1
    past = [_SEARCH[0], (4.0, 0.020, 3.5, {"tpot": 1}), _SEARCH[2]]
    band = tier_capacity_band(_Prober(past), 4.0, 4.0, _SLO)
    assert (band.low, band.high) == pytest.approx((3.6, 4.4)) and band.source == "throughput points"


def test_a_tier_that_loaded_nothing_back_keeps_the_band_of_the_capacity_without_it(bands):
    # no probe loaded a block back: each run is the one without the tier, and cost prices the capacity without it
    # (4 req/s), so that capacity's own band stands (here 3–5 req/s, whatever the tier's probes would give)
    without = CapacityBand(4.0, 3.0, 5.0, _REGIME, "base's", "SLO capacity 4 req/s (80% band 3–5 req/s)")
    assert tier_capacity_band(_Prober(_SEARCH, hits=0), 4.0, 4.0, _SLO, without) is without
    # a tier that did load blocks back is banded on its own probes (2.56–6.25 req/s, the first test's)
    own = tier_capacity_band(_Prober(_SEARCH), 4.0, 4.0, _SLO, without)
    assert (own.low, own.high) == pytest.approx((2.56, 6.25))


def test_a_tpot_bound_disaggregated_unit_takes_tpot_band_of_its_decode_pool(monkeypatch):
    # the same probes as a disaggregated unit's search (1 req/s first there; here 2 as above, the rule reads the first
    # probe whatever it is): records and goodputs by rate, run in order 2, 4, 8. TPOT's band is asked at the decode
    # pool's TP (4), not the prefill pool's (2); the band is 2.56–6.25 req/s, the first test's, by the same formula
    from kvledger.analyses.search import regime_band
    from kvledger.analyses.search.disagg_band import disagg_band, disagg_view

    asked = []

    def band_of(spec, candidate, metric="throughput"):
        asked.append((candidate["tp"], metric))
        return _BANDS[metric]

    monkeypatch.setattr(regime_band, "search_band", band_of)
    p = _Prober(_SEARCH)
    runs = {r: (p.runs[r], p.goodputs[r]) for r in p.runs}
    cand = SimpleNamespace(gpu_id="nvidia_h100_sxm", tp=2, decode_tp=4)
    d = disagg_band(SimpleNamespace(), cand, _SLO, disagg_view(runs, [2.0, 4.0, 8.0], 4.0, 0.9))
    assert (d["value"], d["low"], d["high"]) == pytest.approx((4.0, 2.56, 6.25)) and asked == [(4, "tpot_mean")]
    assert "TPOT is the decode pool's (TP 4)" in d["text"]
    # past saturation at its capacity (served 3.5 of 4): no TPOT band; the throughput's around it, 4 × 0.9 – 4 × 1.1,
    # asked at the prefill pool's TP (2), as bands.entry_band gave it (before, None: no band printed with it)
    runs[4.0] = (p.runs[4.0], SimpleNamespace(throughput_req_per_s=3.5, num_missed={"tpot": 1}))
    asked.clear()
    d = disagg_band(SimpleNamespace(), cand, _SLO, disagg_view(runs, [2.0, 4.0, 8.0], 4.0, 0.9))
    assert (d["value"], d["low"], d["high"]) == pytest.approx((4.0, 3.6, 4.4)) and asked == [(2, "throughput")]
    assert d["source"] == "throughput points" and "TPOT does not bind it below saturation" in d["text"]


def test_a_ttft_bound_disaggregated_unit_takes_the_throughput_band_as_a_colocated_one(monkeypatch):
    # below saturation (served 3.8 of 4) but its missing requests missed TTFT: TTFT's band is not carried (the queue's
    # wait near a capacity), so the throughput's around the capacity, 4 × 0.9 – 4 × 1.1 = 3.6–4.4 req/s, printed by
    # search like a colocated capacity's (capacity_bands.throughput_band); before, none (error_band None)
    from kvledger.analyses.search import regime_band
    from kvledger.analyses.search.disagg_band import disagg_band, disagg_view

    monkeypatch.setattr(regime_band, "search_band", lambda spec, candidate, metric="throughput": _BANDS[metric])
    p = _Prober([_SEARCH[0], (4.0, 0.020, 3.8, {"ttft": 1}), _SEARCH[2]])
    runs = {r: (p.runs[r], p.goodputs[r]) for r in p.runs}
    cand = SimpleNamespace(gpu_id="nvidia_h100_sxm", tp=2, decode_tp=4)
    d = disagg_band(SimpleNamespace(), cand, _SLO, disagg_view(runs, [2.0, 4.0, 8.0], 4.0, 0.9))
    assert (d["value"], d["low"], d["high"]) == pytest.approx((4.0, 3.6, 4.4))
    assert d["text"] == ("SLO capacity 4 req/s (80% band 3.6–4.4 req/s, uncalibrated roofline; the saturation "
                         "throughput's band around the unit's capacity (TPOT does not bind it below saturation))")
