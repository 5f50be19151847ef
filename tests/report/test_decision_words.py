"""The report's break-even sentence and the good-request count under a cost: what a fresh-user trial found
contradictory or not adding up."""

from __future__ import annotations

from types import SimpleNamespace

from kvledger.ledgers.decision_notes import volume_good_requests
from kvledger.report.html_report import _break_even_text


def test_no_break_even_anywhere_is_not_promised_at_a_larger_volume():
    never = {"break_even_utilization": {"reachable": False, "replicas": 1},
             "break_even_volume": {"requests_per_month": None, "reason": "self-hosting never breaks even"}}
    text = _break_even_text(never)
    # it said "(a larger volume, on more replicas, can: below)" and then "no break-even volume"
    assert text == ("No utilization up to 100% of the 1 replica this volume needs breaks even; no break-even volume: "
                    "self-hosting never breaks even.")
    later = {"break_even_utilization": {"reachable": False, "replicas": 1},
             "break_even_volume": {"requests_per_month": 5e6}}
    assert "breaks even (a larger volume, on more replicas, can: below); break-even volume" in _break_even_text(later)


def test_the_good_share_has_the_digits_its_product_needs():
    # 2,190,283 requests at a good share of 2,189,188 / 2,190,283 = 0.99950006…: "× 1.000" did not give 2,189,188;
    # four decimals do (0.9995 × 2,190,283 = 2,189,187.9, within half a request)
    cap = SimpleNamespace(load=None, slo_capacity_req_per_s=2190283.0, goodput_req_per_s=2189188.0, seed=None)
    good, words = volume_good_requests(2190283.0, cap)
    assert round(good) == 2189188
    assert words.startswith("the self-hosted bill ÷ the volume's 2,189,188 good requests: 2,190,283 × 0.9995, ")
    cap.goodput_req_per_s = 0.95 * cap.slo_capacity_req_per_s  # a share exact in 3 decimals keeps 3
    assert "× 0.950, " in volume_good_requests(2190283.0, cap)[1]
