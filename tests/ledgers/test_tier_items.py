"""KV tier line items (host memory, NVMe) in the cost ledgers, worked by hand."""

from __future__ import annotations

import pytest

from kvledger.errors import InputError
from kvledger.ledgers.breakeven import replica_usd_per_month
from kvledger.ledgers.cost import Capacity, GpuRate, SelfHostSetup, self_host_unit_ledgers
from kvledger.ledgers.decision import monthly_self_host
from kvledger.ledgers.tier_items import KvTierBill, TierRate, tier_items, tier_usd_per_month

GPU = GpuRate.given(2.0)  # $2/GPU-hour
TIERS = KvTierBill((TierRate.given("host", 256.0, 3.0), TierRate.given("nvme", 1024.0, 0.1)))


def test_per_token_ledgers_carry_the_tiers_on_the_gpu_hours():
    # 2 GPUs, 1000 good input / 100 good output tok/s, utilization 0.5, prefill share 0.25.
    # input: GPU-h per 1M = 2 × 10⁶ ÷ (1000 × 3600 × 0.5) × 0.25 = 0.277778 GPU-h → $0.555556
    #   host: 256 GiB × 0.277778 ÷ 730 = 0.0974125 GiB-month × $3 = $0.292237
    #   NVMe: 1024 × 0.277778 ÷ 730 = 0.389650 GiB-month × $0.1 = $0.0389650
    # output: 2 × 10⁶ ÷ (100 × 3600 × 0.5) × 0.75 = 8.33333 GPU-h → $16.6667; host 2.92237 GiB-month → $8.76712;
    #   NVMe 11.6895 GiB-month → $1.16895
    cap = Capacity(1.0, 1000.0, 100.0, 0, 0, 0.25, "given", False)
    setup = SelfHostSetup(GPU, num_gpus=2, utilization=0.5, kv_tiers=TIERS)
    inp, out = self_host_unit_ledgers(cap, setup)
    assert [i.name for i in inp.items] == ["GPU rental, prefill share of GPU time", "host memory for the KV tier",
                                           "NVMe for the KV tier"]
    assert [i.quantity for i in inp.items] == pytest.approx([0.277778, 0.0974125, 0.389650], rel=1e-5)
    assert inp.total_usd == pytest.approx(0.555556 + 0.292237 + 0.0389650, rel=1e-5)
    assert [i.amount_usd for i in out.items] == pytest.approx([16.6667, 8.76712, 1.16895], rel=1e-5)
    assert inp.items[1].source == "user input (--host-memory-usd-per-gib-month)"
    assert inp.items[2].unit == "GiB-month"


def test_no_tier_leaves_the_ledger_as_it_was():
    cap = Capacity(1.0, 1000.0, 100.0, 0, 0, 0.25, "given", False)
    with_none = self_host_unit_ledgers(cap, SelfHostSetup(GPU, num_gpus=2, utilization=0.5))
    with_empty = self_host_unit_ledgers(cap, SelfHostSetup(GPU, num_gpus=2, utilization=0.5, kv_tiers=KvTierBill()))
    assert [len(x.items) for x in with_none] == [1, 1] == [len(x.items) for x in with_empty]


def test_monthly_bill_and_break_even_include_the_tiers():
    # tiers per GPU-month: 256 × $3 + 1024 × $0.1 = $870.4; 3 replicas × 2 GPUs = 6 GPUs → $5,222.4
    # GPUs: 6 × 730 × $2 = $8,760; people 0 → total $13,982.4
    setup = SelfHostSetup(GPU, num_gpus=2, utilization=0.5, kv_tiers=TIERS)
    led = monthly_self_host(setup, 3, 0.5)
    assert [round(i.amount_usd, 6) for i in led.items] == [8760.0, 4608.0, 614.4]
    assert led.total_usd == pytest.approx(13982.4)
    # one replica: 2 × $2 × 730 = $2,920 + 2 × $870.4 = $1,740.8 → $4,660.8
    assert replica_usd_per_month(setup) == pytest.approx(4660.8)
    assert tier_usd_per_month(None, 2) == 0.0


@pytest.mark.parametrize("kind,size,price,match", [
    ("nvme", 0.0, 0.1, "positive number of GiB"),
    ("nvme", 10.0, -1.0, "--nvme-usd-per-gib-month must be"),
    ("ssd", 10.0, 1.0, "tier kind must be one of host, nvme"),
])
def test_bad_tier_inputs(kind, size, price, match):
    with pytest.raises(InputError, match=match):
        TierRate.given(kind, size, price)


def test_cost_cli_tier_flags():
    import json
    from pathlib import Path

    from typer.testing import CliRunner

    from kvledger.cli.main import app

    f = Path(__file__).resolve().parents[1] / "evidence" / "data" / "llmperf"
    f = f / "leaderboard_individual_anyscale_70b.json"
    base = ["cost", str(f), "--slo", "ttft=500ms,tpot=50ms", "--api", "OpenAI:gpt-4.1", "--utilization", "0.5",
            "--gpu", "H100", "--gpu-provider", "Nebius", "--num-gpus", "4", "--json"]
    r = CliRunner().invoke(app, base + ["--kv-tier-host", "256GiB", "--host-memory-usd-per-gib-month", "2",
                                        "--kv-tier-nvme", "1TiB", "--nvme-usd-per-gib-month", "0.08"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    # replica: 4 GPUs × $2.95 × 730 = $8,614 + tiers 4 × (256 × $2 + 1024 × $0.08) = $2,375.68 → $10,989.68
    assert d["inputs"]["unit_rental_usd_per_month"] == pytest.approx(10989.68)
    names = [i["name"] for i in d["ledgers"]["self_host_output"]["items"]]
    # without a volume the one replica priced carries its whole 8-GPU instance (4 of 8 idle), as u* counts it; the
    # tiers follow (per GPU used, as the GPU rental)
    assert names[1:4] == ["idle GPUs of the rented instance (4 of 8), decode share", "host memory for the KV tier",
                          "NVMe for the KV tier"]
    r = CliRunner().invoke(app, base + ["--nvme-usd-per-gib-month", "1"])
    assert r.exit_code != 0 and "give its size with --kv-tier-nvme" in str(r.exception)


def test_a_tier_without_a_price_takes_the_cheapest_bundled_row_and_names_it():
    # tier_prices.csv: host DDR5 RDIMM bought, $70,800 ÷ 4,096 GiB = $17.29/GiB over 36 months = $0.480 per GiB-month
    # (2025-12-28), and AWS $4.23 (2018-05-24) → the RDIMM's, the cheaper; nvme GCP Local SSD $0.218 (2015-04-21).
    # 256 GiB per GPU × 730 GPU-hours ÷ 730 = 256 GiB-months × $0.48 = $122.88
    host = TierRate.given("host", 256.0, None)
    assert host.usd_per_gib_month == 0.48 and host.as_of == "2025-12-28"
    assert "tier_prices.csv Bought:host:ddr5-rdimm-36mo" in host.source and "(3DNews, 2025-12-28" in host.source
    assert "no --host-memory-usd-per-gib-month given" in host.source
    # the default row prices memory bought beside the GPUs; a rented instance's own memory is in its hourly price, and
    # the source says which flag prices that case at 0
    assert ("the host memory a rented GPU instance comes with is in its hourly price: "
            "--host-memory-usd-per-gib-month 0 prices a tier that fits in it") in host.source
    (item,) = tier_items(KvTierBill((host,)), 730.0)
    assert item.amount_usd == pytest.approx(122.88)
    nvme = TierRate.given("nvme", 1024.0, None)
    assert nvme.usd_per_gib_month == 0.218 and nvme.as_of == "2015-04-21"
    assert TierRate.given("host", 256.0, 1.5).source == "user input (--host-memory-usd-per-gib-month)"
