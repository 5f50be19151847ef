"""A valid setting the engine release refuses at start-up on the GPU ends every command that plans it with exit 3 and
error type EngineRefusalError (README, "exit status": nothing can start), in the engine's own words; a malformed or
unknown value stays exit 2. Each refusal is read in the engine's code (the module that raises it says where)."""

from __future__ import annotations

import json

import pytest
from cli_run import run_cli

from kvledger.errors import EngineRefusalError

LLAMA = "meta-llama/Llama-3.1-8B"
# vLLM 0.33 on a T4 (sm75): below SM80 only TRITON_ATTN is left, whose FP8 KV cache needs SM89
# (v1/attention/backends/triton_attn.py TritonAttentionImpl.__init__)
T4_FP8 = ("--gpu", "T4", "--kv-cache-dtype", "fp8", "--max-model-len", "4096")
TRITON_WORDS = "FP8 KV cache is not supported by the Triton attention backend"
SLO = ("--slo", "ttft=500ms")


@pytest.mark.parametrize("argv", [
    ["plan", LLAMA, *T4_FP8],
    ["simulate", LLAMA, *T4_FP8, "--rate", "1", "--num-requests", "20"],
    ["goodput", "--simulate", LLAMA, *T4_FP8, *SLO],
    ["cost", "--simulate", LLAMA, *T4_FP8, *SLO, "--gpu-usd-per-hour", "0.35"],
])
def test_fp8_kv_on_a_t4_exits_3_in_every_command(argv, cli_entry):
    code, out, err = cli_entry(*argv, "--json")
    e = json.loads(out)["error"]
    assert code == 3 and e["exit_code"] == 3 and e["type"] == "EngineRefusalError"
    assert "vLLM 0.33.0 refuses an FP8 KV cache" in err and TRITON_WORDS in e["message"]


def test_an_fp8_kv_spelling_the_parser_refuses_stays_2(cli_entry):
    # "FP8" is no CacheDType choice (vLLM's argparse: lower case only): bad input, not a start-up refusal
    code, _, err = cli_entry("plan", LLAMA, "--gpu", "T4", "--kv-cache-dtype", "FP8")
    assert code == 2 and "vLLM refuses it at argument parsing" in err


def test_bfloat16_on_a_t4_exits_3_and_float16_plans(cli_entry):
    # vLLM's platforms/cuda.py check_if_supports_dtype (read in 0.19.0): bf16 below compute capability 8.0 raises
    # ValueError at start-up; Llama-3.1-8B at TP 2 in float16 at 4,096 tokens fits the T4 (7.51 GiB of weights per GPU)
    code, out, err = cli_entry("plan", LLAMA, "--gpu", "T4", "--tp", "2", "--dtype", "bfloat16", "--json")
    assert code == 3 and json.loads(out)["error"]["type"] == "EngineRefusalError"
    assert "Bfloat16 is only supported on GPUs with compute capability of at least 8.0" in err
    fp16 = run_cli("plan", LLAMA, "--gpu", "T4", "--tp", "2", "--dtype", "float16", "--max-model-len", "4096")
    assert fp16.exit_code == 0
    code, _, err = cli_entry("plan", LLAMA, "--gpu", "T4", "--tp", "2", "--dtype", "bf17")  # no dtype at all: 2
    assert code == 2 and "--dtype must be one of" in err


@pytest.mark.parametrize("argv,words", [
    # vllm_mla_fp8: FLASH_ATTN_MLA takes no FP8 KV cache, FLASHMLA and TRITON_MLA fp8/fp8_e4m3 only (0.18–0.33)
    (["deepseek-ai/DeepSeek-V3", "--gpu", "H200", "--tp", "8", "--kv-cache-dtype", "fp8_e5m2"],
     "vLLM 0.33.0 has no MLA attention backend on Hopper for it"),
    # vllm_kv_dtype_support: an MLA model below SM89 gets TRITON_MLA from 0.26.0 (triton_mla.py), which refuses FP8
    (["deepseek-ai/DeepSeek-V3", "--gpu", "A100-80GB", "--tp", "8", "--kv-cache-dtype", "fp8"],
     "an MLA model gets TRITON_MLA there"),
    (["openai/gpt-oss-20b", "--gpu", "A100-40GB", "--engine-version", "0.6.6"],  # registry.py: from 0.10.1
     "vLLM would refuse to load it ('Model architectures [...] are not supported for now')"),
    ([LLAMA, "--gpu", "MI300X", "--engine", "trtllm"], "TensorRT-LLM runs on NVIDIA GPUs only"),
])
def test_other_start_up_refusals_exit_3(argv, words, cli_entry):
    code, _, err = cli_entry("plan", *argv)
    assert code == 3 and words in err


def test_search_whose_every_candidate_the_engine_refuses_exits_3(cli_entry):
    code, out, _ = cli_entry("search", LLAMA, *T4_FP8, "--tp", "1", *SLO, "--rate", "1")
    assert code == 3 and "rejected: 1 of 1 — engine refuses to start: 1 (e.g. nvidia_t4:tp1:kv-fp8)" in out


def test_the_api_raises_engine_refusal_error():
    import kvledger

    with pytest.raises(EngineRefusalError, match=TRITON_WORDS):
        kvledger.plan(LLAMA, "T4", kv_cache_dtype="fp8", max_model_len=4096)
    with pytest.raises(EngineRefusalError, match=TRITON_WORDS):
        kvledger.goodput(LLAMA, "T4", kv_cache_dtype="fp8", max_model_len=4096, slo="ttft=500ms")
    # every search candidate refused by the engine (none for memory): that error, not DoesNotFitError
    with pytest.raises(EngineRefusalError, match=r"^kvledger.search: no candidate can start: 1 rejected for engine "
                                                 r"refuses to start"):
        kvledger.search(LLAMA, gpus=["T4"], tp=[1], kv_cache_dtype=["fp8"], max_model_len=4096, slo="ttft=500ms",
                        rate=1)
