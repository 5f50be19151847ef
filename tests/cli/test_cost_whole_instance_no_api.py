"""cost without an API row prices what must be rented as the compared path does: without a volume the one replica's
whole instance (its idle GPUs an item of the per-token ledgers, its month the instance's bill), and a mix of instance
sizes is shown as a mix (each row, the effective USD per billed GPU-hour) in the text and the JSON."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvledger.cli.main import app

runner = CliRunner()
FILE = "tests/evidence/data/llmperf/leaderboard_individual_anyscale_70b.json"
BASE = ["cost", FILE, "--slo", "ttft=500ms,tpot=50ms", "--gpu", "H100", "--json"]


def _cost(*args: str) -> dict:
    res = runner.invoke(app, [*BASE, *args], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_no_api_row_prices_the_replicas_whole_instance_as_the_compared_path():
    # a 4-GPU replica on Nebius, which rents H100s as 8-GPU instances (gpu-h100-sxm 8gpu, $2.95/GPU-h): 4 GPUs idle
    args = ("--utilization", "0.5", "--gpu-provider", "Nebius", "--num-gpus", "4")
    alone, compared = _cost(*args), _cost(*args, "--api", "OpenAI:gpt-4.1")
    # was $44.99 per 1M output tokens alone against $73.45 compared: now both carry the 4 idle GPUs
    assert alone["totals"]["self_host_usd_per_mtok_output"] == pytest.approx(
        compared["totals"]["self_host_usd_per_mtok_output"], rel=1e-12)
    assert alone["totals"]["self_host_usd_per_mtok_input"] == pytest.approx(
        compared["totals"]["self_host_usd_per_mtok_input"], rel=1e-12)
    out = alone["ledgers"]["self_host_output"]["items"]
    rent, idle = out[0], next(i for i in out if i["name"].startswith("idle GPUs"))
    assert idle["name"] == "idle GPUs of the rented instance (4 of 8), decode share"
    assert idle["quantity"] == pytest.approx(rent["quantity"] * 4 / 4) and idle["unit_price_usd"] == 2.95
    # the month states the whole instance: 8 GPUs × $2.95 × 730 h = $17,228 + people $5,000 (the default) = $22,228
    line = alone["headline"][1]
    assert line.startswith("  self-hosted, one replica × 4 GPUs on 1 gpu-h100-sxm 8gpu instance (8 GPUs, 4 idle) "
                           "(Nebius H100 80GB SXM (gpu-h100-sxm 8gpu, on_demand), $2.95/GPU-h): $22,228.00/month, "
                           "people included (GPU rental $17,228.00: the whole instance, idle GPUs billed)")


def test_a_mix_is_shown_as_a_mix_in_the_self_host_answer():
    # 1 GPU a replica on Lambda, 10⁸ requests a month: 34 replicas on 4 gpu_8x ($3.99/GPU-h) + 2 gpu_1x ($4.29):
    # 4 × 8 × $3.99 + 2 × $4.29 = $136.26/h for 34 GPUs, $4.0076 per billed GPU-hour; × 730 h = $99,469.80 + $5,000
    d = _cost("--gpu-provider", "Lambda", "--num-gpus", "1", "--monthly-requests", "100000000")
    m = d["monthly"]
    assert m["replicas"] == 34 and m["instance_type"] == "gpu_8x_h100_sxm5 + gpu_1x_h100_sxm5"
    assert [(r["key"], r["instances"], r["usd_per_gpu_hour"]) for r in m["instance_rows"]] == [
        ("Lambda:gpu_8x_h100_sxm5", 4, 3.99), ("Lambda:gpu_1x_h100_sxm5", 2, 4.29)]
    assert m["usd_per_gpu_hour"] == pytest.approx(136.26 / 34)
    assert m["self_host_usd_per_month"] == pytest.approx(136.26 * 730 + 5000)
    assert d["inputs"]["usd_per_gpu_hour"] == pytest.approx(136.26 / 34)  # was the first row's $3.99
    assert [r["key"] for r in d["inputs"]["gpu_rows"]] == ["Lambda:gpu_8x_h100_sxm5", "Lambda:gpu_1x_h100_sxm5"]
    assert ("34 replicas × 1 GPU on 4 gpu_8x_h100_sxm5 instances + 2 gpu_1x_h100_sxm5 instances (34 GPUs, 0 idle) "
            "(4 × Lambda H100 80GB SXM (gpu_8x_h100_sxm5, on_demand) at $3.99/GPU-h + 2 × Lambda H100 80GB SXM "
            "(gpu_1x_h100_sxm5, on_demand) at $4.29/GPU-h: $4.008 per GPU-hour billed, the mix's $136.26/h ÷ 34 "
            "GPUs)") in d["headline"][1]


def test_the_compared_inputs_price_a_mix_at_its_bill_per_gpu_billed():
    d = _cost("--gpu-provider", "Lambda", "--num-gpus", "1", "--monthly-requests", "100000000",
              "--api", "OpenAI:gpt-4.1")
    assert d["inputs"]["usd_per_gpu_hour"] == pytest.approx(136.26 / 34)
    assert d["inputs"]["gpu"] == ("Lambda H100 80GB SXM (gpu_8x_h100_sxm5, on_demand) + Lambda H100 80GB SXM "
                                  "(gpu_1x_h100_sxm5, on_demand)")


def test_replicas_carry_separators_and_gpus_their_plural():
    # 4 GPUs a replica on Lambda's 8x (2 replicas an instance), 10¹¹ requests a month: thousands of replicas
    d = _cost("--gpu-provider", "Lambda", "--num-gpus", "4", "--monthly-requests", "100000000000")
    n = d["monthly"]["replicas"]
    assert n > 1000 and f"{n:,} replicas × 4 GPUs on " in d["headline"][1]
