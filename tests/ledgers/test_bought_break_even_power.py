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


def test_break_even_volume_prices_power_at_the_load_each_replica_is_sized_to():
    from kvledger.ledgers.breakeven import break_even_volume

    # max utilization 0.8: a replica takes c = 1,000 × 0.8 = 800 requests a month, $800 on the API
    setup = SelfHostSetup(GpuRate.given(523.36 / 730, "bought GPU"), 1, 0.1, max_utilization=0.8)
    # at the verdict's load 0.1, R = $523.36: n replicas win on (523.36·n, 800·n], first overlapping from n = 2
    # (3 × 523.36 = 1,570.08 ≤ 1,600): V* = 2 × 523.36 = 1,046.72 requests a month
    assert break_even_volume(CAP, setup, 1.0)["requests_per_month"] == pytest.approx(1046.72)
    # power at 0.8: R = $523.36 + $87.60 × (0.8 − 0.1) = $584.68; windows (584.68·n, 800·n] overlap from n = 3
    # (4 × 584.68 = 2,338.72 ≤ 2,400; 3 × 584.68 = 1,754.04 > 1,600): V* = 1,754.04
    bv = break_even_volume(CAP, setup, 1.0, power=(87.60, 0.1))
    assert (bv["replica_usd_per_month"], bv["requests_per_month"]) == pytest.approx((584.68, 1754.04))
    assert bv["power_load"] == ("bought GPUs: power priced at 0.800, the utilization each replica is sized to, not "
                                "at the verdict's load 0.100")
