"""A mix of instance sizes (kvledger.ledgers.instances.pack over kvledger.ledgers.instance_mix): n replicas on the
cheapest combination of a provider's rows, not all on one row, and every bill that reads the packing agrees with it.

The price table is made up: one provider renting a one-GPU VM ("1x H100", $3.00/h) and an eight-GPU instance
("8x H100", $20.00/h = $2.50/GPU-h)."""

from __future__ import annotations

import pytest

from kvledger.analyses.search.instance_bill import instance_sizing, instance_usd_per_month
from kvledger.ledgers.breakeven import rental_curve
from kvledger.ledgers.cost import Capacity, GpuRate, SelfHostSetup, self_host_unit_ledgers
from kvledger.ledgers.decision import monthly_self_host
from kvledger.ledgers.instance_mix import cheapest_counts
from kvledger.ledgers.instances import pack
from kvledger.ledgers.staircase import staircase, staircase_usd_per_hour

EIGHT = GpuRate(2.5, "P H100 (8x H100, on_demand)", "made up", "2026", "high", gpus_per_instance=8,
                instance_type="8x H100", row_key="P:8x")
ONE = GpuRate(3.0, "P H100 (1x H100, on_demand)", "made up", "2026", "high", gpus_per_instance=1,
              instance_type="1x H100", row_key="P:1x", per_gpu=False, options=(EIGHT,))


def test_nine_replicas_rent_one_8x_and_one_1x_instance():
    # 9 one-GPU replicas: 8x + 1x = $20 + $3 = $23.00/h, against 9 × $3 = $27 (all 1x, the old bill) and
    # 2 × $20 = $40 (all 8x); 9 GPUs billed for 9 used, none idle
    p = pack(ONE, 9, 1)
    assert p.usd_per_hour == pytest.approx(23.0) and p.mixed
    assert (p.instances, p.billed_gpus, p.idle_gpus, p.rate.key) == (2, 9, 0, "P:8x")  # the 8x holds the most
    assert p.words() == ("9 replicas × 1 GPU = 9 GPUs on 1 8x H100 instance + 1 1x H100 instance (9 GPUs, 0 idle)"
                         " × 730 h")
    assert p.choice() == ("the cheapest packing of 2 rows for this GPU: 1 × P:8x + 1 × P:1x, $23.00/h for 9 replicas"
                          " of 1 GPU")
    assert p.instance_type == "8x H100 + 1x H100"
    assert p.usd_per_gpu_hour == pytest.approx(23.0 / 9)  # $2.5556 per billed GPU-hour, the rows' average
    assert pack(p.rate, 9, 1).choice() == p.choice()  # packing again on the chosen rate: the same mix


@pytest.mark.parametrize("replicas,usd_per_hour,counts", [
    (6, 18.0, (6, 0)),    # 6 × $3 = $18 < one 8x at $20
    (7, 20.0, (0, 1)),    # 7 × $3 = $21 > $20: one 8x, 1 GPU idle
    (14, 38.0, (6, 1)),   # $20 + 6 × $3 = $38 < 2 × $20 = $40
    (15, 40.0, (0, 2)),   # $20 + 7 × $3 = $41 > $40: two 8x, 1 idle
    (17, 43.0, (1, 2)),   # 2 × $20 + $3 = $43 < 3 × $20 = $60 and < $20 + 9 × $3 = $47
])
def test_the_cheapest_mix_at_each_count(replicas, usd_per_hour, counts):
    # counts: (1x VMs, 8x instances); the staircase (break-even, search's band ends) bills the same mix
    assert cheapest_counts(((1, 3.0, 1, "P:1x"), (8, 20.0, 8, "P:8x")), replicas) == counts
    assert pack(ONE, replicas, 1).usd_per_hour == pytest.approx(usd_per_hour)
    assert staircase_usd_per_hour(staircase(ONE, 1), replicas) == pytest.approx(usd_per_hour)


def test_pack_and_the_staircase_agree_at_every_count():
    steps = staircase(ONE, 1)
    for n in range(1, 120):
        assert pack(ONE, n, 1).usd_per_hour == pytest.approx(staircase_usd_per_hour(steps, n), rel=1e-12)
    # past the table the bulk goes on the 8x (cheapest per replica): 100 = 12 × 8 + 4 → 12 × $20 + 4 × $3 = $252
    assert pack(ONE, 100, 1).usd_per_hour == pytest.approx(252.0)


def test_ties_go_to_fewer_idle_gpus_then_the_row_keys():
    # one replica of 1 GPU: a 2-GPU instance at $4/h (1 idle) and a 1-GPU VM at $4/h (none idle) bill alike
    vm = GpuRate(4.0, "Q 1x", "made up", "2026", gpus_per_instance=1, instance_type="1x", row_key="Q:1x",
                 per_gpu=False)
    two = GpuRate(2.0, "Q 2x", "made up", "2026", gpus_per_instance=2, instance_type="2x", row_key="Q:2x",
                  options=(vm,))
    assert pack(two, 1, 1).rate.key == "Q:1x" and pack(two, 1, 1).idle_gpus == 0
    # 2 replicas: one 2x ($4, none idle) against two 1x VMs ($8): the 2x
    assert pack(two, 2, 1).rate.key == "Q:2x" and pack(two, 2, 1).usd_per_hour == pytest.approx(4.0)
    # two rows of the same size and price: the first key, whichever rate the packing starts from
    a = GpuRate(4.0, "A", "made up", "2026", gpus_per_instance=1, row_key="A:1x", per_gpu=False)
    b = GpuRate(4.0, "B", "made up", "2026", gpus_per_instance=1, row_key="B:1x", per_gpu=False, options=(a,))
    assert pack(b, 3, 1).rate.key == "A:1x" and not pack(b, 3, 1).mixed


def test_the_monthly_bill_has_one_rental_line_per_row_rented():
    # 9 replicas: 8 GPU × 730 h × $2.50 = $14,600 on the 8x, 1 × 730 × $3.00 = $2,190 on the 1x; $16,790 = $23 × 730
    led = monthly_self_host(SelfHostSetup(ONE, 1, 0.5), 9, 0.5)
    rent = [i for i in led.items if i.name.startswith("GPU rental")]
    assert [(i.name, i.quantity, i.unit_price_usd) for i in rent] == [
        ("GPU rental, P:8x (power and hosting included)", 8 * 730, 2.5),
        ("GPU rental, P:1x (power and hosting included)", 730, 3.0)]
    assert sum(i.amount_usd for i in rent) == pytest.approx(16_790.0)
    assert rent[1].note.startswith("1 of the 9 GPUs billed: 9 replicas × 1 GPU = 9 GPUs on 1 8x H100 instance + ")
    # the break-even's rental curve and search's sizing bill the same $16,790
    assert rental_curve(SelfHostSetup(ONE, 1, 1.0))(9) == pytest.approx(16_790.0)
    s = instance_sizing(ONE, 9, [(1, 1)])
    assert s["rental_usd_per_month"] == pytest.approx(16_790.0)
    assert instance_usd_per_month(s, 9) == pytest.approx(16_790.0)
    assert (s["instances"], s["idle_gpus"], s["billed_rows"]) == (2, 0, ["P:8x", "P:1x"])


def test_the_per_token_ledgers_price_a_mix_at_its_bill_per_gpu_billed():
    # 14 replicas of 1 GPU (6 × 1x + 1 × 8x = $38/h for 14 GPUs, none idle): the GPU-hour at $38 ÷ 14 = $2.7143, so
    # the ledgers × the tokens add up to the bill. A replica makes 1 good output token/s at full load, half its GPU
    # time decode: per 1M output tokens 1 GPU × 10⁶ ÷ (1 × 3600) × 0.5 = 138.89 GPU-h; the 14 replicas make
    # 14 × 3600 × 730 = 36,792,000 output tokens a month, × 138.89 GPU-h ÷ 10⁶ × $38/14 = $13,870 = the decode half
    # of the monthly $38 × 730 = $27,740
    cap = Capacity(1000 / (3600 * 730), 1.0, 1.0, 0, 0, 0.5, "given", False)
    p = pack(ONE, 14, 1)
    _, out = self_host_unit_ledgers(cap, SelfHostSetup(p.rate, 1, 1.0), replicas=14, packing=p)
    rent = out.items[0]
    assert rent.unit_price_usd == pytest.approx(38.0 / 14)
    assert "the mix's $38.00/h ÷ 14 GPUs billed" in rent.note
    assert rent.quantity == pytest.approx(1e6 / 3600 * 0.5)
    assert rent.amount_usd * 14 * 3600 * 730 / 1e6 == pytest.approx(38 * 730 / 2)


def test_the_answer_names_each_rows_instances():
    # the cost answer's self-hosted line on a mix: each row's instances, the GPUs billed over all of them
    from kvledger.ledgers.decision_notes import on_instances_words

    assert on_instances_words(pack(ONE, 9, 1)) == " on 1 8x H100 instance + 1 1x H100 instance (9 GPUs, 0 idle)"
    # 15 one-GPU replicas on ⌈15 ÷ 8⌉ = 2 8-GPU instances: 16 billed, 16 − 15 = 1 idle over both (not 1 each)
    assert on_instances_words(pack(ONE, 15, 1)) == " on 2 8x H100 instances (8 GPUs each, 1 of the 16 idle)"
    assert on_instances_words(pack(ONE, 6, 1)) == ""  # one-GPU VMs only: nothing to say


# two providers: P sells only the 8-GPU instance ($2.50/GPU-h), Q only a one-GPU VM ($3.00/h)
P8 = GpuRate(2.5, "P H100 (8x)", "made up", "2026", "high", gpus_per_instance=8, instance_type="8x", row_key="P:8x")
Q1 = GpuRate(3.0, "Q H100 (1x)", "made up", "2026", "high", gpus_per_instance=1, instance_type="1x", row_key="Q:1x",
             per_gpu=False, options=(P8,))


@pytest.mark.parametrize("replicas,usd_per_hour,key", [
    (9, 27.0, "Q:1x"),    # not 1 × P:8x + 1 × Q:1x = $23 (two clouds): P alone 2 × $20 = $40, Q alone 9 × $3 = $27
    (7, 20.0, "P:8x"),    # P: one 8x, $20 (1 idle) < Q: 7 × $3 = $21
    (16, 40.0, "P:8x"),   # P: two 8x, $40 < Q: $48
    (15, 40.0, "P:8x"),   # P: $40 (1 idle) < Q: $45; the cross-provider $20 + 7 × $3 = $41 was never cheaper here
    (6, 18.0, "Q:1x"),    # Q: 6 × $3 = $18 < P: $20
])
def test_a_mix_never_spans_two_providers(replicas, usd_per_hour, key):
    p = pack(Q1, replicas, 1)
    assert p.usd_per_hour == pytest.approx(usd_per_hour) and not p.mixed and p.rate.key == key
    assert {r.key.split(":")[0] for r, _ in p.rows} == {key.split(":")[0]}
    assert staircase_usd_per_hour(staircase(Q1, 1), replicas) == pytest.approx(usd_per_hour)  # the staircase agrees


def test_pack_and_the_staircase_agree_across_providers_at_every_count():
    steps = staircase(Q1, 1)
    for n in range(1, 60):
        assert pack(Q1, n, 1).usd_per_hour == pytest.approx(staircase_usd_per_hour(steps, n), rel=1e-12)


def test_catalog_mixes_stay_with_one_provider():
    # without --gpu-provider every row of the GPU is considered, but one deployment is billed by one cloud
    from kvledger.catalog.prices import find_gpu_prices

    rows = find_gpu_prices("A100-80GB")
    p = pack(GpuRate.from_catalog(rows[0], tuple(rows)), 9, 1)
    # was 1 CoreWeave 8x ($2.70 × 8 = $21.60/h) + 1 GCP a2-ultragpu-1g ($5.07) = $26.67/h; now CoreWeave alone:
    # 2 × 8 × $2.70 = $43.20/h (GCP alone: 9 × $5.07 = $45.63/h)
    assert [(r.key, n) for r, n in p.rows] == [("CoreWeave:8x A100 instance", 2)]
    assert p.usd_per_hour == pytest.approx(2 * 8 * 2.70)
    rows = find_gpu_prices("nvidia_h200_sxm")
    p = pack(GpuRate.from_catalog(rows[0], tuple(rows)), 3, 4)
    # was Nebius 8gpu (2 replicas, 8 × $3.50 = $28/h) + 4 RunPod pods ($14.36) = $42.36/h; now RunPod alone:
    # 3 replicas × 4 GPUs × $3.59 = $43.08/h (Nebius alone: 2 × 8 × $3.50 = $56/h)
    assert [(r.key, n) for r, n in p.rows] == [("RunPod:Secure Cloud pod", 12)]
    assert p.usd_per_hour == pytest.approx(12 * 3.59)
