"""The plan's JSON: ``settings`` are what the plan ran with (each engine default resolved, as the text shows them),
``given`` the settings as given (null: the engine's default); ``model.quantization`` names online FP8 where applied."""

from __future__ import annotations

import json

from cli_run import refused, run_cli

L8 = ("plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100")


def test_settings_are_resolved_and_given_keeps_the_inputs():
    d = json.loads(run_cli(*L8, "--json").stdout)
    s, g = d["settings"], d["given"]
    # vLLM 0.33 (newest read) on an H100: gpu_memory_utilization 0.92 (≥0.20 default), max_model_len 131,072 (the
    # config's max_position_embeddings), ≥70 GiB non-A100 batch defaults 8,192 tokens / 1,024 seqs, block 16
    assert (s["engine_version"], s["max_model_len"], s["gpu_memory_utilization"]) == ("0.33.0", 131_072, 0.92)
    assert (s["max_num_batched_tokens"], s["max_num_seqs"], s["block_size"]) == (8192, 1024, 16)
    assert s["contexts"] == [2048, 8192, 32768, 131072]  # the concurrency rows: 2K, 8K, 32K and max_model_len
    assert (g["engine_version"], g["max_model_len"], g["gpu_memory_utilization"], g["contexts"]) == (None,) * 4
    assert d["memory"]["engine_version"] == s["engine_version"] and d["memory"]["fraction"] == 0.92


def test_given_values_pass_through_and_assumed_nodes_show_in_settings():
    d = json.loads(run_cli(*L8, "--max-model-len", "8000", "--engine-version", "0.19.0", "--json").stdout)
    assert d["settings"]["max_model_len"] == d["given"]["max_model_len"] == 8000
    assert d["settings"]["engine_version"] == d["given"]["engine_version"] == "0.19.0"
    assert d["settings"]["gpu_memory_utilization"] == 0.9 and d["given"]["gpu_memory_utilization"] is None  # ≤0.19
    # 16 H100 SXM ranks: 2 nodes of 8 assumed; the given --nnodes was 1
    t = json.loads(run_cli("plan", "mistralai/Mixtral-8x7B-v0.1", "--gpu", "H100", "--tp", "16", "--json").stdout)
    assert (t["settings"]["nnodes"], t["given"]["nnodes"]) == (2, 1)


def test_sglang_settings_name_its_fraction():
    s = json.loads(run_cli(*L8, "--engine", "sglang", "--json").stdout)["settings"]
    # SGLang's H100 default: 13,440 MiB reserved + 464 for the prefill graphs → round(67,655 / 81,559, 3) = 0.83
    assert s["mem_fraction_static"] == 0.83 and s["gpu_memory_utilization"] is None


def test_model_quantization_says_online_fp8():
    plain = json.loads(run_cli(*L8, "--json").stdout)["model"]
    fp8 = json.loads(run_cli(*L8, "-q", "fp8", "--json").stdout)["model"]
    assert plain["quantization"] == "unquantized: every weight in the model dtype"
    assert fp8["quantization"].startswith("fp8 (online --quantization fp8): 1 B/weight + fp32 scale per tensor")
    assert fp8["weight_bytes"] == plain["weight_bytes"] == 16_060_522_496  # the checkpoint: 8,030,261,248 × 2 B


def test_chunked_prefill_off_plans_at_the_budget_vllm_sets():
    # vLLM 0.33.0 engine/arg_utils.py: chunked prefill off and no --max-num-batched-tokens → max(max_model_len
    # 131,072, default 8,192) = 131,072, which profile_run profiles: the same pool as `--max-num-batched-tokens
    # 131072` (21,677 blocks, 42.34 GiB), not the 28,160 of the default budget (a long-context trial: `plan` had no
    # such flag, `simulate` served 28,160 blocks beside the 131,072-token budget)
    d = json.loads(run_cli(*L8, "--max-model-len", "128K", "--no-enable-chunked-prefill", "--json").stdout)
    given = json.loads(run_cli(*L8, "--max-model-len", "128K", "--max-num-batched-tokens", "131072", "--json").stdout)
    assert d["memory"]["num_gpu_blocks"] == given["memory"]["num_gpu_blocks"] == 21677
    assert d["settings"]["max_num_batched_tokens"] == 131072 and d["given"]["max_num_batched_tokens"] is None
    assert d["memory"]["notes"][-1].startswith("chunked prefill off: max_num_batched_tokens = max(max_model_len, "
                                               "default) = 131,072 (vLLM rule")
    # 0.11.0's V1 engine forces chunked prefill on: the flag changes nothing, and the note says so
    old = json.loads(run_cli(*L8, "--max-model-len", "128K", "--engine-version", "0.11.0", "--json").stdout)
    off = json.loads(run_cli(*L8, "--max-model-len", "128K", "--engine-version", "0.11.0",
                             "--no-enable-chunked-prefill", "--json").stdout)
    assert off["memory"]["num_gpu_blocks"] == old["memory"]["num_gpu_blocks"]
    assert off["settings"]["max_num_batched_tokens"] == 8192
    assert "has no effect in vLLM 0.11.0" in off["memory"]["notes"][-1]
    # another engine: a one-paragraph error (the console entry exits 2)
    assert refused(*L8, "--engine", "sglang", "--no-enable-chunked-prefill").startswith(
        "--no-enable-chunked-prefill is a vLLM flag; with --engine sglang give the token budget itself")


def test_plan_refuses_a_budget_under_max_model_len_with_chunked_prefill_off_as_vllm_and_simulate_do():
    # vLLM 0.33.0 config/scheduler.py SchedulerConfig.verify_max_model_len: with enable_chunked_prefill False and
    # max_num_batched_tokens 8,192 < max_model_len 131,072 it raises ValueError at start-up; `simulate` refused it,
    # `plan` answered 'fits: 3 concurrent 131,072-token requests' for a server that never starts
    msg = refused(*L8, "--max-model-len", "128K", "--no-enable-chunked-prefill", "--max-num-batched-tokens", "8192")
    assert msg.startswith("max_num_batched_tokens (8,192) is smaller than max_model_len (131,072) with chunked "
                          "prefill off")
    # a budget that takes one max_model_len prompt is planned as given
    d = json.loads(run_cli(*L8, "--max-model-len", "8K", "--no-enable-chunked-prefill", "--max-num-batched-tokens",
                           "8192", "--json").stdout)
    assert d["memory"]["notes"][-1] == "chunked prefill off: max_num_batched_tokens 8,192 as given"
