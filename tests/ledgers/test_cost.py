"""The cost ledger, with the arithmetic in comments: goodput-priced self-hosting, the API mix, break-even and monthly
bills."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvledger.catalog.api_match import find_api_price
from kvledger.catalog.prices import find_gpu_price
from kvledger.errors import InputError, NoAnswerError
from kvledger.evidence import read_run
from kvledger.ledgers.api_cost import (
    ApiMix,
    api_ledger,
    api_price_per_mtok,
    bill_is_upper_bound,
    discounts_words,
    is_upper_bound,
)
from kvledger.ledgers.breakeven import break_even_volume
from kvledger.ledgers.cost import Capacity, GpuRate, SelfHostSetup, capacity_from, self_host_unit_ledgers
from kvledger.ledgers.cost_summary import DecisionFactors, MonthlyVolume, build_cost_report
from kvledger.ledgers.goodput import goodput
from kvledger.ledgers.slo import parse_slo
from kvledger.records import RequestRecord, RunMetadata, RunRecords

DATA = Path(__file__).resolve().parents[1] / "evidence" / "data"
# the 8-GPU preset, $2.95 per GPU-hour (Nebius also sells a 1-GPU one at the same rate)
NEBIUS_H100 = GpuRate.from_catalog(find_gpu_price("nvidia_h100_sxm", "Nebius", "gpu-h100-sxm 8gpu"))


def distserve_run() -> RunRecords:
    """DistServe's 10 → 3 example as records: 100 requests in 10 s (10 req/s), 30 with TTFT ≤ 200 ms; 1000 in / 100 out
    tokens each."""
    recs = [RequestRecord(str(i), i * 0.1, 1000, 100, i * 0.1 + (0.1 if i < 30 else 0.4),
                          i * 0.1 + 1.0) for i in range(100)]
    return RunRecords(recs, RunMetadata("distserve-example", "test", duration_s=10.0, num_gpus=1))


def test_self_host_cost_by_goodput_is_3_3x_the_sticker():
    run = distserve_run()
    gp = goodput(run, parse_slo("ttft=200ms"))
    setup = SelfHostSetup(NEBIUS_H100, num_gpus=1, utilization=0.5, prefill_share=0.2)
    cap = capacity_from(run, gp, setup.prefill_share)
    # goodput 3 req/s → 3000 good input tok/s, 300 good output tok/s
    assert (cap.good_input_tok_per_s, cap.good_output_tok_per_s) == pytest.approx((3000.0, 300.0))
    sh_in, sh_out = self_host_unit_ledgers(cap, setup)
    # output: 1 GPU × 10⁶ / (300 tok/s × 3600 s/h × 0.5) × (1 − 0.2) = 1.481481 GPU-h × $2.95 = $4.370370 per 1M
    (gpu_out,) = sh_out.items
    assert gpu_out.quantity == pytest.approx(1e6 / (300 * 3600 * 0.5) * 0.8)
    assert sh_out.total_usd == pytest.approx(4.370370, rel=1e-6)
    # input: 10⁶ / (3000 × 3600 × 0.5) × 0.2 = 0.037037 GPU-h × $2.95 = $0.109259 per 1M
    assert sh_in.total_usd == pytest.approx(0.109259, rel=1e-5)
    # priced by throughput (10 req/s → 1000 output tok/s) the same GPU costs $1.311111 per 1M output: 3.33× less
    thr = Capacity(3.0, 10000.0, 1000.0, 0, 0, 0.2, "given", False)
    assert sh_out.total_usd / self_host_unit_ledgers(thr, setup)[1].total_usd == pytest.approx(10 / 3)


def test_api_mix_gpt41_batch_and_cache():
    price = find_api_price("OpenAI:gpt-4.1")  # $2.00 in, $0.50 cached, $8.00 out, batch 50 % off
    mix = ApiMix(batch_share=0.5, cache_hit_rate=0.5)
    ledger = api_ledger(price, mix, 1.0, 0.0, "in", "USD per 1M input tokens")
    # 0.25 Mtok × $2 + 0.25 × $1 (batch) + 0.25 × $0.50 (cache) + 0.25 × $0.25 (cache, batch) = $0.9375
    assert [round(i.amount_usd, 6) for i in ledger.items] == [0.5, 0.25, 0.125, 0.0625]
    assert ledger.total_usd == pytest.approx(0.9375) == pytest.approx(sum(i.amount_usd for i in ledger.items))
    assert all(i.as_of == "2025-07-04" and "genai-prices" in i.source for i in ledger.items)
    # output: 0.5 × $8 + 0.5 × $4 = $6
    assert api_price_per_mtok(price, mix)["output"] == pytest.approx(6.0)


def test_api_cache_writes_anthropic_and_openai():
    sonnet = find_api_price("claude-sonnet-4.5")  # $3 in, $0.30 cache read, $3.75 cache write (1.25×)
    # 0.3 × $3 + 0.6 × $0.30 + 0.1 × $3.75 = 0.9 + 0.18 + 0.375 = $1.455 per 1M input tokens
    assert api_price_per_mtok(sonnet, ApiMix(cache_hit_rate=0.6, cache_write_rate=0.1))["input"] == pytest.approx(1.455)
    gpt = find_api_price("OpenAI:gpt-4.1")  # no write charge: written tokens are ordinary input
    notes = ApiMix(cache_write_rate=0.2).check(gpt)
    assert api_price_per_mtok(gpt, ApiMix(cache_write_rate=0.2))["input"] == pytest.approx(2.0)
    assert "bills no separate cache writes" in notes[0]


def test_no_batch_api_prices_the_batch_share_on_demand():
    # DeepInfra Meta-Llama-3.1-70B-Instruct-Turbo (api_prices.csv): $0.10 in, $0.28 out per Mtok, blank batch discount
    # (no batch API): a 30% batch share is sent on demand, so 2,100 Mtok in and 900 out cost
    # 2,100 × 0.10 + 900 × 0.28 = 210 + 252 = $462, the same as with no batch share
    row = find_api_price("DeepInfra:meta-llama/Meta-Llama-3.1-70B-Instruct-Turbo")
    led = api_ledger(row, ApiMix(batch_share=0.3), 2100.0, 900.0, "x", "y")
    assert led.total_usd == pytest.approx(462.0)
    assert "no batch API" in ApiMix(batch_share=0.3).check(row)[0]
    assert "batch share is priced at the on-demand rate" in discounts_words(led, row)
    assert not is_upper_bound(ApiMix(batch_share=0.3), row)


def test_no_cached_price_bills_cache_reads_as_input_an_upper_bound():
    # Together Llama-3.3-70B-Instruct-Turbo: $0.88 in and out, blank cached-input price: with 30% cache reads every
    # input token is billed at $0.88, so 1 Mtok in + 1 Mtok out = $1.76, an upper bound ("at most")
    row = find_api_price("Together:meta-llama/Llama-3.3-70B-Instruct-Turbo")
    mix = ApiMix(cache_hit_rate=0.3)
    led = api_ledger(row, mix, 1.0, 1.0, "x", "y")
    assert led.total_usd == pytest.approx(1.76)
    assert is_upper_bound(mix, row) and bill_is_upper_bound(led)
    assert "upper bound" in mix.check(row)[0] and "upper bound" in discounts_words(led, row)


@pytest.mark.parametrize("row, mix, match", [
    ("OpenAI:gpt-4.1", ApiMix(cache_hit_rate=0.7, cache_write_rate=0.4), "exceeds 1"),
    ("OpenAI:gpt-4.1", ApiMix(batch_share=1.5), r"^batch_share 1\.5 is out of range; allowed: \[0, 1\] \(fraction\)$"),
])
def test_api_mix_errors(row, mix, match):
    with pytest.raises(InputError, match=match):
        api_ledger(find_api_price(row), mix, 1.0, 1.0, "x", "y")


def test_break_even_utilization_with_and_without_people():
    run = distserve_run()
    gp = goodput(run, parse_slo("ttft=200ms"))
    price, mix = find_api_price("OpenAI:gpt-4.1"), ApiMix()
    rep = build_cost_report(run, gp, SelfHostSetup(NEBIUS_H100, 1, 0.5, prefill_share=0.2), price, mix,
                            DecisionFactors())
    # API per good request: (1000 × $2 + 100 × $8)/10⁶ = $0.0028. The Nebius row (gpu_prices.csv
    # Nebius:gpu-h100-sxm 8gpu, skypilot-catalog nebius vms.csv) sells 8-GPU instances at $2.95/GPU-h, so one replica
    # of 1 GPU is billed a whole instance: 8 × $2.95 × 730 h = $17,228/month (7 GPUs idle); at full load it serves
    # 3 × 3600 × 730 = 7,884,000 good requests → u* = 17,228 / (7,884,000 × 0.0028) = 78.04 %
    bu = rep.break_even_utilization
    assert bu["api_usd_per_request"] == pytest.approx(0.0028)
    assert bu["utilization"] == pytest.approx(17228.0 / (7_884_000 * 0.0028)) and bu["reachable"]
    # a replica's share of full instances stays 1 × $2.95 × 730 h = $2153.50 (the slope of the staircase)
    assert bu["unit_rental_usd_per_month"] == pytest.approx(2153.5)
    assert bu["rental_usd_per_month"] == pytest.approx(17228)
    # with half an engineer at $20,000/month: (17,228 + 10,000) / 22,075.2 = 123.3 %: not reachable with one replica
    rep2 = build_cost_report(run, gp, SelfHostSetup(NEBIUS_H100, 1, 0.5, 0.5, 20000.0, prefill_share=0.2), price, mix,
                             DecisionFactors())
    assert rep2.break_even_utilization["required_utilization"] == pytest.approx(27228 / 22075.2)
    assert rep2.break_even_utilization["utilization"] is None
    # break-even volume: c = 7,884,000 × 0.8 = 6,307,200 requests per replica; a·c = $17,660 > R. One replica's window
    # ((17,228 + 10,000)/0.0028 = 9,724,286, 6,307,200] is empty; two replicas share the same instance ($17,228), so
    # self-hosting is cheaper from 9,724,286 requests/month on, and every further replica up to 8 adds no rental
    bv = rep2.break_even_volume
    assert bv["requests_per_month"] == pytest.approx(27228 / 0.0028) and bv["replicas_at_break_even"] == 2
    assert bv["first_cheaper_replicas"] == 2
    assert bv["output_tokens_per_month"] == pytest.approx(27228 / 0.0028 * 100)


def test_break_even_volume_staircase():
    # R = $1000/replica-month, c = 1000 requests/replica-month, people P = $200, API a = $1.5/request.
    # 2 replicas are cheaper on [1466.7, 2000] but 3 replicas at 2001 cost $3200 > $3001.5: not yet for good.
    # n_full = ⌈(P + a c)/(a c − R)⌉ = ⌈1700/500⌉ = 4; interval n = 3 starts paying at (3R + P)/a = 2133.3.
    cap = Capacity(1000 / (3600 * 730), 1.0, 1.0, 0, 0, 0.5, "given", False)
    setup = SelfHostSetup(GpuRate.given(1000 / 730), 1, 1.0, engineer_months_per_month=0.01,
                          engineer_usd_per_month=20000, max_utilization=1.0)
    bv = break_even_volume(cap, setup, 1.5)
    assert bv["requests_per_month"] == pytest.approx(3200 / 1.5) and bv["replicas_at_break_even"] == 3


def test_never_breaks_even_is_explained():
    cap = Capacity(1000 / (3600 * 730), 1.0, 1.0, 0, 0, 0.5, "given", False)
    bv = break_even_volume(cap, SelfHostSetup(GpuRate.given(1000 / 730), 1, 1.0, max_utilization=0.5), 1.5)
    # at 50 % a replica serves 500 requests worth $750 on the API but costs $1000
    assert bv["requests_per_month"] is None and "never breaks even" in bv["reason"]


def test_monthly_bills_and_itemised_totals():
    run = distserve_run()
    gp = goodput(run, parse_slo("ttft=200ms"))
    rep = build_cost_report(run, gp, SelfHostSetup(NEBIUS_H100, 1, None, prefill_share=0.2),
                            find_api_price("OpenAI:gpt-4.1"),
                            ApiMix(), DecisionFactors(data_sovereignty="required"), MonthlyVolume(requests=1e7))
    m = rep.monthly
    # 10⁷ requests / (730 × 3600 s) = 3.805 req/s; replicas = ⌈3.805 / (3 × 0.8)⌉ = 2; realized 3.805/6 = 63.4 %
    assert m["replicas"] == 2 and m["realized_utilization"] == pytest.approx(1e7 / (730 * 3600) / 6)
    # self-host: 2 replicas × 1 GPU = 2 GPUs on 1 Nebius gpu-h100-sxm 8gpu instance (8 GPUs, 6 idle; gpu_prices.csv
    # Nebius:gpu-h100-sxm 8gpu) = 8 × 730 h × $2.95 = $17,228; API: 10¹⁰ input tok × $2/M + 10⁹ output × $8/M = $28,000
    assert m["self_host"].total_usd == pytest.approx(17228.0) and m["api"].total_usd == pytest.approx(28000.0)
    assert m["self_host"].items[0].note == ("2 replicas × 1 GPU = 2 GPUs on 1 gpu-h100-sxm 8gpu instance (8 GPUs, "
                                            "6 idle) × 730 h")
    assert (rep.decision.packing.instances, rep.decision.packing.idle_gpus) == (1, 6)
    assert m["cheaper"] == "self-host"
    d = rep.to_dict()
    for ledger in d["ledgers"].values():
        assert ledger["total_usd"] == pytest.approx(sum(i["amount_usd"] for i in ledger["items"]))
    assert set(d["totals"]) == {"self_host_usd_per_mtok_input", "self_host_usd_per_mtok_output",
                                "api_usd_per_mtok_input", "api_usd_per_mtok_output"}
    assert [f["factor"] for f in d["factors"]] == ["utilization", "data sovereignty", "model control",
                                                   "team capability"]
    assert "data must stay in your boundary" in d["factors"][1]["effect"]


def test_measured_prefill_share_and_real_run():
    run = read_run(DATA / "aiperf/run1_profile_export.jsonl")
    gp = goodput(run, parse_slo("ttft=4s,tpot=40ms"))  # all 89 completed requests are good
    cap = capacity_from(run, gp, None)
    good = [r for r in run.records if r.ok]
    assert cap.prefill_share == pytest.approx(sum(r.ttft_s for r in good) / sum(r.e2e_s for r in good))
    assert "Σ TTFT ÷ Σ E2E over 89 good requests" in cap.prefill_share_method


@pytest.mark.parametrize("kwargs, match", [
    (dict(utilization=0.0), r"^utilization 0 is out of range; allowed: \(0, 1\] \(share of billed hours spent "
                            r"serving\)$"),
    (dict(utilization=1.2), r"^utilization 1\.2 is out of range; allowed: \(0, 1\] \(share"),
    (dict(utilization=0.5, prefill_share=1.5), r"^prefill_share 1\.5 is out of range; allowed: \[0, 1\] \(fraction\)$"),
    (dict(utilization=0.5, num_gpus=0), r"^num_gpus 0 is out of range; allowed: \[1, 1,048,576\] GPUs$"),
    (dict(utilization=0.5, engineer_usd_per_month=-1.0), r"^engineer_usd_per_month -1 is out of range; allowed: "
                                                         r"\[0, 1,000,000,000\] USD$"),
    (dict(utilization=0.5, engineer_months_per_month=1.0), "without a cost per engineer-month"),
])
def test_setup_errors(kwargs, match):
    setup = SelfHostSetup(NEBIUS_H100, **({"num_gpus": 1} | kwargs))
    with pytest.raises(InputError, match=match):
        build_cost_report(distserve_run(), goodput(distserve_run(), parse_slo("ttft=200ms")), setup,
                          find_api_price("OpenAI:gpt-4.1"), ApiMix(), DecisionFactors())


def test_unusable_runs_are_explained():
    run = distserve_run()
    setup = SelfHostSetup(NEBIUS_H100, 1, 0.5, prefill_share=0.2)
    with pytest.raises(NoAnswerError, match="no request met the SLO"):  # a valid run: no answer (exit 1), not bad input
        capacity_from(run, goodput(run, parse_slo("ttft=1ms")), None)
    run.metadata.duration_s = None
    run.metadata.extra["shared_clock"] = False
    with pytest.raises(InputError, match="run duration not stated"):
        capacity_from(run, goodput(run, parse_slo("ttft=200ms")), setup.prefill_share)
