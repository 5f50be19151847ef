"""A volume given as separate input and output tokens: the break-even is at the user's own split (scaling it), not
the run's mix, so it cannot contradict the verdict; and the self-hosted USD per 1M tokens are per token the user
stated, so input × price_in + output × price_out is the self-hosted bill (the GPU time's prefill/decode split of the
bill kept, spread over the tokens given rather than over the tokens of the requests the replicas are sized for)."""

from __future__ import annotations

import pytest

from kvledger.catalog.api_match import find_api_price
from kvledger.ledgers.api_cost import ApiMix
from kvledger.ledgers.cost import GpuRate, SelfHostSetup
from kvledger.ledgers.cost_summary import DecisionFactors, DecisionInputs, MonthlyVolume, build_cost_report
from kvledger.ledgers.goodput import goodput
from kvledger.ledgers.self_host_only import build_self_host_report
from kvledger.ledgers.slo import parse_slo
from kvledger.records import RequestRecord, RunMetadata, RunRecords

# $2/GPU-h given (a per-GPU row: the rental is linear, n × $1,460 a month); people 0.25 × $20,000 = $5,000 a month
PEOPLE = dict(engineer_months_per_month=0.25, engineer_usd_per_month=20_000.0)
HOUR = 730 * 3600


def _run() -> RunRecords:
    """100 requests in 10 s, 30 with TTFT ≤ 200 ms; 1,000 in / 100 out tokens each: goodput 3 req/s (3,000 good input
    and 300 good output tok/s) on 1 GPU; the run's mix is 1,000 in / 100 out per request (91% input)."""
    recs = [RequestRecord(str(i), i * 0.1, 1000, 100, i * 0.1 + (0.1 if i < 30 else 0.4),
                          i * 0.1 + 1.0) for i in range(100)]
    return RunRecords(recs, RunMetadata("split-example", "test", duration_s=10.0, num_gpus=1))


def _setup() -> SelfHostSetup:
    return SelfHostSetup(GpuRate.given(2.0, "H100"), 1, None, prefill_share=0.2, **PEOPLE)


def _report(volume: MonthlyVolume):
    run = _run()
    # OpenAI:gpt-4.1 list price: $2 per 1M input, $8 per 1M output tokens
    return build_cost_report(run, goodput(run, parse_slo("ttft=200ms")), _setup(), find_api_price("OpenAI:gpt-4.1"),
                             ApiMix(), DecisionFactors(), volume)


def test_break_even_is_at_the_user_s_split_and_agrees_with_the_verdict():
    # 2.6e9 input + 1.3e8 output tokens (95% input; the run's mix is 91%): max(2.6e9 ÷ 1,000, 1.3e8 ÷ 100) = 2.6e6
    # requests, 0.989 req/s ÷ (3 × 0.8) → 1 replica: $1,460 + $5,000 = $6,460. API: 2,600 × $2 + 130 × $8 = $6,240:
    # the API. At this split the API costs $6,240 ÷ 2,730 Mtok = $2.2857 per 1M tokens, so one replica breaks even at
    # $6,460 ÷ $2.2857 = 2,826.25 Mtok (2,691,666.67 requests of 1,000 in / 50 out at $0.0024 a request). At the run's
    # mix ($0.0028 a request of 1,000 in / 100 out) it was $6,460 ÷ $0.0028 × 1,100 = 2,537.9 Mtok, below the 2,730
    # Mtok the API wins at: the contradiction
    rep = _report(MonthlyVolume(input_tokens=2.6e9, output_tokens=1.3e8))
    d, bv = rep.decision, rep.break_even_volume
    assert (d.replicas, d.verdict) == (1, "API")
    assert (d.self_host_usd, d.primary.bill.total_usd) == pytest.approx((6_460.0, 6_240.0))
    assert bv["api_usd_per_request"] == pytest.approx(6_240 / 2.6e6)  # $0.0024
    assert bv["requests_per_month"] == pytest.approx(6_460 / 0.0024)
    assert bv["input_tokens_per_month"] == pytest.approx(6_460 / 0.0024 * 1_000)
    assert bv["output_tokens_per_month"] == pytest.approx(6_460 / 0.0024 * 50)
    total = bv["input_tokens_per_month"] + bv["output_tokens_per_month"]
    assert total == pytest.approx(2.82625e9) and total > 2.73e9  # above the volume the API wins at
    assert bv["mix"] == "at the volume's split, 95% input tokens"
    # u* at the same price: $6,460 ÷ (3 req/s × 3600 × 730 × $0.0024) = 34.14%, above the realized 2.6e6 ÷ 7,884,000
    # = 32.98%: below break-even, as the verdict says
    assert rep.break_even_utilization["utilization"] == pytest.approx(6_460 / (3 * HOUR * 0.0024))
    assert d.realized_utilization == pytest.approx(2.6e6 / (3 * HOUR))
    assert d.realized_utilization < rep.break_even_utilization["utilization"]
    # 2,691,666.67 ÷ 7,884,000 = 34.1% of one replica
    assert rep.headline[3] == ("  break-even: self-hosting is cheaper above 2.83B tokens/month (34.1% utilization of "
                               "one replica) at the volume's split, 95% input tokens")
    # --json carries the same figures
    js = rep.to_dict()["break_even_volume"]
    assert js["input_tokens_per_month"] + js["output_tokens_per_month"] == pytest.approx(2.82625e9)
    assert rep.inputs["api_usd_per_request"] == pytest.approx(0.0024)


def test_one_volume_only_breaks_even_at_the_run_s_mix_and_says_so():
    # 10⁷ requests of the run's mix (1,000 in / 100 out: 1,000 ÷ 1,100 = 91% input): API $0.0028 a request;
    # 2 replicas (3.805 req/s ÷ 2.4). n₁ = ⌊5,000 ÷ (0.0028 × 6,307,200 − 1,460)⌋ + 1 = 1: V* = $6,460 ÷ $0.0028
    # = 2,307,142.9 requests × 1,100 = 2.54B tokens
    rep = _report(MonthlyVolume(requests=1e7))
    bv = rep.break_even_volume
    assert bv["mix"] == "at the run's mix, 91% input tokens"
    assert bv["input_tokens_per_month"] + bv["output_tokens_per_month"] == pytest.approx(6_460 / 0.0028 * 1_100)
    assert rep.headline[3].endswith("above 2.54B tokens/month (29.3% utilization of one replica) at the run's mix, "
                                    "91% input tokens")


def test_per_token_prices_multiply_back_to_the_bill_at_the_user_s_tokens():
    # 8e9 input + 4e8 output tokens: max(8e9 ÷ 1,000, 4e8 ÷ 100) = 8e6 requests (input binds), 3.044 req/s ÷ 2.4 →
    # 2 replicas: bill 2 × 730 h × $2 + $5,000 = $7,920. The replicas serve 8e6 × 100 = 8e8 output tokens but the
    # volume has 4e8 (0.5 of them). Bill split by the GPU time: input 0.2 × $7,920 = $1,584 over 8,000 Mtok =
    # $0.198 per 1M; output 0.8 × $7,920 = $6,336 over the 400 Mtok given = $15.84 per 1M (over the 800 Mtok sized
    # for it was $7.92, and 8,000 × 0.198 + 400 × 7.92 = $4,752, not the bill)
    rep = _report(MonthlyVolume(input_tokens=8e9, output_tokens=4e8))
    d = rep.decision
    assert d.replicas == 2 and d.self_host_usd == pytest.approx(7_920.0)
    t = rep.totals()
    assert (t["self_host_usd_per_mtok_input"], t["self_host_usd_per_mtok_output"]) == pytest.approx((0.198, 15.84))
    assert 8_000 * t["self_host_usd_per_mtok_input"] + 400 * t["self_host_usd_per_mtok_output"] == pytest.approx(
        d.self_host_usd)
    # the GPU rental's decode share: 1 GPU × 10⁶ ÷ (300 good tok/s × 3600 × u 0.507 × 0.5) × 0.8 = 2.9197 GPU-h,
    # × $2 = $5.84 = 0.8 × $2,920 ÷ 400 Mtok; the note says what the 0.5 is
    gpu = rep.self_host_output.items[0]
    assert gpu.amount_usd == pytest.approx(0.8 * 2_920 / 400)
    assert ("× 0.5000, the volume's 400,000,000 output tokens ÷ the 800,000,000 of the requests its replicas are "
            "sized for") in gpu.note
    people = next(i for i in rep.self_host_output.items if i.name.startswith("people"))
    assert "over the volume's 400,000,000 good output tokens/month" in people.note
    assert "× 0.5000" not in rep.self_host_input.items[0].note  # input binds: its tokens are those sized for
    # the JSON's totals are the same figures; per request of the volume: $7,920 ÷ 8e6 = $0.00099
    assert rep.to_dict()["totals"]["self_host_usd_per_mtok_output"] == pytest.approx(15.84)
    assert rep.inputs["self_host_usd_per_request"] == pytest.approx(7_920 / 8e6)


def test_self_host_only_report_prices_the_user_s_tokens_too():
    run = _run()
    rep = build_self_host_report(run, goodput(run, parse_slo("ttft=200ms")), _setup(),
                                 MonthlyVolume(input_tokens=8e9, output_tokens=4e8), inputs=DecisionInputs())
    # as above: $0.198 and $15.84 per 1M, 8,000 × 0.198 + 400 × 15.84 = $7,920, the bill
    assert (rep.self_host_input.total_usd, rep.self_host_output.total_usd) == pytest.approx((0.198, 15.84))
    assert rep.month.self_host_usd == pytest.approx(7_920.0)


def test_a_kind_given_as_zero_is_priced_at_the_run_s_mix_not_divided_by_zero():
    # 2.6e9 input and 0 output tokens: max(2.6e9 ÷ 1,000, 0 ÷ 100) = 2.6e6 requests, one replica, $6,460 a month as
    # above. No output token to price per token: the volume is not a split (it divided the decode share of the bill by
    # 0 output tokens: ZeroDivisionError), so the per-token ledgers are at the run's mix (3,000 input and 300 output
    # good tok/s per replica, 0.2 of the GPU time prefill) and the break-even at its 91% input
    rep = _report(MonthlyVolume(input_tokens=2.6e9, output_tokens=0.0))
    assert rep.decision.replicas == 1 and rep.decision.self_host_usd == pytest.approx(6460.0)
    assert rep.break_even_volume["mix"] == "at the run's mix, 91% input tokens"
    assert "one kind given as 0" in rep.decision.volume.how
