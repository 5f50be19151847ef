"""Whole-instance rental (kvledger.ledgers.instances): replicas packed on the instances a price row sells, the cheapest
packing among a provider's rows, idle GPUs billed, a TP replica kept on one instance; per-GPU rows unchanged.

Every price is a bundled row of catalog/data/gpu_prices.csv, named by its key (provider:instance_type)."""

from __future__ import annotations

import json

import pytest

from kvledger.analyses.search.bands import band_sizing
from kvledger.analyses.search.instance_bill import instance_sizing
from kvledger.analyses.serving.cost_curves import volume_curve
from kvledger.analyses.serving.cost_run import gpu_rate
from kvledger.catalog.prices import find_gpu_price, find_gpu_prices
from kvledger.errors import InputError
from kvledger.ledgers.breakeven import break_even_volume, rental_usd_per_month
from kvledger.ledgers.cost import Capacity, GpuRate, SelfHostSetup
from kvledger.ledgers.decision import monthly_self_host
from kvledger.ledgers.instances import pack

# GCP:a3-highgpu-8g — 8 GPUs per instance, $87.83247/h = $10.97906/GPU-h (skypilot-catalog v8 gcp vms.csv, us-east4)
GCP_H100 = GpuRate.from_catalog(find_gpu_price("nvidia_h100_sxm", "GCP"))
# Nebius:gpu-h100-sxm 8gpu — 8 GPUs per instance, $2.95/GPU-h (skypilot-catalog v8 nebius vms.csv)
NEBIUS_H100 = GpuRate.from_catalog(find_gpu_price("nvidia_h100_sxm", "Nebius", "gpu-h100-sxm 8gpu"))
# RunPod:Secure Cloud pod — 1 GPU per row (a per-GPU marketplace), $2.69/GPU-h
RUNPOD_H100 = GpuRate.from_catalog(find_gpu_price("nvidia_h100_sxm", "RunPod"))


def test_the_reported_case_bills_the_whole_gcp_instance():
    # 2 replicas × 1 GPU on a3-highgpu-8g: ⌈2 ÷ 8⌉ = 1 instance, 8 GPUs billed, 6 idle;
    # 8 × $10.97906 × 730 h = $64,117.7104 per month (the bug billed 2 × the GPU-hour × 730 h, a quarter of it)
    p = pack(GCP_H100, 2, 1)
    assert (p.instances, p.gpus_per_instance, p.idle_gpus, p.billed_gpus) == (1, 8, 6, 8)
    assert p.words() == "2 replicas × 1 GPU = 2 GPUs on 1 a3-highgpu-8g instance (8 GPUs, 6 idle) × 730 h"
    led = monthly_self_host(SelfHostSetup(GCP_H100, 1, 0.5), 2, 0.5)
    rent = led.items[0]
    assert rent.quantity == 8 * 730 and rent.unit_price_usd == 10.97906
    assert rent.amount_usd == pytest.approx(64_117.7104)
    assert rent.note == p.words()


def test_a_tp_replica_stays_on_one_instance():
    # TP 2 on Nebius's 8-GPU instance: ⌊8 ÷ 2⌋ = 4 replicas per instance; 5 replicas → ⌈5 ÷ 4⌉ = 2 instances,
    # 16 GPUs billed for 10 used (6 idle), 16 × $2.95 = $47.20 per hour
    p = pack(NEBIUS_H100, 5, 2)
    assert (p.instances, p.gpus, p.idle_gpus) == (2, 10, 6) and p.usd_per_hour == pytest.approx(47.2)
    assert p.words() == ("5 replicas × 2 GPUs = 10 GPUs on 2 gpu-h100-sxm 8gpu instances (8 GPUs each, "
                         "6 of the 16 idle) × 730 h")
    # TP 3 does not divide 8: ⌊8 ÷ 3⌋ = 2 replicas per instance, so 5 replicas need ⌈5 ÷ 2⌉ = 3 instances (⌈15 ÷ 8⌉ =
    # 2 would split a replica across two machines): 24 GPUs billed for 15 used, 9 idle
    assert (pack(NEBIUS_H100, 5, 3).instances, pack(NEBIUS_H100, 5, 3).idle_gpus) == (3, 9)


def test_a_replica_wider_than_every_instance_is_refused_naming_the_rows():
    # CoreWeave:4-GPU slice is the only GB200 row (4 GPUs per instance): a TP 8 replica cannot sit on one
    gb200 = gpu_rate("nvidia_gb200", None, None, None)
    with pytest.raises(InputError, match=r"a replica of 8 GPUs .* CoreWeave:4-GPU slice \(4 GPUs per instance\)"):
        pack(gb200, 1, 8)
    # TP 4 fits: 1 slice, no GPU idle, 4 × $10.50 = $42.00 per hour
    assert pack(gb200, 1, 4).usd_per_hour == pytest.approx(42.0) and pack(gb200, 1, 4).idle_gpus == 0


def test_per_gpu_rows_are_billed_per_gpu_whatever_the_tp():
    # RunPod's pod row has 1 GPU: 3 replicas × TP 2 = 6 GPUs billed, none idle, 6 × 730 h × $2.69 = $11,782.20,
    # the same line as before instances were billed whole
    p = pack(RUNPOD_H100, 3, 2)
    # each TP-2 replica is one 2-GPU pod (a marketplace rents pods of several GPUs), not two one-GPU machines
    assert (p.billed_gpus, p.idle_gpus) == (6, 0)
    assert p.words() == "3 replicas × 2 GPUs (one 2-GPU pod each, billed per GPU) × 730 h"
    rent = monthly_self_host(SelfHostSetup(RUNPOD_H100, 2, 0.5), 3, 0.5).items[0]
    assert rent.quantity == 6 * 730 and rent.amount_usd == pytest.approx(11_782.2) and rent.note == p.words()
    # a price given by the user (--gpu-usd-per-hour) is per GPU too
    assert pack(GpuRate.given(2.0), 3, 2).billed_gpus == 6


@pytest.mark.parametrize("replicas,instance,usd_per_hour", [
    (1, "Lambda:gpu_1x_h100_sxm5", 4.29),         # 1 × $4.29 against one 8× instance at 8 × $3.99 = $31.92
    (7, "Lambda:gpu_1x_h100_sxm5", 7 * 4.29),     # $30.03 < $31.92
    (8, "Lambda:gpu_8x_h100_sxm5", 8 * 3.99),     # $34.32 > $31.92: the 8× instance, full
])
def test_the_cheapest_packing_among_the_providers_rows(replicas, instance, usd_per_hour):
    # skypilot-catalog v8 lambda vms.csv rows: gpu_8x_h100_sxm5 (8 GPUs, $3.99/GPU-h), gpu_1x_h100_sxm5 (1, $4.29)
    rate = gpu_rate("H100", "Lambda", None, None)
    p = pack(rate, replicas, 1)
    assert p.rate.key == instance and p.usd_per_hour == pytest.approx(usd_per_hour) and p.considered == 2
    assert p.rate.source.startswith(f"the cheapest packing of 2 rows for this GPU: {instance}, ")
    assert pack(p.rate, replicas, 1).rate.source == p.rate.source  # packing again does not stack the choice


def test_naming_the_instance_leaves_one_row():
    rate = gpu_rate("H100", "Lambda", "gpu_8x_h100_sxm5", None)
    p = pack(rate, 1, 1)
    assert (p.rate.key, p.idle_gpus, p.considered, p.choice()) == ("Lambda:gpu_8x_h100_sxm5", 7, 1, "")


def test_search_sizing_and_its_band_ends_bill_whole_instances():
    # Nebius H100 (8 GPUs per instance, $2.95): 2 replicas of 1 GPU → 1 instance, 8 × $2.95 × 730 h = $17,228/month
    s = instance_sizing(NEBIUS_H100, 2, [(1, 1)])  # colocated units of TP 1
    assert s["rental_usd_per_month"] == pytest.approx(17_228.0) and (s["instances"], s["idle_gpus"]) == (1, 6)
    # sized at 3 req/s on 2 req/s of SLO capacity (× 80 %: ⌈3 ÷ 1.6⌉ = 2 replicas); at capacity × 0.25 (0.5 req/s):
    # ⌈3 ÷ 0.4⌉ = 8 replicas still fill one instance ($17,228, where 4 × $17,228 was billed per replica before);
    # at × 0.2 (0.4 req/s): ⌈3 ÷ 0.32⌉ = 10 replicas need 2 instances, $34,456
    e = {"sizing": {"rate_req_per_s": 3.0, "sizing_req_per_s": 2.0, "replicas": 2, "num_gpus": 2, **s},
         "capacity": {"goodput_req_per_s": 1.8, "slo_capacity_req_per_s": 2.0}}
    assert band_sizing(e, 0.25, 0.8)["rental_usd_per_month"] == pytest.approx(17_228.0)
    assert band_sizing(e, 0.2, 0.8)["rental_usd_per_month"] == pytest.approx(34_456.0)
    assert band_sizing(e, 0.2, 0.8)["replicas"] == 10
    # a disaggregated unit of 1 prefill engine of TP 2 and 1 decode engine of TP 4, 3 units: 3 TP-2 engines on one
    # 8-GPU instance (2 idle) and 3 TP-4 engines on ⌈3 ÷ 2⌉ = 2 (4 idle): 3 instances, 24 × $2.95 × 730 h = $51,684
    d = instance_sizing(NEBIUS_H100, 3, [(1, 2), (1, 4)])
    assert (d["instances"], d["idle_gpus"]) == (3, 6) and d["rental_usd_per_month"] == pytest.approx(51_684.0)


def test_every_bundled_row_with_several_gpus_is_an_instance_of_them():
    # the field the packing reads: gpus_per_instance; an 8-GPU row's instance price is 8 × its per-GPU price
    rows = [r for r in find_gpu_prices("nvidia_h100_sxm") if r.gpus_per_instance > 1]
    assert {r.key for r in rows} >= {"GCP:a3-highgpu-8g", "Nebius:gpu-h100-sxm 8gpu", "AWS:p5.48xlarge"}
    for r in rows:
        assert r.instance_usd_per_hour == pytest.approx(r.gpus_per_instance * r.usd_per_gpu_hour, rel=1e-3)


def test_break_even_and_the_report_curve_climb_whole_instances():
    # one replica of 1 GPU takes c = 1000 requests a month (capacity 1000 ÷ (3600 × 730) req/s at 100 %); the API costs
    # a = $30 a request; Nebius H100 instances of 8 GPUs at $2.95: the first replica costs the whole instance,
    # 8 × 2.95 × 730 = $17,228 a month, and the next seven nothing more
    cap = Capacity(1000 / (3600 * 730), 1.0, 1.0, 0, 0, 0.5, "given", False)
    setup = SelfHostSetup(NEBIUS_H100, 1, 1.0, max_utilization=1.0)
    bv = break_even_volume(cap, setup, 30.0)
    # self-hosting is cheaper from 17,228 ÷ 30 = 574.27 requests a month on (one replica, one instance)
    assert bv["requests_per_month"] == pytest.approx(17_228 / 30) and bv["replicas_at_break_even"] == 1
    pts = {p["requests_per_month"]: p for p in volume_curve({"break_even_volume": bv})["points"]}
    # 1,000 requests (1 replica) and 8,000 (8 replicas) both cost one instance; 9,000 need a second: $34,456
    assert pts[1000.0]["self_host_usd_per_month"] == pytest.approx(17_228)
    assert pts[8000.0]["self_host_usd_per_month"] == pytest.approx(17_228)
    assert (bv["unit_rental_usd_per_month"], rental_usd_per_month(setup, 9)) == pytest.approx((2153.5, 34_456))
    # the curve read once prices every count as the one-off call does: 0 → $0, 1–8 → one instance, 9–16 → two
    from kvledger.ledgers.breakeven import rental_curve

    curve = rental_curve(setup)
    assert [curve(n) for n in (0, 1, 8, 9, 16, 17)] == pytest.approx([0, 17_228, 17_228, 34_456, 34_456, 51_684])
    assert all(curve(n) == rental_usd_per_month(setup, n) for n in range(0, 20))


def test_cost_cli_refuses_a_tp_replica_no_instance_holds_and_prints_the_instances(tmp_path):
    from pathlib import Path

    from typer.testing import CliRunner

    from kvledger.cli.main import app

    stage = str(Path(__file__).resolve().parents[1] / "evidence/data/inference-perf/stage_0_lifecycle_metrics.json")
    args = ["cost", stage, "--slo", "ttft=500ms,tpot=50ms", "--api", "OpenAI:gpt-4.1"]  # no --utilization: a volume
    with pytest.raises(InputError, match=r"CoreWeave:4-GPU slice \(4 GPUs per instance\)"):  # exit 2 from main
        CliRunner().invoke(app, [*args, "--gpu", "GB200", "--num-gpus", "8"], catch_exceptions=False)
    # the reported case, on a measured file: GCP's a3-highgpu-8g, 1 GPU used of 8, 1 replica for 10⁶ requests a month
    res = CliRunner().invoke(app, [*args, "--gpu", "H100", "--gpu-provider", "GCP", "--num-gpus", "1",
                                   "--monthly-requests", "1e6", "--json"])
    d = json.loads(res.stdout)["decision"]
    assert (d["instances"], d["gpus_per_instance"], d["idle_gpus"], d["instance_type"]) == (1, 8, 7, "a3-highgpu-8g")
    # 8 × $10.97906 × 730 h = $64,117.71 for the rental, + people
    rent = d["self_host_rent"]["items"][0]
    assert rent["amount_usd"] == pytest.approx(64_117.7104) and rent["note"].endswith("(8 GPUs, 7 idle) × 730 h")


@pytest.mark.parametrize("replicas,instance,usd_per_hour", [
    (1, "Lambda:gpu_8x_h100_sxm5", 8 * 3.99),      # TP 2: the 1x VMs cannot hold it; ⌊8 ÷ 2⌋ = 4 replicas an instance
    (5, "Lambda:gpu_8x_h100_sxm5", 2 * 8 * 3.99),  # ⌈5 ÷ 4⌉ = 2 instances, 6 GPUs idle
])
def test_one_gpu_machines_do_not_hold_a_tensor_parallel_replica(replicas, instance, usd_per_hour):
    # Lambda's gpu_1x_h100_sxm5 ($4.29) is a one-GPU VM (provider_type neocloud): two of them share no NVLink, so a
    # TP 2 replica goes on the 8× instance even where two 1x VMs (2 × $4.29 = $8.58 an hour) would bill less
    p = pack(gpu_rate("H100", "Lambda", None, None), replicas, 2)
    assert p.rate.key == instance and p.usd_per_hour == pytest.approx(usd_per_hour)
    # a marketplace's pod row (RunPod, provider_type neocloud/marketplace) still rents 2 GPUs per replica
    assert pack(RUNPOD_H100, 1, 2).usd_per_hour == pytest.approx(2 * 2.69)
    # only one-GPU VMs to choose from: refused, each named as such
    with pytest.raises(InputError, match=r"Lambda:gpu_1x_h100_sxm5 \(1 GPU per instance, a one-GPU machine\)"):
        pack(gpu_rate("H100", "Lambda", "gpu_1x_h100_sxm5", None), 1, 2)


def test_a_price_given_per_gpu_hour_rents_a_tensor_parallel_replica_in_search():
    # was: `search … --tp 2 --gpu-usd-per-hour 2` stopped at "no price row considered has that many GPUs per
    # instance … or give --gpu-usd-per-hour": search wraps the given price as a one-GPU row, whose per-GPU billing was
    # decided apart from GpuRate.given's. Now GpuPrice.per_gpu says it once: 3 replicas × TP 2 × $2.00 = $12.00 an hour
    from kvledger.analyses.search.screen import price_rows

    (row,) = price_rows("nvidia_h100_sxm", None, 2.0, 2)
    assert row.per_gpu and not find_gpu_price("nvidia_h100_sxm", "Lambda", "gpu_1x_h100_sxm5").per_gpu
    p = pack(GpuRate.from_catalog(row), 3, 2)
    assert (p.usd_per_hour, p.idle_gpus) == (pytest.approx(12.0), 0)


def test_a_row_named_instance_is_not_called_an_instance_instance():
    # CoreWeave's A100 row is named "8x A100 instance": 2 replicas on it said "on 1 8x A100 instance instance"
    rate = GpuRate.from_catalog(find_gpu_price("nvidia_a100_80gb_sxm", "CoreWeave"))
    assert pack(rate, 2, 1).words() == "2 replicas × 1 GPU = 2 GPUs on 1 8x A100 instance (8 GPUs, 6 idle) × 730 h"
    assert "instances instances" not in pack(rate, 9, 1).words()


def test_the_cost_answer_does_not_say_instance_twice_either():
    # the same fix in the answer's self-hosted line (decision_notes.on_instances_words), found by a review trial:
    # "on 1 8x H100 instance instance (8 GPUs, 7 idle)"
    from kvledger.ledgers.decision_notes import on_instances_words

    rate = GpuRate.from_catalog(find_gpu_price("nvidia_a100_80gb_sxm", "CoreWeave"))
    assert on_instances_words(pack(rate, 2, 1)) == " on 1 8x A100 instance (8 GPUs, 6 idle)"
