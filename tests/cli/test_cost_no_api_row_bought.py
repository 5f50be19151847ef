"""cost of a model no API row serves, with --gpu-capex-usd: the self-hosted side alone takes the bought bill where it is
the cheaper one (kvledger.ledgers.self_host_only), its per-token ledgers and headline included, as the compared
report's verdict does."""

from __future__ import annotations

import pytest
from cli_run import cli_json

# Qwen/Qwen3-8B: no API row serves it; rented at a flat $2/GPU-hour, no people line. Bought: $18,000 ÷ 36 months =
# $500/month; power (100 W idle + 600 W × load) × PUE 1.25 × 730 h ÷ 1000 × $0.16/kWh = $14.60 + $87.60 × load
SIM = ["cost", "--simulate", "Qwen/Qwen3-8B", "--gpu", "H100", "--slo", "ttft=1s,tpot=60ms", "--num-requests", "100",
       "--gpu-usd-per-hour", "2", "--engineer-months-per-month", "0", "--gpu-capex-usd", "18000", "--board-power-w",
       "700", "--idle-power-w", "100", "--pue", "1.25", "--usd-per-kwh", "0.16"]


def test_one_replica_without_a_volume_is_priced_bought():
    d = cli_json(*SIM, "--utilization", "0.5")
    # bought at load 0.5: $500 + $14.60 + $87.60 × 0.5 = $558.40/month, below renting 1 × $2 × 730 = $1,460
    assert d["inputs"]["unit_rental_usd_per_month"] == pytest.approx(558.40)
    assert d["inputs"]["usd_per_gpu_hour"] == pytest.approx(558.40 / 730)
    assert d["headline"][1].startswith("  self-hosted, one replica × 1 GPU (bought GPU, $0.76/GPU-h): $558.40/month, "
                                       "people included (bought GPUs, cheaper than renting)")
    item = d["ledgers"]["self_host_output"]["items"][0]
    assert item["name"] == "bought GPU (amortized purchase, power, hosting), decode share of GPU time"


def test_the_volume_per_token_ledgers_price_the_bought_bill_the_month_takes():
    d = cli_json(*SIM, "--monthly-tokens", "2B")
    m = d["monthly"]
    u = m["realized_utilization"]
    bought = 500 + 14.60 + 87.60 * u  # ≈ $518.16 at the volume's 4.07%
    assert m["self_host_usd_per_month"] == pytest.approx(bought, abs=0.005) and m["self_host"]["total_usd"] == 1460.0
    # the per-token ledgers × the volume's tokens give back that bill (were $1,460 at the rented $2/GPU-h)
    led = d["ledgers"]
    per_month = (led["self_host_input"]["total_usd"] * m["input_tokens"]
                 + led["self_host_output"]["total_usd"] * m["output_tokens"]) / 1e6
    assert per_month == pytest.approx(bought, abs=0.005)
    assert d["inputs"]["usd_per_gpu_hour"] == pytest.approx(bought / 730)
