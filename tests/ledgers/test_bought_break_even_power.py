"""The bought-GPU break-even utilization prices power at the break-even load itself, not at the verdict's load
(kvledger.ledgers.breakeven.break_even_utilization with ``power``; ``self_host_month.bought_power``)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kvledger.ledgers.breakeven import break_even_utilization
from kvledger.ledgers.cost import Capacity, GpuRate, SelfHostSetup
from kvledger.ledgers.host_bill import HostBill
from kvledger.ledgers.self_host_month import GpuPower, bought_power

# one replica of 1 GPU serves 1,000 requests a month at full load; the API charges $1 a request: F = $1,000/month
CAP = Capacity(1000 / (3600 * 730), 1.0, 1.0, 0, 0, 0.5, "given", False)
BUY = HostBill(gpu_capex_usd=18_000, amortization_months=36, pue=1.25, usd_per_kwh=0.16)
POWER = GpuPower(700.0, 100.0, "given")


def test_bought_power_slope_is_board_minus_idle_watts_priced_per_unit_load():
    # (700 − 100) W × PUE 1.25 × 730 h ÷ 1000 = 547.5 kWh × $0.16 = $87.60 per GPU-month per unit of load
    d = SimpleNamespace(buy=SimpleNamespace(total_usd=523.36), self_host=SimpleNamespace(total_usd=3131.70),
                        realized_utilization=0.1)
    assert bought_power(d, BUY, POWER) == pytest.approx((87.60, 0.1))
    # renting cheaper than buying: the rented bill is the verdict's, no power to re-price
    d.buy.total_usd = 4000.0
    assert bought_power(d, BUY, POWER) is None


def test_break_even_prices_power_at_the_break_even_load():
    # the bought bill at the verdict's load 0.1: $18,000 ÷ 36 = $500 + idle 100 W × 1.25 × 730 ÷ 1000 × $0.16 = $14.60
    # + $87.60 × 0.1 = $8.76 → $523.36/month, its rate $523.36 ÷ 730 per GPU-hour; no people
    setup = SelfHostSetup(GpuRate.given(523.36 / 730, "bought GPU"), 1, 0.1)
    old = break_even_utilization(CAP, setup, 1.0)
    assert old["utilization"] == pytest.approx(0.52336)  # $523.36 ÷ $1,000: power still at load 0.1
    be = break_even_utilization(CAP, setup, 1.0, power=(87.60, 0.1))
    # u* = ($523.36 − $87.60 × 0.1) ÷ ($1,000 − $87.60) = 514.60 ÷ 912.40 = 0.564007; there the bill is
    # $514.60 + $87.60 × 0.564007 = $564.007 = u* × $1,000
    assert be["utilization"] == pytest.approx(514.60 / 912.40)
    assert be["rental_usd_per_month"] == pytest.approx(564.00701)
    assert be["power_load"].startswith("bought GPUs: power priced at the break-even utilization itself (board power "
                                       "= idle + (board − idle) × 0.564), not at the verdict's load 0.100")


def test_break_even_volume_prices_power_at_its_own_load():
    from kvledger.ledgers.breakeven import break_even_volume

    # max utilization 0.8: a replica takes c = 1,000 × 0.8 = 800 requests a month, $800 on the API
    setup = SelfHostSetup(GpuRate.given(523.36 / 730, "bought GPU"), 1, 0.1, max_utilization=0.8)
    # at the verdict's load 0.1, R = $523.36: n replicas win on (523.36·n, 800·n], first overlapping from n = 2
    # (3 × 523.36 = 1,570.08 ≤ 1,600): V* = 2 × 523.36 = 1,046.72 requests a month
    assert break_even_volume(CAP, setup, 1.0)["requests_per_month"] == pytest.approx(1046.72)
    # power at each volume's load: n replicas at V run at V ÷ (n × 1,000), their power $87.60 × V ÷ 1,000 = $0.0876
    # a request whatever n; the idle bill R' = $523.36 − $87.60 × 0.1 = $514.60 a replica. n replicas win on
    # (514.60·n ÷ (1 − 0.0876), 800·n] = (564.007·n, 800·n], first overlapping from n = 3 (4 × 564.007 = 2,256.03 ≤
    # 2,400; 3 × 564.007 = 1,692.02 > 1,600): V* = 1,692.02, 3 replicas at 1,692.02 ÷ 3,000 = 0.564007 = u* above
    # (were power at 0.8: R = $584.68, V* = 1,754.04, 3 replicas at 0.58468 ≠ u*)
    bv = break_even_volume(CAP, setup, 1.0, power=(87.60, 0.1))
    assert (bv["unit_rental_usd_per_month"], bv["power_usd_per_request"]) == pytest.approx((514.60, 0.0876))
    assert (bv["requests_per_month"], bv["replicas_at_break_even"]) == pytest.approx((3 * 514.60 / 0.9124, 3))
    assert bv["api_usd_per_request"] == 1.0  # the API's price, not net of power
    assert bv["power_load"] == ("bought GPUs: power priced at each volume's own load (unit_rental_usd_per_month at "
                                "idle power + power_usd_per_request × volume), not at the verdict's load 0.100")


def test_bought_h100_break_even_volume_is_the_break_even_utilization_times_capacity():
    from kvledger.ledgers.breakeven import break_even_volume

    # one H100 bought at $25,000 over 36 months = $694.44/month; power (700 − 80) W × PUE 1.3 × 730 h ÷ 1000 =
    # 588.38 kWh × $0.12 = b = $70.6056 per GPU-month per unit of load, idle 80 W → 75.92 kWh × $0.12 = $9.1104;
    # priced at the verdict's load 0.4: $694.44 + $9.1104 + $70.6056 × 0.4 = $731.797/month. People 0.25 × $20,000
    # = $5,000. SLO capacity 10 req/s: F = 10 × 3600 × 730 = 26,280,000 requests a month at full load; API $0.001 a
    # request: $26,280 at full load.
    b, bill = 70.6056, 25_000 / 36 + 9.1104 + 70.6056 * 0.4
    cap = Capacity(10.0, 1.0, 1.0, 0, 0, 0.5, "given", False)
    setup = SelfHostSetup(GpuRate.given(bill / 730, "bought GPU"), 1, 0.4, 0.25, 20_000, max_utilization=0.8)
    # u* = ($731.797 − $70.6056 × 0.4 + $5,000) ÷ ($26,280 − $70.6056) = $5,703.555 ÷ $26,209.394 = 0.217615
    bu = break_even_utilization(cap, setup, 0.001, power=(b, 0.4))
    assert bu["utilization"] == pytest.approx(5_703.5548 / 26_209.3944)
    # V*: a request's power $70.6056 ÷ 26,280,000 = $2.6867e-6, so it saves $0.001 − that = $0.00099731 against the
    # API; one replica (c = 0.8 × F = 21,024,000 requests) wins above $5,703.555 ÷ $0.00099731 = 5,718,920 requests
    bv = break_even_volume(cap, setup, 0.001, power=(b, 0.4))
    assert (bv["requests_per_month"], bv["replicas_at_break_even"]) == pytest.approx((5_718_919.7, 1))
    # volume ÷ (capacity × replicas) = 5,718,920 ÷ 26,280,000 = 0.217615 = u* (power at 0.8 gave $5,760,039 requests,
    # 0.219180 ≠ 0.217615)
    assert bv["requests_per_month"] / (26_280_000 * 1) == pytest.approx(bu["utilization"], rel=1e-12)


def test_cost_curves_price_bought_power_at_each_points_load():
    from kvledger.analyses.serving.cost_curves import utilization_curve, volume_curve
    from kvledger.ledgers.breakeven import break_even_volume

    # the bought H100 above: idle bill $694.44 + $9.1104 = $703.5548, b = $70.6056, people $5,000, F = 26,280,000
    b, bill = 70.6056, 25_000 / 36 + 9.1104 + 70.6056 * 0.4
    cap = Capacity(10.0, 1.0, 1.0, 0, 0, 0.5, "given", False)
    setup = SelfHostSetup(GpuRate.given(bill / 730, "bought GPU"), 1, 0.4, 0.25, 20_000, max_utilization=0.8)
    cost = {"break_even_utilization": break_even_utilization(cap, setup, 0.001, power=(b, 0.4)),
            "break_even_volume": break_even_volume(cap, setup, 0.001, power=(b, 0.4)), "inputs": {"utilization": 0.4}}
    uc = utilization_curve(cost)
    # at u = 0.1: ($703.5548 + $70.6056 × 0.1 + $5,000) ÷ 2,628,000 requests × 1,000 = $2.17299 per 1,000 requests
    # (at the verdict's load 0.4 for every point: $5,731.797 ÷ 2,628 = $2.18105)
    at = {p["utilization"]: p["self_host_usd_per_1k_requests"] for p in uc["points"]}
    assert at[0.1] == pytest.approx(5_710.61536 / 2_628)
    assert uc["break_even_utilization"] == pytest.approx(5_703.5548 / 26_209.3944)  # the ledger's u*, one replica
    vc = volume_curve(cost)
    # at V* = 5,718,920 requests: 1 replica × $703.5548 + $5,000 + $70.6056 × 5,718,920 ÷ 26,280,000 = $5,718.92, the
    # API's $0.001 × 5,718,920
    star = next(p for p in vc["points"] if p["requests_per_month"] == round(vc["break_even_requests_per_month"], 6))
    assert star["self_host_usd_per_month"] == pytest.approx(star["api_usd_per_month"]) == pytest.approx(5_718.9197)
