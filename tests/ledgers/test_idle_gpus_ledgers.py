"""The per-token ledgers at a volume carry the idle GPUs of whole rented instances (``instances.idle_item``), so that
they × the volume's tokens equal the monthly bill: one self-host price, not two (a fresh-user trial: gpt-oss-120b TP 2
on a Nebius 8-GPU instance priced 2 GPUs per token and 8 a month)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvledger.cli.main import app
from kvledger.ledgers.cost import GpuRate
from kvledger.ledgers.instances import Packing, idle_item

STAGE = str(Path(__file__).resolve().parents[1] / "evidence/data/inference-perf/stage_0_lifecycle_metrics.json")


def test_idle_item_scales_the_replicas_gpu_hours_by_idle_over_used():
    # the trial's case: 1 replica × 2 GPUs on one 8-GPU instance at $2.95/GPU-h, 6 GPUs idle; the replica's own
    # prefill GPU-hours per 1M input tokens were 0.3063, so the idle ones are 0.3063 × 6 ÷ 2 = 0.9189 GPU-h,
    # × $2.95 = $2.7108 per 1M input tokens
    rate = GpuRate(2.95, "Nebius H100", "gpu_prices.csv", "2025", gpus_per_instance=8,
                   instance_type="gpu-h100-sxm 8gpu")
    item = idle_item(Packing(rate, 1, 2, 1), 0.3063, "prefill")
    assert item.name == "idle GPUs of the rented instance (6 of 8), prefill share"
    assert item.quantity == pytest.approx(0.9189) and item.amount_usd == pytest.approx(2.710755)
    assert "(8 GPUs, 6 idle) × 730 h" in item.note
    # full instances and per-GPU rows: nothing idle, no item; no packing (no volume): none either
    assert idle_item(Packing(rate, 4, 2, 1), 0.3063, "prefill") is None
    assert idle_item(Packing(GpuRate(2.95, "H100", "user", "user input"), 1, 2, 2), 0.3063, "prefill") is None
    assert idle_item(None, 0.3063, "decode") is None


def test_per_token_ledgers_times_the_volume_equal_the_monthly_bill_on_a_part_filled_instance():
    # GCP's a3-highgpu-8g, 1 GPU used of 8 at $10.97906/GPU-h, 1 replica for 10⁶ requests a month: the bill is
    # 8 × 10.97906 × 730 = $64,117.7104 of rental + 0.25 × $20,000 = $5,000 of people = $69,117.7104. The ledgers'
    # GPU rows price the 1 used GPU (1 × 10.97906 × 730 = $8,014.71 over the volume) and the idle rows the other 7
    # ($56,103.00); so ledger totals × the volume's 200.68 M input and 62.35 M output tokens = $69,117.7104
    res = CliRunner().invoke(app, ["cost", STAGE, "--slo", "ttft=500ms,tpot=50ms", "--api", "OpenAI:gpt-4.1",
                                   "--gpu", "H100", "--gpu-provider", "GCP", "--num-gpus", "1",
                                   "--monthly-requests", "1e6", "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    m, led = d["monthly"], d["ledgers"]
    assert d["decision"]["self_host_usd_per_month"] == pytest.approx(69_117.7104)
    per_token = (led["self_host_input"]["total_usd"] * m["input_tokens"]
                 + led["self_host_output"]["total_usd"] * m["output_tokens"]) / 1e6
    assert per_token == pytest.approx(69_117.7104, rel=1e-9)
    idle = sum(i["amount_usd"] * m[f"{k}_tokens"] / 1e6 for k in ("input", "output")
               for i in led[f"self_host_{k}"]["items"] if i["name"].startswith("idle GPUs"))
    assert idle == pytest.approx(7 * 10.97906 * 730, rel=1e-9)  # $56,102.9966
    names = [i["name"] for i in led["self_host_output"]["items"]]
    assert names == ["GPU rental, decode share of GPU time", "idle GPUs of the rented instance (7 of 8), decode share",
                     "people, output share"]
    # the sticker (and so the effective-cost line) and --json's totals are the same ledgers'
    assert d["sticker"]["usd_per_mtok_output"] == pytest.approx(led["self_host_output"]["total_usd"])
    assert d["totals"]["self_host_usd_per_mtok_input"] == pytest.approx(led["self_host_input"]["total_usd"])
    # without a volume the one replica priced carries its whole instance, as the break-even utilization counts it
    # (was: the ledgers priced its 1 GPU and u* the 8 billed, two self-host prices for one replica)
    res = CliRunner().invoke(app, ["cost", STAGE, "--slo", "ttft=500ms,tpot=50ms", "--api", "OpenAI:gpt-4.1",
                                   "--gpu", "H100", "--gpu-provider", "GCP", "--num-gpus", "1", "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    items = d["ledgers"]["self_host_output"]["items"]
    assert [i["name"] for i in items if i["name"].startswith("idle GPUs")] == [
        "idle GPUs of the rented instance (7 of 8), decode share"]
    assert items[1]["note"].endswith("the instances are rented whole (1 replica × 1 GPU = 1 GPU on 1 a3-highgpu-8g "
                                     "instance (8 GPUs, 7 idle) × 730 h)")
    # u* = (one replica's rental, 8 × $10.97906 × 730 = $64,117.7104, + people) ÷ (its requests at full load × API
    # $/request): at the utilization priced u, the ledgers' $/request × its requests at u is that same numerator
    bu, inp = d["break_even_utilization"], d["inputs"]
    assert bu["one_unit_rental_usd_per_month"] == pytest.approx(64_117.7104)
    served = bu["good_requests_per_month_at_full_load"] * inp["utilization"]
    assert inp["self_host_usd_per_request"] * served == pytest.approx(64_117.7104 + bu["people_usd_per_month"],
                                                                      rel=1e-9)
