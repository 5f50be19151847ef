"""The report's break-even sentence and the good-request count under a cost: what a fresh-user trial found
contradictory or not adding up."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kvledger.ledgers.decision_notes import volume_good_requests
from kvledger.report.html_report import break_even_text


def test_no_break_even_anywhere_is_not_promised_at_a_larger_volume():
    never = {"break_even_utilization": {"reachable": False, "replicas": 1},
             "break_even_volume": {"requests_per_month": None, "reason": "self-hosting never breaks even"}}
    text = break_even_text(never)
    # it said "(a larger volume, on more replicas, can: below)" and then "no break-even volume"
    # whose utilization: one replica's, carrying the whole people line (as cost says it), not "the 1 replica this
    # volume needs" where no volume was given
    assert text == ("No utilization up to 100% (one replica, carrying the whole people line) breaks even; no "
                    "break-even volume: self-hosting never breaks even.")
    two = {"break_even_utilization": {"reachable": True, "replicas": 2, "utilization": 0.42},
           "break_even_volume": {"requests_per_month": 5e6}}
    assert break_even_text(two).startswith("Break-even utilization (the 2 replicas this volume needs, sharing the "
                                            "people line) 42")
    later = {"break_even_utilization": {"reachable": False, "replicas": 1},
             "break_even_volume": {"requests_per_month": 5e6}}
    assert "breaks even (a larger volume, on more replicas, can: below); break-even volume" in break_even_text(later)


def test_the_good_share_has_the_digits_its_product_needs():
    # 2,190,283 requests at a good share of 2,189,188 / 2,190,283 = 0.99950006…: "× 1.000" did not give 2,189,188;
    # four decimals do (0.9995 × 2,190,283 = 2,189,187.9, within half a request)
    cap = SimpleNamespace(load=None, searched_req_per_s=2190283.0, goodput_req_per_s=2189188.0, seed=None)
    good, words = volume_good_requests(2190283.0, cap)
    assert round(good) == 2189188
    assert words.startswith("the self-hosted bill ÷ the volume's 2,189,188 good requests: 2,190,283 × 0.9995, ")
    cap.goodput_req_per_s = 0.95 * cap.searched_req_per_s  # a share exact in 3 decimals keeps 3
    assert "× 0.950, " in volume_good_requests(2190283.0, cap)[1]


def test_the_utilization_curve_marks_the_volumes_own_deployment():
    from kvledger.analyses.serving.cost_curves import utilization_curve

    # one replica's curve (replica $3,701.10 + people $5,000 a month, 6.125 req/s × 2,628,000 s at full load) against
    # the volume's own deployment: 2 replicas at 68.0% for 21.9 M requests, $12,402.20 a month →
    # 1,000 × 12,402.20 / 21.9e6 = $0.5663 per 1,000 requests (a fresh-user trial read the one-replica curve's
    # $0.7945 at 68% as this volume's cost)
    cost = {"inputs": {"utilization": 0.68}, "decision": {"realized_utilization": 0.680, "replicas": 2,
                                                          "self_host_usd_per_month": 12_402.20,
                                                          "requests_per_month": 21.9e6},
            "break_even_utilization": {"unit_rental_usd_per_month": 3_701.10, "people_usd_per_month": 5_000.0,
                                       "requests_per_month_at_full_load": 6.125 * 2_628_000,
                                       "api_usd_per_request": 1e-4, "utilization": 2.19, "reachable": False}}
    c = utilization_curve(cost)
    assert c["volume_point"]["replicas"] == 2
    assert c["volume_point"]["self_host_usd_per_1k_requests"] == pytest.approx(1e3 * 12_402.20 / 21.9e6)
    assert utilization_curve({**cost, "decision": None})["volume_point"] is None
