"""vLLM's ``--kv-cache-dtype`` choices release by release (``accounting.kv_dtype_choices._VLLM``): a vLLM name the
release's ``CacheDType`` lacks (float16 before 0.18, bfloat16 before 0.11, fp8_inc before 0.10) is refused at the CLI
(exit 2), as vLLM's argparse refuses it before start-up; the web app offers only the release's names."""

from __future__ import annotations

import pytest
from cli_run import MODEL, refused, run_cli

from kvledger.accounting.kv_dtype_choices import engine_kv_dtypes, vllm_cache_dtypes


@pytest.mark.parametrize(("version", "choices"), [
    # CacheDType as each wheel writes it: vllm/config.py in 0.9.0, 0.9.2, 0.10.0; vllm/config/cache.py from 0.10.2
    ("0.9.0", "auto fp8 fp8_e4m3 fp8_e5m2"), ("0.9.2", "auto fp8 fp8_e4m3 fp8_e5m2"),
    ("0.10.0", "auto fp8 fp8_e4m3 fp8_e5m2 fp8_inc"), ("0.10.2", "auto fp8 fp8_e4m3 fp8_e5m2 fp8_inc"),
    ("0.11.0", "auto bfloat16 fp8 fp8_e4m3 fp8_e5m2 fp8_inc"),
    ("0.12.0", "auto bfloat16 fp8 fp8_e4m3 fp8_e5m2 fp8_inc fp8_ds_mla"),
    ("0.17.0", "auto bfloat16 fp8 fp8_e4m3 fp8_e5m2 fp8_inc fp8_ds_mla"),
    ("0.18.0", "auto float16 bfloat16 fp8 fp8_e4m3 fp8_e5m2 fp8_inc fp8_ds_mla"),
    ("0.19.0", "auto float16 bfloat16 fp8 fp8_e4m3 fp8_e5m2 fp8_inc fp8_ds_mla")])
def test_each_release_has_the_choices_its_wheel_lists(version, choices):
    assert " ".join(vllm_cache_dtypes(version)[0]) == choices


def test_a_name_the_release_lacks_is_refused_with_its_choices():
    why = refused("plan", MODEL, "--gpu", "H100", "--engine-version", "0.17.0", "--kv-cache-dtype", "float16")
    assert why == ("--kv-cache-dtype 'float16': vLLM 0.17.0 refuses it at argument parsing, its choices being auto, "
                   "bfloat16, fp8, fp8_e4m3, fp8_e5m2, fp8_inc, fp8_ds_mla (CacheDType, vllm/config/cache.py, read in "
                   "0.12.0–0.17.0); write 'auto' for the model's own 16-bit dtype, or use a later --engine-version")
    sim = refused("simulate", MODEL, "--gpu", "H100", "--engine-version", "0.10.2", "--num-requests", "5",
                  "--kv-cache-dtype", "bfloat16")
    assert sim.startswith("--kv-cache-dtype 'bfloat16': vLLM 0.10.2 refuses it at argument parsing")
    why = refused("plan", MODEL, "--gpu", "H100", "--engine-version", "0.9.2", "--kv-cache-dtype", "fp8_inc")
    assert "write 'fp8' (1 B, as fp8_inc)" in why
    # bf16 (kvledger's alias) in a release without bfloat16: the fix is auto, not a name the release also refuses
    why = refused("plan", MODEL, "--gpu", "H100", "--engine-version", "0.10.2", "--kv-cache-dtype", "bf16")
    assert why.endswith("write 'auto'")


def test_a_name_the_release_has_plans():
    # 0.18.0 added float16: 2 × 32 layers × 8 KV heads × 128 head_dim × 2 B = 131,072 B per token
    res = run_cli("plan", MODEL, "--gpu", "H100", "--engine-version", "0.18.0", "--kv-cache-dtype", "float16")
    assert res.exit_code == 0
    out = res.stdout
    assert "KV dtype float16 — 32 full: 2 (K,V) × 32 layers × 8 KV heads × 128 head_dim × 2 B = 131,072 B/token" in out
    assert engine_kv_dtypes("vllm", "0.17.0") == ["auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc"]
    assert engine_kv_dtypes("vllm", "0.9.2") == ["auto", "fp8", "fp8_e4m3", "fp8_e5m2"]


def test_an_upper_case_name_for_tensorrt_llm_does_not_name_vllm():
    # TensorRT-LLM's choices were not read: a known name in another case is refused in kvledger's own words (it said
    # "vLLM refuses it at argument parsing … CacheDType in 0.19" for a TensorRT-LLM plan)
    why = refused("plan", MODEL, "--gpu", "H100", "--engine", "trtllm", "--kv-cache-dtype", "FP8")
    assert why == ("--kv-cache-dtype 'FP8': the engines' KV cache dtype names are lower case (vLLM's and SGLang's "
                   "argument parsing refuse any other case); write 'fp8'")
