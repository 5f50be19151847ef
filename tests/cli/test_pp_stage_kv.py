"""With pipeline parallelism a GPU holds its stage's layers alone: the KV bytes per token, the growing bytes and the
groups the plan reports are the binding stage's, said so in the text and in the JSON's ``per_gpu_scope``."""

from __future__ import annotations

import json

from cli_run import run_cli

GPT_OSS = ("plan", "openai/gpt-oss-120b", "--gpu", "nvidia_a100_40gb_sxm", "--tp", "2", "--pp", "2",
           "--max-model-len", "32768")
LLAMA70 = ("plan", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "H100", "--tp", "8", "--pp", "2")


def test_gpt_oss_stage_bytes_are_every_layer_of_the_stage_not_one_group():
    # gpt-oss-120b: 36 layers alternating sliding/full, 8 KV heads (4 per GPU at TP 2), head_dim 64, bf16 KV.
    # One layer per GPU per token: 2 (K,V) × 4 × 64 × 2 B = 1,024 B. PP 2 splits 18 + 18; the binding stage PP1
    # holds layers 18–35 = 9 sliding + 9 full: 18 × 1,024 = 18,432 B (9,216 is one group's share, the old figure).
    # All 36 layers at TP 2: 36,864 B; growing (full layers only): stage 9 × 1,024 = 9,216, all 18 × 1,024 = 18,432.
    r = run_cli(*GPT_OSS)
    assert ("KV per token: 18,432 B (18.00 KiB) per GPU of the binding pipeline stage PP1 (layers 18–35 only); "
            "all 36 layers at TP 2: 36,864 B") in r.stdout
    assert "9 sliding_window: 2 (K,V) × 9 layers" in r.stdout and "9 full: 2 (K,V) × 9 layers" in r.stdout
    kv = json.loads(run_cli(*GPT_OSS, "--json").stdout)["kv"]
    assert kv["per_gpu_scope"] == "binding pipeline stage PP1: layers 18–35 (18 layers)"
    assert (kv["bytes_per_token_per_gpu"], kv["bytes_per_token_per_gpu_all_layers"]) == (18_432, 36_864)
    assert (kv["growing_bytes_per_token_per_gpu"], kv["growing_bytes_per_token_per_gpu_all_layers"]) == (9_216, 18_432)
    assert sum(g["bytes_per_token"] for g in kv["groups"]) == 18_432
    assert kv["bytes_per_token_model"] == 73_728  # whole model at TP 1: 36 × 2 × 8 × 64 × 2 B


def test_llama70b_growing_bytes_scoped_to_the_stage():
    # Llama-3.1-70B: 80 full layers, 8 KV heads → 1 per GPU at TP 8, head_dim 128, bf16: 2 × 1 × 128 × 2 = 512 B per
    # layer. PP 2: 40 layers per stage → 20,480 B per token per GPU; all 80 layers 40,960. Every layer grows, so the
    # growing bytes are the same two figures (before: 40,960 next to a stage figure of 20,480).
    kv = json.loads(run_cli(*LLAMA70, "--json").stdout)["kv"]
    assert (kv["bytes_per_token_per_gpu"], kv["growing_bytes_per_token_per_gpu"]) == (20_480, 20_480)
    assert (kv["bytes_per_token_per_gpu_all_layers"], kv["growing_bytes_per_token_per_gpu_all_layers"]) == (40_960,
                                                                                                              40_960)
    assert kv["per_gpu_scope"] == "binding pipeline stage PP1: layers 40–79 (40 layers)"


def test_without_pp_the_scope_is_all_layers_and_no_all_layers_copy():
    # Llama-3.1-8B TP 1: 2 × 32 layers × 8 KV heads × 128 × 2 B = 131,072 B, every layer on the one GPU.
    kv = json.loads(run_cli("plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--json").stdout)["kv"]
    assert kv["per_gpu_scope"] == "all layers" and kv["bytes_per_token_per_gpu"] == 131_072
    assert "bytes_per_token_per_gpu_all_layers" not in kv and "growing_bytes_per_token_per_gpu_all_layers" not in kv
