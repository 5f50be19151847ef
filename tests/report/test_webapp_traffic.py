"""The web app's /api/serving takes cost's batch share, cache-hit rate, peak-to-mean, GPU provider and the volume as
input and output tokens, by field name, checked as the CLI checks the flags and passed to the same functions
(``decision_data.build_report_data`` → ``cost_run.cost_payload``): the same inputs give the bills ``cost --simulate``
gives. Before, the app refused each as "not a field of this request" while its answer said "pass --gpu-provider"."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from kvledger.cli.main import app
from kvledger.report.webapp import create_app

client = TestClient(create_app(), base_url="http://127.0.0.1")
BASE = {"model": "meta-llama/Llama-3.1-8B", "gpu": "H100", "slo": "ttft=500ms,tpot=50ms", "num_requests": 200}
CLI = ["cost", "--simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--slo", "ttft=500ms,tpot=50ms",
       "--num-requests", "200", "--json"]


def _app_and_cli(fields: dict, flags: list[str]) -> tuple[dict, dict]:
    r = client.post("/api/serving", json={**BASE, **fields})
    assert r.status_code == 200, r.text
    res = CliRunner().invoke(app, [*CLI, *flags])
    assert res.exit_code == 0, res.output
    return r.json(), json.loads(res.output)


def _rent(decision: dict) -> float:
    return sum(i["amount_usd"] for i in decision["self_host_rent"]["items"] if i["unit"] == "GPU-hour")


def test_the_traffic_fields_give_cost_simulates_bills():
    d, cost = _app_and_cli(
        {"monthly_tokens": 2e11, "peak_to_mean": 3, "gpu_provider": "Lambda", "batch_share": 0.5,
         "cache_hit_rate": 0.3, "api": "OpenAI:gpt-4.1-mini"},
        ["--monthly-tokens", "2e11", "--peak-to-mean", "3", "--gpu-provider", "Lambda", "--batch-share", "0.5",
         "--cache-hit-rate", "0.3", "--api", "OpenAI:gpt-4.1-mini"])
    dec, cli = d["cost"]["decision"], cost["decision"]
    # 2e11 tokens ÷ 1,138.725 a request (azure-conv's first 200) ÷ 2,628,000 s = 66.83 req/s mean; the peak 3 × 66.83 =
    # 200.5 req/s ÷ (14.5 req/s SLO capacity × 0.8) = 17.3 → 18 replicas, on Lambda's 2 gpu_8x ($31.92/h) + 2 gpu_1x
    # ($4.29/h) = $72.42/h × 730 h = $52,866.60 of GPU rental a month
    assert dec["replicas"] == cli["replicas"] == 18
    assert _rent(dec) == pytest.approx(_rent(cli)) == pytest.approx(72.42 * 730)
    # + the people line, 0.25 engineer-month × $20,000 (the default team) = $57,866.60
    assert dec["self_host_usd_per_month"] == pytest.approx(cli["self_host_usd_per_month"]) == pytest.approx(57866.6)
    # the API bill after the same mix, gpt-4.1-mini at $0.40 in / $0.10 cached in / $1.60 out per 1M, batch half off:
    # 158.68B in (30 % cache reads) and 41.32B out; (1 − 0.5 + 0.5 × 0.5) × (158.68e3 × (0.7 × 0.40 + 0.3 × 0.10) +
    # 41.32e3 × 1.60) = 0.75 × 115,299 = $86,474 a month
    assert dec["api_usd_per_month"] == pytest.approx(cli["api_usd_per_month"]) == pytest.approx(86474, rel=1e-4)
    assert d["cost"]["inputs"]["api_mix"] == cost["inputs"]["api_mix"]
    assert d["cost"]["totals"] == pytest.approx(cost["totals"])
    assert "Lambda" in d["headline"]["gpu_price"] and "--gpu-provider" not in d["headline"]["gpu_price"]


def test_input_and_output_tokens_give_cost_simulates_bills():
    d, cost = _app_and_cli({"monthly_input_tokens": 1.5e11, "monthly_output_tokens": 6e10},
                           ["--monthly-input-tokens", "1.5e11", "--monthly-output-tokens", "6e10"])
    dec, cli = d["cost"]["decision"], cost["decision"]
    # requests = max(1.5e11 ÷ 903.475, 6e10 ÷ 235.25) = 255.05 M a month = 97.05 req/s ÷ 11.6 = 8.4 → 9 replicas, on
    # the cheapest rows of any provider; the API priced on the tokens given
    assert dec["requests_per_month"] == pytest.approx(6e10 / 235.25)
    assert dec["replicas"] == cli["replicas"] == 9
    assert dec["input_tokens_per_month"] == 1.5e11 and dec["output_tokens_per_month"] == 6e10
    assert dec["self_host_usd_per_month"] == pytest.approx(cli["self_host_usd_per_month"])
    assert dec["api_usd_per_month"] == pytest.approx(cli["api_usd_per_month"])


@pytest.mark.parametrize("fields, named", [
    ({"batch_share": 1.5}, "batch_share 1.5 is out of range"),
    ({"cache_hit_rate": -0.1}, "cache_hit_rate -0.1 is out of range"),
    ({"peak_to_mean": 0.5, "monthly_tokens": 2e11}, "peak_to_mean 0.5 is out of range"),
    ({"peak_to_mean": 3}, "peak_to_mean 3 sizes replicas for the busiest hour of a monthly volume"),
    ({"monthly_input_tokens": 1e11}, "monthly_input_tokens is given without monthly_output_tokens"),
    ({"monthly_input_tokens": 1e11, "monthly_output_tokens": 1e10, "monthly_tokens": 2e11}, "are two volumes"),
    ({"gpu_provider": 5}, "gpu_provider must be text"),
    ({"batch_share": "0.5"}, "batch_share"),  # a numeric string is refused: the request is strict
])
def test_a_bad_traffic_field_is_refused_naming_it(fields, named):
    r = client.post("/api/serving", json={**BASE, **fields})
    assert r.status_code == 400 and named in r.json()["error"], r.text
    assert "--" not in r.json()["error"]  # the fields, not the CLI's flags


def test_an_unknown_provider_is_refused_naming_the_field():
    r = client.post("/api/serving", json={**BASE, "monthly_tokens": 2e11, "gpu_provider": "Nowhere"})
    assert r.status_code == 400, r.text
    # the price tables' providers listed (catalog.price_names: checked before any simulation), in the app's words
    assert r.json()["error"] == ("gpu_provider 'Nowhere' (the GPU provider field) is not in the price table (the "
                                 "price tables' providers: AWS, Azure, CoreWeave, GCP, Lambda, Nebius, RunPod, "
                                 "TensorWave)"), r.text
    assert "command-line option" not in r.json()["error"]
