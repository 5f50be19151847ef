"""The ranking's "may flip inside the band" statement follows from each candidate's own capacity band: a cost per good
request scales as 1/k with the capacity, so the winner's worst (its cost ÷ its band's low end) against the
runner-up's best (its cost ÷ its band's high end) says whether they can swap."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from kvledger.analyses.search.bands import band_notes
from kvledger.analyses.search.frontier import ranking_margin
from kvledger.analyses.search.order import first_cost


def _entry(cid: str, usd_per_1k: float, cap: float, low: float, high: float) -> dict:
    band = {"value": cap, "low": low, "high": high, "regime": "uncalibrated/dense/vllm", "source": "test",
            "text": "", "elsewhere": ""}
    return {"id": cid, "gpu_id": "nvidia_h100_sxm", "cost": {"usd_per_1k_requests": usd_per_1k},
            "capacity": {"slo_capacity_req_per_s": cap, "goodput_req_per_s": cap * 0.9, "error_band": band}}


def _note(a: dict, b: dict) -> str:
    (note,) = band_notes(None, [a, b], first_cost)
    return note


def test_overlapping_bands_may_flip():
    # winner $1.00 per 1k, capacity 10 req/s, band 7.5–11.2 (×0.75–×1.12): at worst $1.00 / 0.75 = $1.3333.
    # runner-up $1.10, capacity 20, band 18–21 (×0.90–×1.05): at best $1.10 / 1.05 = $1.0476 < $1.3333: may flip
    a, b = _entry("a", 1.00, 10.0, 7.5, 11.2), _entry("b", 1.10, 20.0, 18.0, 21.0)
    note = _note(a, b)
    assert "the ranking may flip inside the bands" in note and "stays ahead" not in note
    assert (a["capacity_band"]["low_multiplier"], b["capacity_band"]["high_multiplier"]) == (0.75, 1.05)
    m = ranking_margin([a, b], "roofline")
    assert m.could_flip and (m.gap, m.band_low, m.band_high) == pytest.approx((0.10, 0.75, 1.12))


def test_bands_apart_do_not_flip():
    # runner-up $1.40, capacity 20, band 19–20 (×0.95–×1.00): at best $1.40 / 1.00 = $1.40 > the winner's worst
    # $1.3333: the order holds across both bands. (The winner's band alone, ratio 1.40 < 1.12 / 0.75 = 1.493, would
    # have said it may flip: the runner-up's own band is narrower.)
    a, b = _entry("a", 1.00, 10.0, 7.5, 11.2), _entry("b", 1.40, 20.0, 19.0, 20.0)
    note = _note(a, b)
    assert note.startswith("the winner a stays ahead of the runner-up b across their capacities' 80% error bands")
    assert not ranking_margin([a, b], "roofline").could_flip


def _sized(cid: str, cap: float, low: float, high: float, usd_per_replica: float) -> dict:
    e = _entry(cid, 0.0, cap, low, high)
    # 8 req/s to size for at 80%: ⌈8 ÷ (cap × 0.8)⌉ replicas of one GPU, usd_per_replica a month each
    n = math.ceil(8 / (cap * 0.8))
    e["sizing"] = {"rate_req_per_s": 8.0, "sizing_req_per_s": cap, "replicas": n, "num_gpus": n,
                   "rental_usd_per_month": n * usd_per_replica}
    return e


def test_sized_bills_at_each_band_end_decide():
    spec = SimpleNamespace(max_utilization=0.8)
    # winner: 10 req/s, one replica ($1,000); at its band's low end 9.5 req/s (×0.95): ⌈8 ÷ 7.6⌉ = 2 replicas, $2,000.
    # runner-up: 12 req/s, one replica ($1,500); at its band's high end 13.2 (×1.1) still one, $1,500 ≤ $2,000: may swap
    a, b = _sized("a", 10.0, 9.5, 10.5, 1000.0), _sized("b", 12.0, 10.8, 13.2, 1500.0)
    (note,) = band_notes(spec, [a, b], first_cost)
    assert note.startswith("the winner a and the runner-up b may swap inside their capacities' 80% error bands: at "
                           "its band's low end it needs 2 GPUs ($2,000/month), the runner-up at its band's high end 1 "
                           "($1,500/month)")
    # the winner's band 10–10.5 (×1.00–×1.05): at its low end ⌈8 ÷ 8⌉ = 1 replica, $1,000 < $1,500: it stays ahead
    a = _sized("a", 10.0, 10.0, 10.5, 1000.0)
    (note,) = band_notes(spec, [a, b], first_cost)
    assert note.startswith("the winner a stays ahead of the runner-up b across both capacities' 80% error bands")
