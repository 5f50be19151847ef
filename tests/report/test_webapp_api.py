"""The ``kvledger ui`` endpoints without a browser: plan JSON equal to ``plan --json``, other engines, strict JSON, and
bad input as a 400 with the CLI's message."""

from __future__ import annotations

import json

from fastapi.testclient import TestClient
from typer.testing import CliRunner

from kvledger.cli.main import app
from kvledger.report.webapp import create_app

client = TestClient(create_app(), base_url="http://127.0.0.1")
runner = CliRunner()
CTX = "1K,2K,4K,8K,16K,32K,64K,128K"


def test_plan_endpoint_equals_plan_json_for_sglang_at_tp4():
    # TP 4: at TP 2 the 70B's 65.71 GiB of weights per H100 leave SGLang's fraction no KV memory once the memory held
    # before the load (0.42 GiB) and the load's overhead (0.13 GiB) are counted
    r = client.post("/api/plan", json={"model": "meta-llama/Llama-3.1-70B", "gpu": "H100", "engine": "sglang", "tp": 4,
                                        "max_model_len": "32K"})
    assert r.status_code == 200
    body = json.loads(r.text)  # strict JSON: json.loads would accept NaN, so check the text too
    assert "NaN" not in r.text and "Infinity" not in r.text
    cli = runner.invoke(app, ["plan", "meta-llama/Llama-3.1-70B", "--gpu", "H100", "--engine", "sglang", "--tp", "4",
                              "--max-model-len", "32K", "--context", CTX, "--json"])
    assert body["plan"] == json.loads(cli.stdout)
    # 70B at TP 4: 8 KV heads split over 4 GPUs → 2 × 80 layers × 2 heads × 128 × 2 B = 81,920 B per token per GPU
    assert body["headline"]["kv_bytes_per_token_per_gpu"] == 81920
    assert set(body["figures"]) == {"memory_waterfall", "concurrency_by_context", "decode_roofline"}
    assert all(f["svg"].startswith("<svg") for f in body["figures"].values())


def test_plan_headline_carries_the_ranges_of_plan_json():
    r = client.post("/api/plan", json={"model": "meta-llama/Llama-3.1-8B", "gpu": "H100"})
    h, m = r.json()["headline"], r.json()["plan"]["memory"]
    b_lo, b_hi = m["ranges"]["num_gpu_blocks"]
    assert h["available_kv_gib_range"] == [x / 2**30 for x in m["ranges"]["available_kv_bytes"]]
    assert h["num_gpu_blocks_range"] == [b_lo, b_hi] and b_lo < h["num_gpu_blocks"] < b_hi
    # 8K tokens / 16 per block = 512 blocks per request; 128K: 8,192 blocks; each end of the block range ÷ that
    assert h["max_concurrency_8k_range"] == [b_lo / 512, b_hi / 512]
    assert h["max_concurrency_128k_range"] == [b_lo / 8192, b_hi / 8192]
    # SGLang's plan: its fixed-fraction terms give no range where none is known; a range, when given, brackets the point
    s = client.post("/api/plan", json={"model": "meta-llama/Llama-3.1-8B", "gpu": "H100", "engine": "sglang"}).json()
    rng = s["headline"]["available_kv_gib_range"]
    assert rng is None or rng[0] <= s["headline"]["available_kv_gib"] <= rng[1]


def test_bad_input_is_a_400_with_the_message():
    r = client.post("/api/plan", json={"model": "no-such-model-xyz", "gpu": "H100"})
    assert r.status_code == 400 and "no-such-model-xyz" in r.json()["error"]
    r = client.post("/api/plan", json={"model": "meta-llama/Llama-3.1-8B", "gpu": "H100", "kv_cache_dtype": "int3"})
    assert r.status_code == 400 and "int3" in r.json()["error"]
    r = client.post("/api/serving", json={"model": "meta-llama/Llama-3.1-8B", "gpu": "H100", "slo": "ttft=200ms",
                                           "api": "OpenAI:gpt-4.1", "num_requests": 5})
    assert (
        r.status_code == 400
        and r.json()["error"] == "requests per simulation 5 is out of range; allowed: [50, 5,000] in the web app"
    )


def test_page_is_self_contained():
    html = client.get("/").text
    assert "<script src" not in html and "http://" not in html and "https://" not in html
    assert 'id="error-band"' in html  # the serving card carries the capacity's error band when the cost has one
    assert 'id="capacity-band"' in html and 'id="capacity-warning"' in html and "h.sizing_req_per_s_range" in html


def test_ui_command_refuses_a_bad_or_taken_port():
    import socket

    res = runner.invoke(app, ["ui", "--port", "0"])
    assert res.exit_code != 0 and "--port 0 is out of range; allowed: [1, 65,535]" in str(res.exception)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        taken = s.getsockname()[1]
        res = runner.invoke(app, ["ui", "--port", str(taken)])
    assert res.exit_code != 0 and f"cannot listen on 127.0.0.1:{taken}" in str(res.exception)


def test_a_model_that_does_not_fit_shows_the_verdict_and_no_roofline():
    # Qwen3-Next-80B in bf16: 148.41 GiB of weights against an H200's 139.8 GiB device total, so no KV and no decode
    # step
    r = client.post("/api/plan", json={"model": "Qwen/Qwen3-Next-80B-A3B-Instruct", "gpu": "H200"})
    body = r.json()
    assert r.status_code == 200 and body["headline"]["verdict"].startswith("does not fit")
    assert body["headline"]["num_gpu_blocks"] == 0 and set(body["figures"]) == {"memory_waterfall",
                                                                                "concurrency_by_context"}
