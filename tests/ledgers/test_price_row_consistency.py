"""The GPU price line and the break-even's replica cost name the rows the bill rents (a fresh-user trial: the report
named Nebius's one-GPU preset, which cannot hold a TP-2 replica, while the bill rented RunPod; the break-even priced
a replica at Nebius's 8-GPU instance without naming it). Figures from gpu_prices.csv's H200 rows, worked by hand."""

from __future__ import annotations

import pytest

from kvledger.analyses.serving.cost_run import cheapest_gpu_row
from kvledger.ledgers.breakeven import break_even_volume, rental_usd_per_month, replica_usd_per_month
from kvledger.ledgers.cost import Capacity, GpuRate, SelfHostSetup
from kvledger.ledgers.instances import pack
from kvledger.ledgers.packings import rented_words

# the H200 rows: AWS p5en.48xlarge 8 × $7.912, CoreWeave 8x $6.305, Nebius 8gpu 8 × $3.50 ($28.00/h), Nebius
# 1gpu-16vcpu-200gb 1 × $3.50 (a one-GPU VM: holds a TP-1 replica only), RunPod Secure Cloud pod $3.59 per GPU
# (a marketplace pod: rents k GPUs for a replica of k)
ROW, ROWS = cheapest_gpu_row("H200", None)
RATE = GpuRate.from_catalog(ROW, ROWS)


def test_cheapest_per_gpu_hour_is_the_one_gpu_preset_that_holds_no_tp2_replica():
    assert ROW.key == "Nebius:gpu-h200-sxm 1gpu-16vcpu-200gb" and ROW.usd_per_gpu_hour == 3.5


def test_price_line_names_the_row_one_tp2_replica_rents_and_why_not_the_cheaper_ones():
    # one replica of 2 GPUs: RunPod 2 × $3.59 = $7.18/h; Nebius 8gpu $28.00/h (6 of 8 GPUs idle); AWS 8 × $7.912 =
    # $63.30/h; CoreWeave $50.44/h; Nebius 1gpu cannot hold it → RunPod, $7.18/h. Both Nebius rows are $3.50 < $3.59
    # per GPU-hour, so the line says why neither is rented
    p = pack(RATE, 1, 2)
    assert rented_words(p) == (
        "RunPod H200 141GB (Secure Cloud pod, on_demand), $3.59/GPU-h: 1 replica × 2 GPUs (one 2-GPU pod each, "
        "billed per GPU) × 730 h, $7.18/h; "
        "not rented though cheaper per GPU-hour: Nebius:gpu-h200-sxm 1gpu-16vcpu-200gb at $3.50/GPU-h cannot hold "
        "a replica of 2 GPUs (a one-GPU machine); Nebius:gpu-h200-sxm 8gpu at $3.50/GPU-h bills $28.00/h for it "
        "(8 GPUs, 6 idle)")


def test_price_line_at_four_replicas_rents_one_full_nebius_instance():
    # 4 replicas × 2 GPUs = 8 GPUs: one Nebius 8gpu instance, 8 × $3.50 = $28.00/h, beats RunPod 4 × $7.18 = $28.72/h;
    # no row is cheaper than $3.50 per GPU-hour, so nothing more is said
    assert rented_words(pack(RATE, 4, 2)) == (
        "Nebius H200 141GB SXM (gpu-h200-sxm 8gpu, on_demand), $3.50/GPU-h: 4 replicas × 2 GPUs = 8 GPUs on 1 "
        "gpu-h200-sxm 8gpu instance (8 GPUs, 0 idle) × 730 h, $28.00/h")


def test_never_break_even_names_the_row_of_its_replica_cost_and_the_bill_of_one_replica():
    setup = SelfHostSetup(RATE, 2, None, 0.0, 0.0)
    # R, the staircase's slope: Nebius 8gpu $28.00/h ÷ 4 TP-2 replicas × 730 h = $5,110/month (RunPod: $7.18 × 730 =
    # $5,241.40, AWS $63.296 ÷ 4 × 730 = $11,551.52, CoreWeave $50.44 ÷ 4 × 730 = $9,205.30); one replica alone is
    # billed on RunPod: 2 × $3.59 × 730 h = $5,241.40
    assert replica_usd_per_month(setup) == pytest.approx(5110.0)
    assert rental_usd_per_month(setup, 1) == pytest.approx(5241.4)
    # 1 req/s at 80%: c = 1 × 3600 × 730 × 0.8 = 2,102,400 requests; at $0.001 each a·c = $2,102.40 < R: never
    cap = Capacity(1.0, 1000.0, 250.0, 1000.0, 250.0, 0.3, "given", False)
    out = break_even_volume(cap, setup, 0.001)
    assert out["requests_per_month"] is None
    assert out["reason"] == (
        "a replica at 80% utilization costs $5,110/month in GPU rental alone as its share of full instances of "
        "Nebius:gpu-h200-sxm 8gpu ($28.00/h ÷ 4 replicas per instance × 730 h, the lowest rental per replica of the "
        "rows: the bill nears it as replicas fill whole instances, so no volume does better; one replica alone is "
        "billed $5,241/month on RunPod:Secure Cloud pod), but its 2,102,400 requests cost $2,102 on the API: "
        "self-hosting never breaks even")


def test_never_break_even_on_per_gpu_rows_is_one_replicas_bill_unnamed():
    # RunPod's rows alone (--gpu-provider RunPod): per-GPU pods, R = 2 × $3.59 × 730 h = $5,241.40, the bill itself
    row, rows = cheapest_gpu_row("H200", "RunPod")
    setup = SelfHostSetup(GpuRate.from_catalog(row, rows), 2, None, 0.0, 0.0)
    cap = Capacity(1.0, 1000.0, 250.0, 1000.0, 250.0, 0.3, "given", False)
    assert break_even_volume(cap, setup, 0.001)["reason"].startswith(
        "a replica at 80% utilization costs $5,241/month in GPU rental alone, but its 2,102,400 requests cost $2,102")
