"""Both web requests take the engine settings an SRE checks a change with, ``engine_version``,
``gpu_memory_utilization`` and ``max_num_seqs``: checked as the CLI flags of those names are, in the app's words, and
planned and simulated as ``kvledger plan`` and ``cost --simulate`` plan them."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from kvledger.cli.main import app
from kvledger.report.webapp import create_app

client = TestClient(create_app(), base_url="http://127.0.0.1")
MODEL = "meta-llama/Llama-3.1-8B"
PLAN = {"model": MODEL, "gpu": "H100"}
SERVING = {**PLAN, "slo": "ttft=200ms", "api": "OpenAI:gpt-4.1", "num_requests": 50}
SETTINGS = {"engine_version": "0.19.0", "gpu_memory_utilization": 0.8, "max_num_seqs": 64}


def test_the_plan_takes_them_as_plan_does():
    r = client.post("/api/plan", json={**PLAN, **SETTINGS})
    assert r.status_code == 200, r.text
    cli = CliRunner().invoke(app, ["plan", MODEL, "--gpu", "H100", "--engine-version", "0.19.0",
                                   "--gpu-memory-utilization", "0.8", "--max-num-seqs", "64", "--json"])
    m, c = r.json()["plan"]["memory"], json.loads(cli.output)["memory"]
    assert (m["engine_version"], m["max_num_seqs"], m["fraction"]) == ("0.19.0", 64, 0.8)
    assert m["num_gpu_blocks"] == c["num_gpu_blocks"] and m["available_kv_bytes"] == c["available_kv_bytes"]
    # 0.19.0 subtracts no CUDA-graph estimate, so utilization moves only the budget: ceil(85,029,027,840 × 0.9) −
    # ceil(85,029,027,840 × 0.8) = 76,526,125,056 − 68,023,222,272 = 8,502,902,784 B more KV at 0.9
    at_09 = client.post("/api/plan", json={**PLAN, **SETTINGS, "gpu_memory_utilization": 0.9}).json()["plan"]["memory"]
    assert at_09["available_kv_bytes"] - m["available_kv_bytes"] == 8_502_902_784


def test_the_serving_panel_plans_and_simulates_with_them():
    r = client.post("/api/serving", json={**SERVING, **SETTINGS})  # gpu_memory_utilization was "not a field"
    assert r.status_code == 200, r.text
    sim = r.json()["cost"]["simulation"]
    assert (sim["plan"]["engine_version"], sim["plan"]["max_num_seqs"]) == ("0.19.0", 64)
    assert sim["engine"]["max_num_seqs"] == 64  # the simulator runs the cap it was given
    plan = client.post("/api/plan", json={**PLAN, **SETTINGS}).json()["plan"]["memory"]
    assert sim["engine"]["num_gpu_blocks"] == sim["plan"]["num_gpu_blocks"] == plan["num_gpu_blocks"]


@pytest.mark.parametrize("path", ["plan", "serving"])
@pytest.mark.parametrize(("fields", "error"), [
    ({"gpu_memory_utilization": 1.5}, "gpu_memory_utilization 1.5 is out of range; allowed: (0, 1] (fraction)"),
    ({"max_num_seqs": 0}, "max_num_seqs 0 is out of range; allowed: [1, 1,048,576] requests"),
    ({"engine_version": "9.9"}, "engine_version 9.9: no such vLLM release is known; the newest known is 0.33.0"),
    # the H100's 79.19 GiB less at least 0.13 GiB of CUDA context is free at vLLM's snapshot: 1.0 never starts
    ({"engine_version": "0.19.0", "gpu_memory_utilization": 1.0}, "does not start: vLLM 0.19.0 refuses to start"),
])
def test_refused_as_the_cli_refuses_them_in_the_apps_words(path, fields, error):
    r = client.post(f"/api/{path}", json={**(SERVING if path == "serving" else PLAN), **fields})
    assert r.status_code == 400 and r.json()["error"].startswith(error), r.text
    assert "--" not in r.json()["error"].split("`")[0]  # the fields, not the CLI's flags


@pytest.mark.parametrize(("field", "value", "words"), [
    ("max_num_seqs", "64", "must be a whole number"),
    ("max_num_seqs", 6.5, "must be a whole number"),
    ("gpu_memory_utilization", "0.9", "must be a number"),
    ("engine_version", 0.19, "must be text"),
])
def test_strict_types_in_both(field, value, words):
    for body in (PLAN, SERVING):
        r = client.post(f"/api/{'serving' if 'slo' in body else 'plan'}", json={**body, field: value})
        assert r.status_code == 400 and r.json()["error"].startswith(f"invalid parameter: {field} {words}"), r.text
