"""The plan's JSON: ``settings`` are what the plan ran with (each engine default resolved, as the text shows them),
``given`` the settings as given (null: the engine's default); ``model.quantization`` names online FP8 where applied."""

from __future__ import annotations

import json

from cli_run import run_cli

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
