"""The web app takes what the CLI takes for the same deployment: ``-q``/``--quantization``, the user's own GPU price,
the data folder's model configs in the form's list, the KV-cache dtypes the CLI accepts for the engine and every
bundled trace; and
a refusal reads in the app's terms."""

from __future__ import annotations

import json
from importlib.resources import files

from fastapi.testclient import TestClient
from typer.testing import CliRunner

from kvledger.accounting.kv_dtype_choices import KV_DTYPE_NAMES
from kvledger.cli.main import app
from kvledger.dynamics.workload.traces import list_traces
from kvledger.report.webapp import create_app

client = TestClient(create_app(), base_url="http://127.0.0.1")
runner = CliRunner()
MODEL = "meta-llama/Llama-3.1-8B"
CTX = "1K,2K,4K,8K,16K,32K,64K,128K"


def test_quantization_plans_as_plan_q_fp8():
    r = client.post("/api/plan", json={"model": MODEL, "gpu": "H100", "quantization": "FP8"})
    assert r.status_code == 200
    cli = runner.invoke(app, ["plan", MODEL, "--gpu", "H100", "-q", "fp8", "--context", CTX, "--json"])
    assert cli.exit_code == 0, cli.output
    assert r.json()["plan"] == json.loads(cli.stdout)
    plain = client.post("/api/plan", json={"model": MODEL, "gpu": "H100"}).json()["headline"]
    # FP8 weights free about half of the 8B's 14.99 GiB of BF16 weights for KV: 61.50 GiB against 54.x
    assert r.json()["headline"]["available_kv_gib"] > plain["available_kv_gib"] + 6
    assert r.json()["request"]["quantization"] == "FP8"


def test_a_quantization_the_engine_refuses_reads_in_the_apps_terms():
    r = client.post("/api/plan", json={"model": MODEL, "gpu": "H100", "quantization": "int3"})
    assert r.status_code == 400
    assert r.json()["error"].startswith("the quantization field 'int3': not a vLLM quantization method")
    assert "--quantization" not in r.json()["error"]


def test_choices_come_from_the_cli_sources_and_list_the_data_folder(tmp_path):
    cfg = (files("kvledger.catalog") / "data" / "models" / "meta-llama--Meta-Llama-3.1-8B.json").read_text()
    (tmp_path / "l405fp8").mkdir()
    (tmp_path / "l405fp8" / "config.json").write_text(cfg)
    (tmp_path / "notes.json").write_text('{"hello": 1}')  # neither a model config nor a GPU file: not listed
    (tmp_path / "mygpu.toml").write_text('memory = "80GB"\nbandwidth_tb_s = 3.35\nbf16_tflops = 989\n')
    local = TestClient(create_app(tmp_path), base_url="http://127.0.0.1")
    c = local.get("/api/choices").json()
    assert c["local_models"] == ["l405fp8/config.json"] and c["local_gpus"] == ["mygpu.toml"]
    assert local.post("/api/plan", json={"model": c["local_models"][0], "gpu": "H100"}).status_code == 200
    assert client.get("/api/choices").json()["local_models"] == []  # no data folder: none
    # --kv-cache-dtype's values vLLM (the form's first engine) takes at 0.33, and every trace of the catalog
    assert c["kv_cache_dtypes"] == ["auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc"]
    assert ", ".join(c["kv_cache_dtypes_by_engine"]["trtllm"]) == KV_DTYPE_NAMES  # TensorRT-LLM's list not read
    assert c["traces"] == [t.name for t in list_traces()] and "arxiv" in c["traces"]
    assert c["quantizations"] == ["fp8", "bitsandbytes"]
    r = client.post("/api/plan", json={"model": MODEL, "gpu": "H100", "engine": "sglang", "kv_cache_dtype": "fp8_e4m3"})
    # 8B: 32 layers × 8 KV heads × 128 × 2 (K and V) × 1 B = 65,536 B per token
    assert r.status_code == 200 and r.json()["headline"]["kv_bytes_per_token_per_gpu"] == 65536


def test_a_gpu_without_a_price_row_asks_for_the_price_field_then_prices_on_it():
    body = {"model": MODEL, "gpu": "MI355X", "slo": "ttft=2s,tpot=100ms", "num_requests": 50}
    r = client.post("/api/serving", json=body)
    assert r.status_code == 400
    assert r.json()["error"] == (
        "unknown GPU price 'amd_mi355x'; did you mean: amd_mi325x, amd_mi300x? (amd_mi355x has no rental row in the "
        "price table; the nearest priced GPU of the same vendor: amd_mi325x (AMD Instinct MI325X, 255.98 GiB device "
        "memory; from $1.95/GPU-h, TensorWave 8-GPU node, low confidence, gpu_prices.csv); `kvledger prices --kind gpu`"
        " lists them) (or give your own price in the GPU price field, gpu_usd_per_hour, in USD per GPU-hour)")
    r = client.post("/api/serving", json={**body, "gpu_usd_per_hour": 2.5})
    assert r.status_code == 200
    inputs = r.json()["cost"]["inputs"]
    # one replica of one GPU at $2.50 an hour over cost's 730-hour month: $1,825
    assert (inputs["usd_per_gpu_hour"], inputs["unit_rental_usd_per_month"]) == (2.5, 1825.0)
    assert r.json()["headline"]["gpu_price"] == ("given (the GPU price field, gpu_usd_per_hour): amd_mi355x, "
                                                 "$2.50/GPU-h: 1 replica × 1 GPU × 730 h, $2.50/h")
    r = client.post("/api/serving", json={**body, "gpu_usd_per_hour": 0})
    assert r.status_code == 400
    assert r.json()["error"] == "gpu_usd_per_hour 0 is out of range; allowed: (0, 1,000,000] USD/GPU-hour"


def test_quantization_under_sglang_is_refused_naming_the_engine_field():
    r = client.post("/api/plan", json={"model": MODEL, "gpu": "H100", "quantization": "fp8", "engine": "sglang"})
    assert r.status_code == 400 and r.json()["error"] == (
        "the quantization field fp8 is modelled for vLLM only (its online FP8 weights); with the engine field at "
        "sglang it would be ignored: plan a quantized checkpoint, or set the engine field to vllm")
