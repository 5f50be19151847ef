"""``search`` takes ``cost``'s ``--peak-to-mean`` and ``--monthly-input-tokens``/``--monthly-output-tokens`` with the
same meaning: replicas sized for the busiest hour (the mean rate × the ratio), the month priced at the mean, a volume
given as input and output tokens sized for max(input ÷ mean input, output ÷ mean output) requests and its per-token
figures spread over the tokens given. Before, search sized flat only (a fresh-user trial: 10 replicas where cost
sized 29 for the same volume with --peak-to-mean 3). The case is tests/analyses/test_cost_search_agree.py's: the
SLO capacity both find is 14.5 req/s, azure-conv's first 200 requests average 903.475 prompt + 235.25 output tokens.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvledger.cli.main import app
from kvledger.errors import InputError

runner = CliRunner()
CASE = ["meta-llama/Llama-3.1-8B", "--gpu", "H100", "--num-requests", "200", "--slo", "ttft=500ms,tpot=50ms",
        "--gpu-provider", "Lambda", "--json"]
MONTH_S = 730 * 3600


def _both(volume: list[str]) -> tuple[dict, dict, dict]:
    res_c = runner.invoke(app, ["cost", "--simulate", *CASE, *volume])
    assert res_c.exit_code == 0, res_c.output
    res_s = runner.invoke(app, ["search", *CASE, *volume, "--tp", "1"])
    assert res_s.exit_code == 0, res_s.output
    s = json.loads(res_s.stdout)
    return json.loads(res_c.stdout), s["candidates"][0], s


def _rent(cost: dict) -> float:
    return sum(i["amount_usd"] for i in cost["decision"]["self_host_rent"]["items"] if i["unit"] == "GPU-hour")


def test_peak_sizes_for_the_busiest_hour_as_cost_does():
    cost, cand, _ = _both(["--monthly-tokens", "2e11", "--peak-to-mean", "3"])
    # 2e11 ÷ 1,138.725 tokens a request ÷ 2,628,000 s = 66.8322 req/s mean; the peak 3 × 66.8322 = 200.497 req/s ÷
    # (14.5 × 0.8) = 17.28 → 18 replicas (flat: 6). Lambda's cheapest packing of 18 one-GPU replicas: 2 gpu_8x
    # ($31.92/h) + 2 gpu_1x ($4.29/h) = $72.42/h × 730 h = $52,866.60 a month
    mean = 2e11 / (903.475 + 235.25) / MONTH_S
    assert cost["decision"]["replicas"] == cand["sizing"]["replicas"] == 18
    assert _rent(cost) == pytest.approx(cand["sizing"]["rental_usd_per_month"]) == pytest.approx(72.42 * 730)
    assert cand["sizing"]["peak_rate_req_per_s"] == pytest.approx(3 * mean)
    # priced at the mean: 66.8322 ÷ (18 × 14.5) = 25.6 % realized, each replica's run at 66.8322 ÷ 18 = 3.713 req/s
    assert cand["sizing"]["realized_utilization"] == pytest.approx(mean / (18 * 14.5))
    assert cand["capacity"]["at_volume_load"]["rate_req_per_s"] == pytest.approx(mean / 18)
    assert cand["cost"]["usd_per_mtok_output"] == pytest.approx(
        cost["ledgers"]["self_host_output"]["items"][0]["amount_usd"], rel=1e-12)
    assert "200.5 req/s offered at the peak (3 × the 66.83 req/s mean)" in cand["sizing"]["how"]


def test_input_and_output_volumes_size_and_price_as_cost_does():
    cost, cand, s = _both(["--monthly-input-tokens", "1.5e11", "--monthly-output-tokens", "6e10",
                           "--peak-to-mean", "3"])
    # requests = max(1.5e11 ÷ 903.475, 6e10 ÷ 235.25) = max(166.03 M, 255.05 M) = 255,047,821 a month = 97.05 req/s;
    # × 3 = 291.15 ÷ 11.6 = 25.1 → 26 replicas: 3 gpu_8x + 2 gpu_1x = $104.34/h × 730 h = $76,168.20
    assert cost["decision"]["requests_per_month"] == pytest.approx(6e10 / 235.25)
    assert cost["decision"]["replicas"] == cand["sizing"]["replicas"] == 26
    assert _rent(cost) == pytest.approx(cand["sizing"]["rental_usd_per_month"]) == pytest.approx(104.34 * 730)
    assert cand["sizing"]["rate_req_per_s"] == pytest.approx(6e10 / 235.25 / MONTH_S)
    # the API priced on the tokens given, DeepInfra's $0.02 in / $0.03 out per 1M: 3,000 + 1,800 = $4,800 a month
    assert s["api"]["monthly_input_tokens"] == 1.5e11 and s["api"]["monthly_output_tokens"] == 6e10
    assert s["api"]["usd_per_month"] == pytest.approx(cost["decision"]["api_usd_per_month"]) == pytest.approx(4800)
    # the per-token ledgers spread the bill over the tokens given (input does not bind: × 1.5e11 ÷ 230.4e9 sized)
    for kind in ("input", "output"):
        assert cand["cost"][f"usd_per_mtok_{kind}"] == pytest.approx(
            cost["ledgers"][f"self_host_{kind}"]["items"][0]["amount_usd"], rel=1e-12)


@pytest.mark.parametrize("extra, message", [
    (["--monthly-tokens", "2e11", "--peak-to-mean", "0.5"], "--peak-to-mean 0.5 is out of range"),
    (["--monthly-input-tokens", "1e11"], "--monthly-input-tokens and --monthly-output-tokens go together"),
    (["--monthly-tokens", "2e11", "--monthly-input-tokens", "1e11", "--monthly-output-tokens", "1e10"], "not both"),
    (["--utilization", "0.5", "--peak-to-mean", "3"], "--peak-to-mean 3 sizes replicas for the busiest hour"),
    (["--utilization", "0.5", "--monthly-input-tokens", "1e11", "--monthly-output-tokens", "1e10"],
     "--utilization 0.5 cannot be given with a load"),
])
def test_bad_volume_is_refused_before_any_work(extra, message):
    res = runner.invoke(app, ["search", *CASE, "--tp", "1", *extra])
    assert isinstance(res.exception, InputError) and message in str(res.exception), res.output


def test_search_ranks_api_rows_at_the_volumes_split_as_cost_does():
    # 1B input and 20B output tokens a month of DeepSeek-V3: the row cheapest for the workload's mean request (903 in,
    # 235 out: input-heavy) is not the row cheapest for an output-heavy volume. search priced rows at the mean request
    # and named DeepSeek's own row; at the split (what cost bills) each row's bill is in × p_in + out × p_out, and
    # search now names the row whose bill is the least (a review found the difference)
    from kvledger.analyses.search.api_side import api_side
    from kvledger.analyses.search.spec import SearchSpec
    from kvledger.catalog.api_match import same_model_rows
    from kvledger.ledgers.api_cost import ApiMix, api_ledger

    spec = SearchSpec(model="deepseek-ai/DeepSeek-V3", slo="ttft=1s", monthly_input_tokens=1e9,
                      monthly_output_tokens=2e10)
    got = api_side(spec, [{"workload": {"prompt_tokens_mean": 903.0, "output_tokens_mean": 235.0}}])
    bills = {r.key: api_ledger(r, ApiMix(), 1e3, 2e4, "b", "USD").total_usd for r in same_model_rows(spec.model)}
    assert got["key"] == min(bills, key=bills.get) and got["usd_per_month"] == pytest.approx(min(bills.values()))
    assert "for the volume's input and output tokens after the mix" in " ".join(got["notes"])
