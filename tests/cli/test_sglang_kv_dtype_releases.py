"""SGLang's ``--kv-cache-dtype`` choices release by release (``accounting.kv_dtype_choices``): a kvledger name the
release's argparse choices lack is refused at the CLI in argparse's words (exit 2), as SGLang refuses it before
start-up; one it has plans."""

from __future__ import annotations

import pytest
from cli_run import MODEL, refused, run_cli

from kvledger.accounting.kv_dtype_choices import engine_kv_dtypes, sglang_cache_dtypes

# The choices, as written in each wheel's --kv-cache-dtype (server_args.py; arg_groups/fields/model.py from 0.5.21)
V0523 = "'auto', 'fp8_e5m2', 'fp8_e4m3', 'mxfp8', 'bf16', 'bfloat16', 'nvfp4', 'fp4_mx_block16'"


@pytest.mark.parametrize(("version", "first"), [
    ("0.4.0", "auto fp8_e5m2"), ("0.4.1.post5", "auto fp8_e5m2"),  # 0.4.1.post5's wheel: ["auto", "fp8_e5m2"]
    ("0.4.1.post6", "auto fp8_e5m2 fp8_e4m3"), ("0.5.3", "auto fp8_e5m2 fp8_e4m3"),
    ("0.5.4", "auto fp8_e5m2 fp8_e4m3 bf16 bfloat16"), ("0.5.4.post2", "auto fp8_e5m2 fp8_e4m3 bf16 bfloat16"),
    ("0.5.4.post3", "auto fp8_e5m2 fp8_e4m3 bf16 bfloat16 fp4_e2m1"),
    ("0.5.15", "auto fp8_e5m2 fp8_e4m3 bf16 bfloat16 fp4_e2m1"),
    ("0.5.16", "auto fp8_e5m2 fp8_e4m3 mxfp8 bf16 bfloat16 nvfp4 fp4_mx_block16 fp4_e2m1"),
    ("0.5.20", "auto fp8_e5m2 fp8_e4m3 mxfp8 bf16 bfloat16 nvfp4 fp4_mx_block16 fp4_e2m1"),
    ("0.5.21", "auto fp8_e5m2 fp8_e4m3 mxfp8 bf16 bfloat16 nvfp4 fp4_mx_block16"),
    ("0.5.23", "auto fp8_e5m2 fp8_e4m3 mxfp8 bf16 bfloat16 nvfp4 fp4_mx_block16")])
def test_each_release_has_the_choices_its_wheel_lists(version, first):
    assert " ".join(sglang_cache_dtypes(version)[0]) == first


def test_fp8_inc_is_refused_in_sglangs_own_words():
    # fp8_inc is vLLM's (Intel Gaudi) name, in no SGLang release's choices: argparse's invalid-choice line, 0.5.23's
    why = refused("plan", MODEL, "--gpu", "H100", "--engine", "sglang", "--kv-cache-dtype", "fp8_inc")
    assert why == ("--kv-cache-dtype 'fp8_inc': SGLang 0.5.23 refuses it at argument parsing: \"argument "
                   f"--kv-cache-dtype: invalid choice: 'fp8_inc' (choose from {V0523})\" (arg_groups/fields/model.py, "
                   "read in 0.5.21–0.5.23); write 'fp8_e4m3' for its 1-byte FP8 KV cache")
    sim = refused("simulate", MODEL, "--gpu", "H100", "--policy", "sglang", "--num-requests", "5",
                  "--kv-cache-dtype", "fp8_inc")
    assert sim == why


def test_older_releases_refuse_what_they_lack_and_take_what_they_have():
    # 0.5.3's server_args.py: choices=["auto", "fp8_e5m2", "fp8_e4m3"]: no bf16 until 0.5.4
    why = refused("plan", MODEL, "--gpu", "H100", "--engine", "sglang", "--engine-version", "0.5.3",
                  "--kv-cache-dtype", "bf16")
    assert why == ("--kv-cache-dtype 'bf16': SGLang 0.5.3 refuses it at argument parsing: \"argument --kv-cache-dtype: "
                   "invalid choice: 'bf16' (choose from 'auto', 'fp8_e5m2', 'fp8_e4m3')\" (server_args.py, read in "
                   "0.4.1.post6–0.5.3.post3); write 'auto' for the model's own 16-bit dtype")
    # 0.4.0's: choices=["auto", "fp8_e5m2"]: its only FP8 format is the fix
    why = refused("plan", MODEL, "--gpu", "H100", "--engine", "sglang", "--engine-version", "0.4.0",
                  "--kv-cache-dtype", "fp8_e4m3")
    assert why.endswith("(choose from 'auto', 'fp8_e5m2')\" (server_args.py, read in 0.4.0–0.4.1.post5); write "
                        "'fp8_e5m2' for its 1-byte FP8 KV cache")
    # 0.4.1.post6 added fp8_e4m3: planned at 1 B per element, 2 × 32 × 8 × 128 × 1 = 65,536 B/token
    ok = run_cli("plan", MODEL, "--gpu", "H100", "--engine", "sglang", "--engine-version", "0.4.1.post6",
                 "--kv-cache-dtype", "fp8_e4m3")
    assert ok.exit_code == 0 and "65,536 B/token" in ok.stdout


def test_a_case_slip_is_refused_with_the_name_as_sglang_writes_it():
    why = refused("plan", MODEL, "--gpu", "H100", "--engine", "sglang", "--kv-cache-dtype", "BF16")
    assert why.startswith("--kv-cache-dtype 'BF16': SGLang 0.5.23 refuses it") and why.endswith("; write 'bf16'")


def test_the_names_kvledger_offers_per_engine_and_release():
    # kvledger's names (auto, bf16, bfloat16, fp16, float16, half, fp8, fp8_e4m3, fp8_e5m2, fp8_inc) in each list
    assert engine_kv_dtypes("vllm", "0.19.0") == ["auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2",
                                                  "fp8_inc"]
    assert engine_kv_dtypes("sglang", None) == ["auto", "bf16", "bfloat16", "fp8_e4m3", "fp8_e5m2"]
    assert engine_kv_dtypes("sglang", "0.5.3") == ["auto", "fp8_e4m3", "fp8_e5m2"]
    assert engine_kv_dtypes("sglang", "0.4.0") == ["auto", "fp8_e5m2"]


def test_searchs_sglang_launch_line_writes_a_name_sglang_takes():
    from kvledger.accounting.kv_dtype_choices import KV_DTYPE_BYTES
    from kvledger.analyses.search.launch import SGLANG_KV_DTYPES

    # fp8_inc (1 B, vLLM's) became 'auto' (2 B for a BF16 model) on the SGLang line; now SGLang's 1-byte fp8_e4m3
    assert SGLANG_KV_DTYPES["fp8_inc"] == "fp8_e4m3" and KV_DTYPE_BYTES["fp8_inc"] == 1
    assert set(SGLANG_KV_DTYPES.values()) <= set(sglang_cache_dtypes(None)[0])
