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
