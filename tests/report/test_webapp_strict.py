"""The web API's numbers: the CLI's ranges (kvledger.ranges) in the CLI's words, strict JSON types (no boolean or
numeric string for a number, no unknown field), the engine threaded through the serving simulation, and the
utilization priced said beside the verdict."""

from __future__ import annotations

import json
import re

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from kvledger.cli.main import app
from kvledger.report.webapp import create_app
from kvledger.report.webapp_requests import PlanRequest, ServingRequest

client = TestClient(create_app(), base_url="http://127.0.0.1")
runner = CliRunner()
MODEL = "meta-llama/Llama-3.1-8B"
SERVING = {"model": MODEL, "gpu": "H100", "slo": "ttft=200ms", "api": "OpenAI:gpt-4.1", "num_requests": 50}
COST = ["cost", "--simulate", MODEL, "--gpu", "H100", "--slo", "ttft=200ms", "--api", "OpenAI:gpt-4.1",
        "--num-requests", "50"]


def _cli_error(*args: str) -> str:
    res = runner.invoke(app, [*COST, *args])
    assert res.exit_code != 0
    return str(res.exception) if res.exception and not isinstance(res.exception, SystemExit) else res.output


@pytest.mark.parametrize(("field", "value", "flag"), [
    ("monthly_tokens", 1e300, "--monthly-tokens"),  # the fresh user's case: a 300-digit headline before
    ("utilization", 1.5, "--utilization"),
    ("utilization", 0, "--utilization"),  # cost prices billed hours: 0 would divide by zero
    ("tp", 0, "--tp"),
    ("tp", 2000, "--tp"),
])
def test_serving_numbers_out_of_range_are_refused_in_the_cli_words(field, value, flag):
    r = client.post("/api/serving", json={**SERVING, field: value})
    cli = _cli_error(flag, str(value))
    # the CLI's sentence (flag, value, allowed range), the request's field in place of the flag
    m = re.search(rf"{re.escape(flag)} (\S+ is out of range; allowed: .*)$", cli.strip().splitlines()[-1])
    assert m is not None, cli
    assert r.status_code == 400 and r.json()["error"] == f"{field} {m.group(1)}"


def test_the_exact_range_words():
    r = client.post("/api/serving", json={**SERVING, "monthly_tokens": 1e300})
    assert r.json()["error"] == ("monthly_tokens 1e+300 is out of range; allowed: (0, 1,000,000,000,000,000] "
                                 "tokens/month; 10¹⁵ a month is 380 million tokens/s around the clock, more than any "
                                 "one service serves: a larger volume is a slip, such as an exponent too many")
    r = client.post("/api/serving", json={**SERVING, "utilization": 0})
    assert r.json()["error"] == ("utilization 0 is out of range; allowed: (0, 1] (share of billed hours spent "
                                 "serving)")
    # a volume of nothing: cost --monthly-tokens's own parser, its fix in the app's words
    r = client.post("/api/serving", json={**SERVING, "monthly_tokens": 0})
    # the JSON 0 echoed as sent (the strict float made it 0.0, which nobody typed)
    assert r.status_code == 400 and r.json()["error"] == ("monthly_tokens: '0' is zero; a volume must be more than 0 "
                                                          "(empty the volume field for the per-token ledgers alone)")
    for body in ({"tp": 0}, {"tp": 1025}, {"gpu_memory_utilization": 1.5}):
        r = client.post("/api/plan", json={"model": MODEL, "gpu": "H100", **body})
        (name, value), = body.items()
        allowed = "[1, 1,024] GPUs" if name == "tp" else "(0, 1] (fraction)"
        assert r.status_code == 400 and r.json()["error"] == (
            f"{name} {value:,} is out of range; allowed: {allowed}")


@pytest.mark.parametrize(("path", "field", "value", "words"), [
    ("plan", "tp", True, "must be a whole number"),  # was taken as TP 1 (pydantic's lax mode)
    ("serving", "tp", True, "must be a whole number"),
    ("plan", "tp", "2", "must be a whole number"),
    ("plan", "tp", 2.0, "must be a whole number"),
    ("serving", "num_requests", "60", "must be a whole number"),
    ("serving", "utilization", "0.5", "must be a number"),
    ("serving", "utilization", True, "must be a number"),
    ("serving", "peak_to_mean", "3", "must be a number"),  # a volume's text is read as the CLI reads it: its own test
    ("plan", "gpu_memory_utilization", "0.9", "must be a number"),
    ("plan", "wddm", "true", "must be true or false"),
])
def test_a_boolean_or_a_string_for_a_number_is_a_400(path, field, value, words):
    base = SERVING if path == "serving" else {"model": MODEL, "gpu": "H100"}
    r = client.post(f"/api/{path}", json={**base, field: value})
    assert r.status_code == 400 and r.json()["error"] == f"invalid parameter: {field} {words}, got {value!r}"


def test_an_unknown_field_is_a_400_not_dropped():
    r = client.post("/api/plan", json={"model": MODEL, "gpu": "H100", "tensor_parallel": 2})
    assert r.status_code == 400 and r.json()["error"] == (
        "invalid parameter: tensor_parallel is not a field of this request, got 2 (an unknown field is refused, not "
        "ignored)")
    r = client.post("/api/serving", json={**SERVING, "instance": "gpu_1x_h100_sxm5"})  # cost's --instance: no field
    assert r.status_code == 400 and "instance is not a field of this request" in r.json()["error"]
    # the plan takes no serving field: a GPU price is the serving request's
    r = client.post("/api/plan", json={"model": MODEL, "gpu": "H100", "gpu_usd_per_hour": 1.0})
    assert r.status_code == 400 and "gpu_usd_per_hour is not a field of this request" in r.json()["error"]


def test_an_unknown_engine_is_named_as_the_field():
    r = client.post("/api/plan", json={"model": MODEL, "gpu": "H100", "engine": "tgi"})
    assert r.status_code == 400 and r.json()["error"] == ("invalid setting: the engine field must be one of 'vllm', "
                                                          "'sglang' or 'trtllm', got 'tgi'")


def test_numbers_as_json_numbers_still_answer():
    r = client.post("/api/plan", json={"model": MODEL, "gpu": "H100", "tp": 2, "gpu_memory_utilization": 0.9,
                                       "request_id": 7})
    # 8B at TP 2: 2 × 32 layers × 4 KV heads per GPU × 128 × 2 B = 65,536 B per token per GPU
    assert r.status_code == 200 and r.json()["headline"]["kv_bytes_per_token_per_gpu"] == 65536
    assert (r.json()["request"]["tp"], r.json()["request"]["request_id"]) == (2, 7)


def _page_list(html: str, pattern: str) -> set[str]:
    m = re.search(pattern, html)
    assert m is not None, pattern
    return set(json.loads("[" + m.group(1) + "]"))


def test_the_page_sends_only_fields_the_requests_take_and_numbers_as_numbers():
    html = client.get("/").text
    serving = _page_list(html, r"const SERVING = \[([^\]]*)\]")
    plan = _page_list(html, r"const PLAN = \[([^\]]*)\]")
    numbers = _page_list(html, r"const NUMBERS = new Set\(\[([^\]]*)\]\)")
    assert "engine" in serving and serving <= set(ServingRequest.model_fields)  # the engine too: issue 59
    # the serving panel reads every plan field, the host KV tier too: the plan sizes it and the serving panel runs
    # the capacity's requests with it (report --kv-offloading-size: report_tiers)
    assert plan <= set(PlanRequest.model_fields) and plan <= serving
    assert {"engine_version", "gpu_memory_utilization", "max_num_seqs", "quantization"} <= plan
    # SGLang's fraction and the parallelism beyond TP (test_webapp_sglang_fields)
    assert {"mem_fraction_static", "data_parallel_size", "enable_dp_attention", "attn_dp_size", "ep_size",
            "enable_expert_parallel"} <= plan
    # every int or float field the page has a box for goes as a JSON number, and nothing else does
    numeric = {k for m in (PlanRequest, ServingRequest) for k, f in m.model_fields.items()
               if f.annotation in (int, float, int | None, float | None)}
    assert numbers == numeric & (serving | plan) == {"tp", "utilization", "num_requests", "monthly_tokens",
                                                     "monthly_input_tokens", "monthly_output_tokens", "peak_to_mean",
                                                     "batch_share", "cache_hit_rate", "shared_prefix_tokens",
                                                     "gpu_memory_utilization", "max_num_seqs", "gpu_usd_per_hour",
                                                     "cache_write_rate", "engineer_months_per_month",
                                                     "engineer_usd_per_month", "kv_offloading_size",
                                                     "mem_fraction_static", "data_parallel_size", "attn_dp_size",
                                                     "ep_size"}
    assert "gpu_provider" in serving  # text: a provider of the price table (the choices' providers)


def _capacity(d: dict) -> float:
    return d["simulation"]["capacity_search"]["slo_capacity_req_per_s"]


def test_the_serving_panel_runs_the_engine_chosen():
    vllm = client.post("/api/serving", json=SERVING).json()
    sgl = client.post("/api/serving", json={**SERVING, "engine": "sglang"})
    assert sgl.status_code == 200 and sgl.json()["request"]["engine"] == "sglang"
    res = runner.invoke(app, [*COST, "--policy", "sglang", "--json"])
    assert res.exit_code == 0, res.output
    cli = json.loads(res.stdout)
    # `cost --simulate --policy sglang`'s capacity (SGLang's pool and scheduler), not vLLM's: 14.375 against 15.75
    # req/s (50-request probes: faster ones are too short to show the load, analyses/serving/probe_length.py)
    assert _capacity(sgl.json()["cost"]) == _capacity(cli) == 14.375
    assert _capacity(vllm["cost"]) == 15.75 and sgl.json()["headline"]["sizing_req_per_s"] == 14.375
    r = client.post("/api/serving", json={**SERVING, "engine": "trtllm"})
    assert r.status_code == 400 and r.json()["error"].startswith(
        "engine 'trtllm': capacity and cost are simulated for vllm or sglang only")


def test_the_utilization_priced_is_said_beside_the_verdict():
    default = client.post("/api/serving", json=SERVING).json()
    half = client.post("/api/serving", json={**SERVING, "utilization": 0.5}).json()
    res = runner.invoke(app, [*COST, "--utilization", "0.5", "--json"])
    cli = json.loads(res.stdout)
    # the CLI's secondary line, its flag said as the app's field
    assert half["headline"]["secondary"] == cli["secondary"].replace("(given (--utilization))",
                                                                     "(given: the utilization field)")
    per_request = half["cost"]["inputs"]["self_host_usd_per_request"]
    assert half["headline"]["secondary"].startswith(
        f"secondary (not the verdict): at 50.0% utilization (given: the utilization field) a good request costs "
        f"${per_request:.6f} self-hosted vs $")
    assert default["headline"]["secondary"].startswith(
        "secondary (not the verdict): at 80.0% utilization (assumed: `kvledger cost --max-utilization`'s default, "
        "with the utilization and volume fields empty)")
    # the self-hosted card is priced at that utilization: every line of its ledger ∝ 1 / utilization, so 80% → 50%
    # costs 0.8 / 0.5 = 1.6 times as much per token
    assert half["headline"]["self_host_usd_per_mtok_output"] == pytest.approx(
        default["headline"]["self_host_usd_per_mtok_output"] * 1.6, rel=1e-12)


def test_long_text_is_refused_by_its_length_and_never_echoed_whole():
    from fastapi.testclient import TestClient

    from kvledger.report.webapp import create_app

    client = TestClient(create_app(), base_url="http://127.0.0.1")
    body = {"model": "meta-llama/Llama-3.1-8B", "gpu": "H100", "slo": "x" * 50_000, "api": "y" * 300}
    r = client.post("/api/serving", json=body)
    assert r.status_code == 400 and r.json()["error"] == (
        "invalid parameter: slo is 50,000 characters long; at most 256 are read; api is 300 characters long; at most "
        "256 are read")
    r = client.post("/api/plan", json={"gpu": "H100", "model": "m" * 5000})
    assert r.status_code == 400 and r.json()["error"] == ("invalid parameter: model is 5,000 characters long; at most "
                                                          "4,096 are read")
    r = client.post("/api/plan", json={"gpu": "H100"})
    assert r.status_code == 400 and r.json()["error"] == ("invalid parameter: model is required and missing from the "
                                                          "request")
