"""The volume-first decision (issue 21): replicas and realized utilization from a volume, the whole self-hosted bill
(power and capex worked by hand), same-model API rows, flip points and the word-based --api suggestions."""

from __future__ import annotations

import pytest

from kvledger.catalog.api_match import find_api_price, rows_with_words, same_model_rows
from kvledger.errors import InputError, UnknownNameError
from kvledger.ledgers.api_cost import ApiMix
from kvledger.ledgers.cost import Capacity, GpuRate, SelfHostSetup
from kvledger.ledgers.decision import (
    GpuPower,
    MonthlyVolume,
    api_options,
    decide,
    monthly_self_host,
    resolve_volume,
)
from kvledger.ledgers.decision_notes import rests_on_line
from kvledger.ledgers.host_bill import HostBill, capex_item, people_cost, power_item

# one replica: 10 good req/s, 1,000 input and 250 output tokens per good request
CAP = Capacity(10.0, 10_000.0, 2_500.0, 10_000.0, 2_500.0, 0.4, "given", False)
RUNPOD = GpuRate.given(2.69, "H100")
TOGETHER_8B = find_api_price("Together:meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo")


def test_power_line_by_hand():
    # 700 W × load 0.6 × PUE 1.3 × 730 h = 398.58 kWh; × $0.12/kWh = $47.83 per GPU-month (no idle floor)
    item = power_item(1, 700.0, 0.0, 0.6, 1.3, 0.12, "test")
    assert item.quantity == pytest.approx(700 * 0.6 * 1.3 * 730 / 1000) and item.amount_usd == pytest.approx(47.8296)
    # with an 80 W idle floor: (80 + 620 × 0.6) W = 452 W × 1.3 × 730 h = 428.95 kWh, × 2 GPUs × $0.12 = $102.95
    two = power_item(2, 700.0, 80.0, 0.6, 1.3, 0.12, "test")
    assert two.amount_usd == pytest.approx(2 * 452 * 1.3 * 730 / 1000 * 0.12)


def test_capex_line_by_hand():
    # $30,000 per GPU over 36 months in cash: $833.33 a GPU-month
    assert capex_item(1, HostBill(gpu_capex_usd=30_000)).amount_usd == pytest.approx(30_000 / 36)
    # financed at 8% a year: annuity 30,000 × (0.08/12) ÷ (1 − (1 + 0.08/12)^−36) = $940.09 a month
    fin = capex_item(4, HostBill(gpu_capex_usd=30_000, annual_interest=0.08))
    assert fin.unit_price_usd == pytest.approx(940.09, abs=0.01) and fin.amount_usd == pytest.approx(
        4 * 940.09, abs=0.05
    )


def test_people_defaults_follow_team_capability_and_yield_to_the_user():
    assert people_cost("experienced", None, None).engineer_months_per_month == 0.1
    none = people_cost("none", None, None)
    assert (none.engineer_months_per_month, none.engineer_usd_per_month) == (0.5, 20_000.0) and "default" in none.source
    mine = people_cost("none", 0.0, 15_000.0)
    assert mine.engineer_months_per_month == 0.0 and mine.source.startswith("user input")
    with pytest.raises(InputError):
        people_cost("expert", None, None)


def test_volume_in_tokens_sizes_replicas_and_realized_utilization():
    # 300M tokens/month at 1,000 in + 250 out per request = 240,000 requests = 0.0913 req/s: one replica (the minimum)
    vol = resolve_volume(MonthlyVolume(tokens=300e6), CAP)
    assert vol.requests == pytest.approx(240_000) and vol.input_tokens == pytest.approx(240e6)
    setup = SelfHostSetup(RUNPOD, 1, None, 0.25, 20_000.0, max_utilization=0.8)
    opts, _ = api_options([(TOGETHER_8B, True, True)], ApiMix(), vol)
    d = decide(CAP, setup, vol, opts)
    assert d.replicas == 1 and d.realized_utilization == pytest.approx(240_000 / (730 * 3600) / 10)
    # rented: 730 GPU-h × $2.69 = $1,963.70 + 0.25 × $20,000 people = $6,963.70; API: 300M × $0.18/M = $54.00
    assert d.self_host.total_usd == pytest.approx(1963.7 + 5000) and d.primary.bill.total_usd == pytest.approx(54.0)
    assert d.verdict == "API" and d.holds_within_band()
    assert d.flips["capacity_multiplier"] is None  # one replica and the people alone cost more than the API


def test_replicas_at_the_allowed_peak_and_the_capacity_that_flips_the_verdict():
    # 10⁸ requests/month = 38.05 req/s; at ≤ 80% of 10 req/s per replica: ⌈38.05 / 8⌉ = 5 replicas, 76.1% each
    vol = resolve_volume(MonthlyVolume(requests=1e8), CAP)
    setup = SelfHostSetup(RUNPOD, 1, None, max_utilization=0.8)
    opts, _ = api_options([(TOGETHER_8B, True, False)], ApiMix(), vol)
    d = decide(CAP, setup, vol, opts)
    assert d.replicas == 5 and d.realized_utilization == pytest.approx(1e8 / (730 * 3600) / 50)
    # self-host 5 × $1,963.70 = $9,818.50 vs API 10⁸ × 1,250 tokens × $0.18/M = $22,500: self-host. It loses once
    # replicas reach ⌈22,500 / 1,963.70⌉ = 12, i.e. when capacity falls to 38.05 ÷ (8 × 11) = 0.432× the estimate
    assert d.verdict == "self-host" and d.primary.bill.total_usd == pytest.approx(22_500)
    assert d.flips["capacity_multiplier"] == pytest.approx(1e8 / (730 * 3600) / (8 * 11))
    assert d.flips["gpu_price_multiplier"] == pytest.approx(22_500 / (5 * 1963.7))
    assert d.holds_within_band()  # 0.43× lies outside ±30%


def test_bought_gpus_bill_capex_power_and_hosting():
    setup = SelfHostSetup(RUNPOD, 2, None)
    buy = HostBill(gpu_capex_usd=30_000, hosting_usd_per_gpu_month=150.0)
    led = monthly_self_host(setup, 3, 0.6, buy=buy, power=GpuPower(700.0, 0.0, "test"))
    # 6 GPUs: capex 6 × $833.33 + power 6 × $47.83 (700 W × 0.6 × 1.3 × 730 h × $0.12) + hosting 6 × $150
    assert led.total_usd == pytest.approx(6 * 30_000 / 36 + 6 * 47.8296 + 6 * 150)


def test_same_model_rows_match_family_version_and_size():
    keys = {r.key for r in same_model_rows("meta-llama/Llama-3.1-8B")}
    assert keys == {
        "Together:meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo",
        "Fireworks:llama-v3p1-8b-instruct",
        "Groq:llama-3.1-8b-instant",
        "DeepInfra:meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo",
    }
    assert not any("3.3" in k or "70B" in k for k in keys)
    assert same_model_rows("llama") == []  # one word says too little


def test_fuzzy_api_names_suggest_the_providers_rows():
    assert [r.key for r in rows_with_words("llama-8b", "Together")] == [
        "Together:meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo"
    ]
    with pytest.raises(UnknownNameError, match="Together:meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo"):
        find_api_price("Together:llama-8b")


def test_api_options_cheapest_first_and_a_row_with_no_batch_api_priced_on_demand():
    vol = resolve_volume(MonthlyVolume(input_tokens=240e6, output_tokens=60e6), CAP)
    rows = [(r, True, False) for r in same_model_rows("meta-llama/Llama-3.1-8B")]
    opts, notes = api_options(rows, ApiMix(), vol)
    totals = [o.bill.total_usd for o in opts]
    assert (
        totals == sorted(totals) and opts[0].price.provider == "DeepInfra"
    )  # $0.02/$0.03: 240 × 0.02 + 60 × 0.03 = $6.60
    assert totals[0] == pytest.approx(6.6)
    # half the requests at batch prices: DeepInfra has no batch API, so its half goes on demand and it stays at $6.60;
    # Groq's 50% batch discount: (240 × 0.05 + 60 × 0.08) × (1 − 0.5 × 0.5) = $16.80 × 0.75 = $12.60
    batch, notes = api_options(rows, ApiMix(batch_share=0.5), vol)
    assert batch[0].price.provider == "DeepInfra" and batch[0].bill.total_usd == pytest.approx(6.6)
    assert next(o for o in batch if o.price.provider == "Groq").bill.total_usd == pytest.approx(12.6)
    assert any("DeepInfra" in n and "on-demand rate" in n for n in notes)


def test_a_low_confidence_cheapest_row_is_checked_against_the_cheapest_high_confidence_one():
    # DeepInfra ($6.60, low confidence) is the cheapest row for 300M tokens; Groq ($16.80, high) the cheapest sure one:
    # the one-replica bill ($1,963.70 + $5,000 people) loses to both, so the verdict is the same either way
    vol = resolve_volume(MonthlyVolume(input_tokens=240e6, output_tokens=60e6), CAP)
    rows = [(r, True, False) for r in same_model_rows("meta-llama/Llama-3.1-8B")]
    opts, _ = api_options(rows, ApiMix(), vol)
    d = decide(CAP, SelfHostSetup(RUNPOD, 1, None, 0.25, 20_000.0), vol, opts)
    assert d.primary.price.provider == "DeepInfra" and d.verdict == "API"
    assert d.rests_on[0].startswith(
        "API price row DeepInfra:meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo: low confidence")
    assert "(Groq:llama-3.1-8b-instant, $16.80/month) the verdict is the same" in d.rests_on[0]


def test_replicas_are_sized_for_the_diurnal_peak():
    # 10⁸ requests/month = 38.05 req/s on average; at a peak 2× the mean, 76.1 req/s ÷ (10 × 0.8) → 10 replicas,
    # each 38.05 ÷ 100 = 38.1% utilized on average (against 5 replicas at 76.1% for flat traffic)
    vol = resolve_volume(MonthlyVolume(requests=1e8, peak_to_mean=2.0), CAP)
    opts, _ = api_options([(TOGETHER_8B, True, False)], ApiMix(), vol)
    d = decide(CAP, SelfHostSetup(RUNPOD, 1, None), vol, opts)
    assert d.replicas == 10 and d.realized_utilization == pytest.approx(1e8 / (730 * 3600) / 100)
    with pytest.raises(InputError, match="peak-to-mean"):
        resolve_volume(MonthlyVolume(requests=1e8, peak_to_mean=0.5), CAP)


def test_the_flip_check_uses_each_side_of_an_asymmetric_band():
    # A measured band ×0.69–×1.06 (sides 0.31 below, 0.06 above) is not ±31%.
    # Low side: the 10⁸ requests/month case above flips at 0.432× capacity: outside ×0.69 (holds), inside ×0.40.
    vol = resolve_volume(MonthlyVolume(requests=1e8), CAP)
    opts, _ = api_options([(TOGETHER_8B, True, False)], ApiMix(), vol)
    setup = SelfHostSetup(RUNPOD, 1, None, max_utilization=0.8)
    assert decide(CAP, setup, vol, opts, capacity_band=0.31, band_sides=(0.31, 0.06)).holds_within_band()
    assert not decide(CAP, setup, vol, opts, capacity_band=0.6, band_sides=(0.6, 0.06)).holds_within_band()
    # High side: at $6.50/GPU-h, 5 replicas × 730 h × $6.50 = $23,725 > $22,500 API: the verdict is API. It flips to
    # self-host at 4 replicas ($18,980), i.e. once capacity reaches 38.05 ÷ (8 × 4) = 1.189× the estimate: a symmetric
    # ±31% band would call that a flip; the measured ×0.69–×1.06 holds; ×0.69–×1.25 flips.
    pricey = SelfHostSetup(GpuRate.given(6.5, "H100"), 1, None, max_utilization=0.8)
    d = decide(CAP, pricey, vol, opts, capacity_band=0.31, band_sides=(0.31, 0.06))
    assert d.verdict == "API" and d.flips["capacity_multiplier"] == pytest.approx(1e8 / (730 * 3600) / 32)
    assert d.holds_within_band() and (d.band_low, d.band_high) == pytest.approx((0.69, 1.06))
    assert not decide(CAP, pricey, vol, opts, capacity_band=0.31).holds_within_band()
    assert not decide(CAP, pricey, vol, opts, capacity_band=0.31, band_sides=(0.31, 0.25)).holds_within_band()
    assert "within −31%/+6% capacity" in rests_on_line(d)
    assert d.to_dict()["capacity_band"] == 0.31 and d.to_dict()["capacity_band_high"] == pytest.approx(1.06)


def test_the_decision_is_redone_at_both_ends_of_the_band():
    # 10⁸ requests/month = 10⁸ ÷ (730 × 3600) = 38.05 req/s; API $22,500; 5 replicas × $1,963.70 = $9,818.50 self-host.
    # Band ×0.40–×1.06. Low end: 4 good req/s a replica, ⌈38.05 ÷ (4 × 0.8)⌉ = ⌈11.89⌉ = 12 replicas at
    # 38.05 ÷ 48 = 79.3%, 12 × $1,963.70 = $23,564.40 > $22,500 → the API. High end: 10.6 good req/s,
    # ⌈38.05 ÷ 8.48⌉ = ⌈4.49⌉ = 5 replicas at 38.05 ÷ 53 = 71.8%, $9,818.50 → self-host. So the verdict FLIPS inside
    # the band, and the robustness line prints both bills (fresh-user trial: the bill never carried the band).
    rate = 1e8 / (730 * 3600)
    vol = resolve_volume(MonthlyVolume(requests=1e8), CAP)
    opts, _ = api_options([(TOGETHER_8B, True, False)], ApiMix(), vol)
    d = decide(CAP, SelfHostSetup(RUNPOD, 1, None, max_utilization=0.8), vol, opts, capacity_band=0.6,
               band_sides=(0.6, 0.06))
    low, high = d.band_ends
    assert (low.capacity_multiplier, low.sizing_req_per_s, low.replicas) == pytest.approx((0.4, 4.0, 12))
    assert low.realized_utilization == pytest.approx(rate / 48) and low.self_host_usd_per_month == pytest.approx(
        12 * 1963.7) and low.verdict == "API"
    assert (high.replicas, high.self_host_usd_per_month, high.verdict) == (5, pytest.approx(5 * 1963.7), "self-host")
    assert high.realized_utilization == pytest.approx(rate / 53)
    assert d.verdict == "self-host" and not d.holds_within_band()
    line = rests_on_line(d)
    assert "FLIPS within −60%/+6% capacity" in line
    assert "at ×0.40 (4 req/s capacity): 12 replicas at 79.3%, $23,564.40/month → the API" in line
    assert "at ×1.06 (10.6 req/s capacity): 5 replicas at 71.8%, $9,818.50/month → self-host" in line
    # the flip points read as conditions (fresh-user trial: "it flips at 0.03× the capacity … ; at 0.82× the GPU price"
    # left the price clause hanging): "it would flip were the capacity k× the one priced", "… were the GPU price"
    k = d.flips["capacity_multiplier"]
    assert f"it would flip were the capacity {k:.2f}× the one priced" in line
    if d.flips.get("gpu_price_multiplier") is not None:
        assert line.endswith(f"and it would flip were the GPU price {d.flips['gpu_price_multiplier']:.2f}× the one "
                             "priced")
    js = d.to_dict()["band_ends"]
    assert [e["replicas"] for e in js] == [12, 5] and js[0]["self_host_usd_per_month"] == pytest.approx(23_564.4)


def test_break_even_names_where_self_hosting_is_first_cheaper_and_where_it_stays_cheaper():
    # 10 good req/s a replica, 1,250 tokens a request at $0.18/M (Together): a = $0.000225 a request; at ≤ 80%
    # a replica serves c = 10 × 3600 × 730 × 0.8 = 21,024,000 requests/month (a·c = $4,730.40).
    # At $4/GPU-h, R = $2,920: one replica wins from V₁ = R ÷ a = 12,977,778 requests (49.4% of one replica's
    # 26,280,000) to c; 2 replicas cost $5,840 = the API at 25,955,556 requests, so (21,024,000, 25,955,556) is an
    # API gap, and above 25,955,556 self-hosting stays cheaper (V*, 2 replicas). A verdict of self-host at 15M
    # requests (18.75B tokens) sits in the first window, API at 23M (28.75B tokens) in the gap: both stated as such.
    from kvledger.ledgers.breakeven import break_even_volume
    from kvledger.ledgers.decision_notes import verdict_lines

    setup = SelfHostSetup(GpuRate.given(4.0, "H100"), 1, None, max_utilization=0.8)
    a = 1250 * 0.18 / 1e6
    bv = break_even_volume(CAP, setup, a)
    assert bv["first_cheaper_requests_per_month"] == pytest.approx(2920 / a)
    assert bv["first_cheaper_replicas"] == 1
    assert bv["first_cheaper_utilization"] == pytest.approx(2920 / a / 26_280_000)
    assert bv["requests_per_month"] == pytest.approx(2 * 2920 / a) and bv["replicas_at_break_even"] == 2
    for requests, verdict, where in ((15e6, "self-host", "a self-host window"), (23e6, "API", "an API gap")):
        vol = resolve_volume(MonthlyVolume(requests=requests), CAP)
        opts, _ = api_options([(TOGETHER_8B, True, True)], ApiMix(), vol)
        d = decide(CAP, setup, vol, opts)
        assert d.verdict == verdict
        text = verdict_lines(d, bv, "H100", 1)[3]
        assert "first cheaper at 16.2B tokens/month (49.4% utilization of 1 replica)" in text
        assert "at every volume above 32.4B tokens/month (2 replicas)" in text and where in text
    # with people P = $5,000 at $2.69/GPU-h (R = $1,963.70): n₁ = ⌊5,000 ÷ (4,730.40 − 1,963.70)⌋ + 1 = 2 replicas,
    # V₁ = (2 × 1,963.70 + 5,000) ÷ a = 39,677,333 requests, inside (c, 2c] = (21,024,000, 42,048,000]
    people = SelfHostSetup(RUNPOD, 1, None, 0.25, 20_000.0, max_utilization=0.8)
    bp = break_even_volume(CAP, people, a)
    assert bp["first_cheaper_replicas"] == 2 and bp["first_cheaper_requests_per_month"] == pytest.approx(
        (2 * 1963.7 + 5000) / a)


def test_the_break_even_is_priced_on_the_bought_bill_when_the_verdict_compares_it():
    # 10⁸ requests/month, 5 replicas: bought at $30,000 per GPU over 36 months = $833.33 a GPU-month (+ power at the
    # load, no hosting) is below the $1,963.70 rented; the break-even is priced on the bought GPU-hour, and says so
    from kvledger.ledgers.breakeven import break_even_volume
    from kvledger.ledgers.decision_notes import verdict_lines
    from kvledger.ledgers.self_host_month import priced_as_bought

    vol = resolve_volume(MonthlyVolume(requests=1e8), CAP)
    opts, _ = api_options([(TOGETHER_8B, True, False)], ApiMix(), vol)
    setup = SelfHostSetup(RUNPOD, 1, None, max_utilization=0.8)
    d = decide(CAP, setup, vol, opts, buy=HostBill(gpu_capex_usd=30_000), power=GpuPower(700.0, 0.0, "test"))
    assert d.buy.total_usd < d.self_host.total_usd
    a = 1250 * 0.18 / 1e6
    bought, packing = priced_as_bought(d, setup)
    # a bought GPU-hour: ($833.33 + 700 W × load × PUE 1.3 × 730 h ÷ 1000 × $0.12/kWh) ÷ 730 h (0 W idle)
    load = d.realized_utilization
    assert bought.gpu.usd_per_gpu_hour == pytest.approx((30_000 / 36 + 0.7 * load * 1.3 * 730 * 0.12) / 730)
    assert packing.replicas == 5 and packing.idle_gpus == 0
    line = verdict_lines(d, break_even_volume(CAP, bought, a), "H100", 1)[3]
    assert line.startswith("  break-even (bought GPUs, as the verdict): ")
    assert "window" not in line and "gap" not in line


def test_the_break_even_utilization_at_a_volume_shares_the_people_line_among_its_replicas():
    # fresh-user trial: at 800B tokens/month the verdict was self-host ($41,609.50 vs $44,883.82) while the factor row
    # said "break-even at 215%: below break-even, the API is cheaper" — u* charged the people line to one replica.
    # 10 good req/s a replica, a = $0.000225 a request, R = $1,963.70 (RunPod H100), P = 0.25 × $20,000 = $5,000:
    # one replica: u* = (1,963.70 + 5,000) ÷ (10 × 3600 × 730 × 0.000225) = 6,963.70 ÷ 5,913 = 117.8% (unreachable);
    # 17 replicas: (17 × 1,963.70 + 5,000) ÷ (17 × 5,913) = 38,382.90 ÷ 100,521 = 38.2%.
    from kvledger.ledgers.breakeven import break_even_utilization

    people = SelfHostSetup(RUNPOD, 1, None, 0.25, 20_000.0, max_utilization=0.8)
    a = 1250 * 0.18 / 1e6
    one = break_even_utilization(CAP, people, a)
    assert one["required_utilization"] == pytest.approx(6963.7 / 5913.0) and not one["reachable"]
    assert one["utilization"] is None and one["replicas"] == 1  # 117.8%: no load reaches it
    many = break_even_utilization(CAP, people, a, 17)
    assert many["utilization"] == pytest.approx(38_382.9 / 100_521.0) and many["reachable"]
    assert many["formula"].startswith("(17 replicas × replica + people USD/month)")


def test_a_volume_is_sized_on_the_slo_capacity_and_priced_on_the_good_share_at_it():
    # SLO capacity 21 req/s offered, 18.158 good req/s there (the fresh-user trial's Llama-3.1-8B / H100 / azure-conv
    # under ttft ≤ 500 ms, tpot ≤ 50 ms at 90%); 1,000 in + 250 out tokens per good request.
    # 30 req/s offered = 30 × 3600 × 730 = 78,840,000 requests/month at ≤ 80%:
    # replicas = ⌈30 ÷ (21 × 0.8)⌉ = ⌈1.786⌉ = 2, realized utilization 30 ÷ (2 × 21) = 71.4%;
    # the old rule, ⌈30 ÷ (18.158 × 0.8)⌉ = ⌈2.065⌉ = 3, applied the 90% target twice.
    from kvledger.ledgers.breakeven import break_even_utilization, break_even_volume
    from kvledger.ledgers.cost import self_host_unit_ledgers

    g = 18.158
    cap = Capacity(g, g * 1000, g * 250, g * 1000, g * 250, 0.4, "given", False, slo_capacity_req_per_s=21.0)
    vol = resolve_volume(MonthlyVolume(requests=30 * 3600 * 730), cap)
    opts, _ = api_options([(TOGETHER_8B, True, False)], ApiMix(), vol)
    setup = SelfHostSetup(RUNPOD, 1, None, max_utilization=0.8)
    d = decide(cap, setup, vol, opts)
    assert (d.replicas, d.realized_utilization) == (2, pytest.approx(30 / 42))
    assert d.sizing == ("replicas = ⌈30 req/s offered (the monthly mean: --peak-to-mean 1, flat traffic, the default) "
                        "÷ (21 req/s SLO capacity × 80%)⌉ = 2; "
                        "utilization = 30 req/s mean ÷ (2 × 21) = 71.4%")
    assert d.self_host.total_usd == pytest.approx(2 * 2.69 * 730)  # rented, no people line
    # good output tokens at that load: u × 18.158 × 250 = offered 15 req/s a replica × (18.158 ÷ 21) good × 250;
    # GPU-h per 1M output tokens = 10⁶ ÷ (18.158 × 250 × 3600 × 0.714) × (1 − 0.4)
    _, out = self_host_unit_ledgers(cap, setup, utilization=30 / 42)
    assert out.items[0].quantity == pytest.approx(1e6 / (15 * (g / 21) * 250 * 3600) * 0.6)
    # break-even: a replica takes c = 21 × 3600 × 730 × 0.8 = 44,150,400 requests a month at the cap; u* is on the
    # same basis, (R + P) ÷ (21 × 3600 × 730 × a), so V₁ = u* × 21 × 3600 × 730 for one replica
    a = 1e-3
    bv, bu = break_even_volume(cap, setup, a), break_even_utilization(cap, setup, a)
    assert bv["capacity_requests_per_month_per_unit"] == pytest.approx(44_150_400)
    assert bu["utilization"] == pytest.approx(2.69 * 730 / (21 * 3600 * 730 * a))
    assert bv["first_cheaper_requests_per_month"] == pytest.approx(bu["utilization"] * 21 * 3600 * 730)


def test_the_price_caveat_is_of_the_row_the_replicas_are_billed_on():
    # the replicas may be billed on a whole instance of another row than the cheapest per-GPU one (fresh-user trial:
    # Nebius's 8-GPU instance, high confidence, billed while its medium-confidence 1-GPU row was cited): the caveat
    # is of the billed row
    from kvledger.ledgers.decision import _billed_row_caveat
    from kvledger.ledgers.instances import GpuRate

    rests = ["step cost uncalibrated (roofline)"]  # rests_on_for no longer guesses the row before the packing
    high = GpuRate(2.95, "Nebius H100 (8gpu)", "s", "2026", "high", 8)
    medium = GpuRate(3.10, "Other H100 (8gpu)", "s", "2026", "medium", 8)
    assert _billed_row_caveat(rests, high) == ["step cost uncalibrated (roofline)"]
    assert _billed_row_caveat(rests, medium) == ["GPU price row: medium confidence (Other H100 (8gpu))",
                                                  "step cost uncalibrated (roofline)"]
    assert _billed_row_caveat(["step cost uncalibrated (roofline)"], medium)[0].startswith("GPU price row: medium")
