"""The people line per token is the deployment's monthly people cost over the good tokens it pays for: the volume's
(its replicas × one replica's), not one replica's, so the per-token ledgers add up to the monthly bill (docs/cost.md
§5); and an assumed --utilization is refused with a volume (§10)."""

from __future__ import annotations

import pytest

from kvledger.catalog.api_match import find_api_price
from kvledger.errors import InputError
from kvledger.ledgers.api_cost import ApiMix
from kvledger.ledgers.cost import GpuRate, SelfHostSetup
from kvledger.ledgers.cost_summary import DecisionFactors, MonthlyVolume, build_cost_report
from kvledger.ledgers.goodput import goodput
from kvledger.ledgers.slo import parse_slo
from kvledger.records import RequestRecord, RunMetadata, RunRecords

# 0.25 engineer-months at $20,000 = $5,000 a month; $2/GPU-h given (bills the GPUs used: no idle instance GPUs)
PEOPLE = dict(engineer_months_per_month=0.25, engineer_usd_per_month=20_000.0)


def _run() -> RunRecords:
    """DistServe's 10 → 3 example: 100 requests in 10 s, 30 with TTFT ≤ 200 ms; 1000 in / 100 out tokens each, so
    goodput 3 req/s = 3,000 good input and 300 good output tok/s on 1 GPU."""
    recs = [RequestRecord(str(i), i * 0.1, 1000, 100, i * 0.1 + (0.1 if i < 30 else 0.4),
                          i * 0.1 + 1.0) for i in range(100)]
    return RunRecords(recs, RunMetadata("distserve-example", "test", duration_s=10.0, num_gpus=1))


def _report(utilization: float | None, volume: MonthlyVolume | None):
    run = _run()
    setup = SelfHostSetup(GpuRate.given(2.0, "H100"), 1, utilization, prefill_share=0.2, **PEOPLE)
    return build_cost_report(run, goodput(run, parse_slo("ttft=200ms")), setup, find_api_price("OpenAI:gpt-4.1"),
                             ApiMix(), DecisionFactors(), volume)


def _people(ledger):
    return next(i for i in ledger.items if i.name.startswith("people"))


@pytest.mark.parametrize("requests,replicas,usd_in,usd_out", [
    # 10⁷ requests a month = 3.805 req/s; ⌈3.805 ÷ (3 × 0.8)⌉ = 2 replicas at u = 3.805 ÷ 6 = 63.4%. One replica's good
    # input tokens = u × 3,000 × 3600 × 730 = 10⁷ × 1,000 ÷ 2 = 5e9 a month; the volume's 2 × 5e9 = 1e10 (output 1e9):
    # people $5,000 × 0.2 ÷ 1e10 × 10⁶ = $0.10 per 1M input, $5,000 × 0.8 ÷ 1e9 × 10⁶ = $4.00 per 1M output (one
    # replica's tokens charged $0.20 and $8.00: the people line twice)
    (1e7, 2, 0.10, 4.00),
    # 2 × 10⁷: 7.61 req/s ÷ 2.4 → 4 replicas; the same volume-wide share over twice the tokens: $0.05 and $2.00
    # (one replica's tokens charged $0.20 and $8.00 again: four times the people line)
    (2e7, 4, 0.05, 2.00),
])
def test_people_per_token_is_the_deployment_s_over_the_volume_s_good_tokens(requests, replicas, usd_in, usd_out):
    rep = _report(None, MonthlyVolume(requests=requests))
    assert rep.decision.replicas == replicas
    p_in, p_out = _people(rep.self_host_input), _people(rep.self_host_output)
    assert (p_in.amount_usd, p_out.amount_usd) == pytest.approx((usd_in, usd_out))
    good_in, good_out = requests * 1000 / 1e6, requests * 100 / 1e6  # Mtok; a measured file's volume counts as good
    # the per-token ledgers × the volume's good tokens = the monthly bill: people in full, once ($5,000), and the
    # replicas' GPUs (replicas × 730 h × $2)
    assert p_in.amount_usd * good_in + p_out.amount_usd * good_out == pytest.approx(5_000.0)
    bill = rep.decision.self_host_usd
    assert bill == pytest.approx(replicas * 730 * 2.0 + 5_000.0)
    assert rep.self_host_input.total_usd * good_in + rep.self_host_output.total_usd * good_out == pytest.approx(bill)
    # the per-request figure agrees with the secondary line's bill ÷ good requests
    assert rep.inputs["self_host_usd_per_request"] * requests == pytest.approx(bill)
    # the quantity says what it is divided by
    per = requests * 1000 / replicas
    assert p_in.note == ("0.25 engineer-months/month (the deployment's, charged once a month as in the monthly bill) "
                         f"over the volume's {requests * 1000:,.0f} good input tokens/month ({replicas} replicas × "
                         f"{per:,.0f}, one replica's at utilization {rep.decision.realized_utilization:.2f}), × "
                         "prefill share 0.200 (the GPU time's split)")


def test_without_a_volume_the_people_line_is_over_the_one_replica_priced():
    rep = _report(0.5, None)
    p_in = _people(rep.self_host_input)
    # 3,000 good input tok/s × 3600 × 730 × 0.5 = 3,942,000,000 a month; $5,000 × 0.2 ÷ 3.942e9 × 10⁶ = $0.253678
    assert p_in.amount_usd == pytest.approx(5_000 * 0.2 / 3.942e9 * 1e6)
    assert p_in.note.endswith("over the one replica priced: its 3,942,000,000 good input tokens/month at utilization "
                              "0.50 (no volume given), × prefill share 0.200 (the GPU time's split)")


def test_an_assumed_utilization_with_a_volume_is_refused():
    # the volume sets 2 replicas at 63.4%; a 0.9 would have priced the tokens at a load the bill's replicas do not carry
    with pytest.raises(InputError, match=r"^--utilization 0.9 cannot be given with a monthly volume") as err:
        _report(0.9, MonthlyVolume(requests=1e7))
    assert "Drop --utilization to price the volume at its realized utilization" in str(err.value)
    assert "--max-utilization caps the utilization each replica is sized for" in str(err.value)
    assert "or drop the volume to price one replica at the utilization given" in str(err.value)
