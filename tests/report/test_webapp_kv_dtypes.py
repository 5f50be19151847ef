"""The web app's KV cache dtypes are the engine's own at its version (``accounting.kv_dtype_choices``, the lists the
CLI checks against): vLLM is not offered bf16 (its CacheDType spells it bfloat16, and its argparse refuses bf16), nor
SGLang fp8_inc; a request with one the engine refuses is answered as the CLI answers it."""

from __future__ import annotations

from fastapi.testclient import TestClient

from kvledger.report.webapp import create_app

client = TestClient(create_app(), base_url="http://127.0.0.1")
MODEL = "meta-llama/Llama-3.1-8B"


def test_each_engine_gets_its_own_names_per_release():
    c = client.get("/api/choices").json()["kv_cache_dtypes_by_engine"]
    # vLLM 0.33 CacheDType ∩ kvledger's names; SGLang 0.5.23 arg_groups/fields/model.py choices ∩ kvledger's names
    assert c["vllm"] == ["auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc"]
    assert c["sglang"] == ["auto", "bf16", "bfloat16", "fp8_e4m3", "fp8_e5m2"]
    assert "bf16" not in c["vllm"] and "fp8_inc" not in c["sglang"]

    def listed(engine: str, version: str) -> list[str]:
        r = client.get("/api/kv_cache_dtypes", params={"engine": engine, "engine_version": version})
        assert r.status_code == 200
        return r.json()["kv_cache_dtypes"]

    assert listed("sglang", "0.5.3") == ["auto", "fp8_e4m3", "fp8_e5m2"]  # 0.5.3's server_args.py: no bf16 yet
    assert listed("sglang", "0.4.0") == ["auto", "fp8_e5m2"]  # 0.4.0's: choices=["auto", "fp8_e5m2"]
    assert listed("vllm", "0.19.0") == c["vllm"]  # 0.19's CacheDType has the same of kvledger's names
    bad = client.get("/api/kv_cache_dtypes", params={"engine": "sglang", "engine_version": "9.9"})
    assert bad.status_code == 400 and "no such SGLang release is known" in bad.json()["error"]
    # a vLLM version plan refuses, or an engine none of the three, is refused too (it was answered with 0.33's names,
    # or with every kvledger name); vLLM 0.17's CacheDType has bfloat16 but not float16 (read in the 0.17.0 wheel)
    bad = client.get("/api/kv_cache_dtypes", params={"engine": "vllm", "engine_version": "abc"})
    assert bad.status_code == 400 and bad.json()["error"] == "engine_version 'abc' is not a version like 0.10.2"
    bad = client.get("/api/kv_cache_dtypes", params={"engine": "foo"})
    assert bad.status_code == 400 and bad.json()["error"] == "engine 'foo' is not known; use vllm, sglang or trtllm"
    assert listed("vllm", "0.17.0") == ["auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc"]


def test_a_dtype_the_engine_refuses_is_refused_in_the_apps_words():
    r = client.post("/api/plan", json={"model": MODEL, "gpu": "H100", "kv_cache_dtype": "bf16"})
    assert r.status_code == 400
    assert r.json()["error"].startswith("the KV cache dtype field 'bf16': vLLM refuses it at argument parsing")
    r = client.post("/api/plan", json={"model": MODEL, "gpu": "H100", "engine": "sglang", "kv_cache_dtype": "fp8_inc"})
    assert r.status_code == 400 and "invalid choice: 'fp8_inc'" in r.json()["error"]
    # SGLang takes bf16: 2 × 32 layers × 8 KV heads × 128 × 2 B = 131,072 B per token
    r = client.post("/api/plan", json={"model": MODEL, "gpu": "H100", "engine": "sglang", "kv_cache_dtype": "bf16"})
    assert r.status_code == 200 and r.json()["headline"]["kv_bytes_per_token_per_gpu"] == 131072
    r = client.post("/api/serving", json={"model": MODEL, "gpu": "H100", "slo": "ttft=2s", "kv_cache_dtype": "half"})
    assert r.status_code == 400 and "'half': vLLM refuses it" in r.json()["error"]
