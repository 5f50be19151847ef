"""A deployment unit of --replicas N engines is priced as N engine replicas of TP GPUs each, packed on the cheapest
instances of the provider's rows (kvledger.ledgers.instances.pack), not as one N × TP-GPU machine; R (the break-even
volume's slope) and the rental of n units follow the same packing (kvledger.ledgers.breakeven).

Prices: gpu_prices.csv's Lambda rows for nvidia_h100_sxm, gpu_1x_h100_sxm5 $4.29/h (1 GPU, a VM) and
gpu_8x_h100_sxm5 $31.92/h (8 × $3.99/GPU-h)."""

from __future__ import annotations

import pytest

from kvledger.analyses.serving.cost_run import gpu_rate
from kvledger.ledgers.breakeven import rental_usd_per_month, replica_usd_per_month
from kvledger.ledgers.cost import SelfHostSetup
from kvledger.ledgers.decision_notes import on_instances_words
from kvledger.ledgers.instances import pack

LAMBDA = gpu_rate("nvidia_h100_sxm", "Lambda", None, None)  # both Lambda rows as options


def test_two_tp1_engines_rent_two_one_gpu_instances_not_an_eight_gpu_one():
    # one unit of 2 engines × TP 1: 2 × gpu_1x $4.29/h = $8.58/h, against one gpu_8x at $31.92/h (6 GPUs idle)
    p = pack(LAMBDA, 1, 2, 2)
    assert (p.usd_per_hour, p.instances, p.idle_gpus) == pytest.approx((8.58, 2, 0))
    assert p.rate.key == "Lambda:gpu_1x_h100_sxm5"
    assert p.words() == "2 replicas × 1 GPU (one deployment unit) × 730 h"
    assert on_instances_words(p) == " on 2 gpu_1x_h100_sxm5 instances (1 GPU each, 0 idle)"
    # 5 units = 10 engines of 1 GPU: 1 × gpu_8x + 2 × gpu_1x = 31.92 + 8.58 = $40.50/h, below 10 × 4.29 = $42.90
    # and 2 × gpu_8x = $63.84
    assert pack(LAMBDA, 5, 2, 2).usd_per_hour == pytest.approx(40.50)


def test_break_even_prices_a_unit_as_its_engines():
    setup = SelfHostSetup(LAMBDA, 2, 0.5, engine_replicas=2)
    # one unit alone: 2 × $4.29/h × 730 h = $6,263.40 (was one gpu_8x: $31.92 × 730 = $23,301.60)
    assert rental_usd_per_month(setup, 1) == pytest.approx(6263.40)
    # R, the slope as units fill gpu_8x instances: $31.92/h ÷ 8 engines × 2 engines per unit × 730 h = $5,825.40
    assert replica_usd_per_month(setup) == pytest.approx(5825.40)
    # 5 units: $40.50/h (above) × 730 h = $29,565
    assert rental_usd_per_month(setup, 5) == pytest.approx(29_565.0)


def test_replica_usd_per_month_says_why_it_is_not_one_replicas_bill():
    from kvledger.ledgers.breakeven import replica_usd_basis

    setup = SelfHostSetup(LAMBDA, 1, 0.5)
    # R = $31.92/h ÷ 8 replicas per gpu_8x instance × 730 h = $3.99 × 730 = $2,912.70; one TP-1 replica alone is
    # billed on gpu_1x: $4.29 × 730 = $3,131.70 (the rental_usd_per_month of break_even_utilization)
    assert (replica_usd_per_month(setup), rental_usd_per_month(setup, 1)) == pytest.approx((2912.70, 3131.70))
    assert replica_usd_basis(setup) == (
        "$2,912.70/month = Lambda:gpu_8x_h100_sxm5 $31.92/h ÷ 8 replicas per instance × 730 h: the rental per replica "
        "once they fill whole instances (the lowest of the rows: the break-even volume's slope); one replica alone is "
        "billed $3,131.70/month on Lambda:gpu_1x_h100_sxm5 (rental_usd_per_month), which the break-even utilization "
        "and the monthly bill at one replica price")
    # one row only (gpu_1x): R is one replica's bill, $4.29 × 730 = $3,131.70
    one = gpu_rate("nvidia_h100_sxm", "Lambda", "gpu_1x_h100_sxm5", None)
    assert replica_usd_basis(SelfHostSetup(one, 1, 0.5)) == (
        "$3,131.70/month = Lambda:gpu_1x_h100_sxm5 $4.29/h × 730 h: one replica's rental")


def test_break_even_words_count_units_as_ledgers_amounts_does():
    from kvledger.ledgers.breakeven import break_even_utilization, break_even_volume
    from kvledger.ledgers.cost import Capacity

    cap = Capacity(10.0, 10_000.0, 2_500.0, 10_000.0, 2_500.0, 0.4, "given", False)  # 10 good req/s per unit
    unit = SelfHostSetup(LAMBDA, 2, 0.5, engine_replicas=2)
    # 3 units = 6 TP-1 engines: 6 × gpu_1x $4.29/h = $25.74/h (below one gpu_8x, $31.92/h) × 730 h = $18,790.20,
    # above 3 × R = 3 × $5,825.40 = $17,476.20: the whole-instance wording, in deployment units (unit_noun)
    bu = break_even_utilization(cap, unit, 1e-3, replicas=3)
    assert bu["rental_usd_per_month"] == pytest.approx(18_790.20)
    assert bu["formula"].startswith("(3 deployment units on whole instances, idle GPUs included, + people USD/month)")
    # gpu_1x only: the bill is linear, 3 × R
    one = SelfHostSetup(gpu_rate("nvidia_h100_sxm", "Lambda", "gpu_1x_h100_sxm5", None), 2, 0.5, engine_replicas=2)
    assert break_even_utilization(cap, one, 1e-3, replicas=3)["formula"].startswith(
        "(3 deployment units × deployment unit + people USD/month) ÷ (3 × good req/s × ")
    # a·c = $0.001 × 10 × 3600 × 730 × 0.8 = $21,024 > R: a break-even volume, in whole units (replicas without)
    assert break_even_volume(cap, unit, 1e-3)["reason"] == (
        "smallest monthly volume above which whole deployment units (each ≤ max utilization) cost less than the API")
    assert break_even_volume(cap, SelfHostSetup(LAMBDA, 1, 0.5), 1e-3)["reason"].startswith(
        "smallest monthly volume above which whole replicas (")
