"""``plan --json`` carries the value each release resolved where no flag was given (``settings``, with its source
under ``resolved_from``) and keeps ``given`` as typed. Before, Qwen3-Next-80B's ``settings.enable_prefix_caching`` was
null on 0.19, 0.28 and 0.33 although the plan applied off / on / on (1 / 2 / 3 state pages per request)."""

from __future__ import annotations

import pytest
from cli_run import MODEL, cli_json

QWEN_NEXT = "Qwen/Qwen3-Next-80B-A3B-Instruct"


@pytest.mark.parametrize("version, on, mode", [
    # vLLM 0.19 config/model.py is_prefix_caching_supported: "Hybrid models do not support prefix caching" → off,
    # mamba_cache_mode none; 0.33: "Generative hybrid models support prefix caching" → on, align mode
    ("0.19.0", False, "none"), ("0.33.0", True, "align")])
def test_hybrid_prefix_caching_resolved_per_release(version, on, mode):
    d = cli_json("plan", QWEN_NEXT, "--gpu", "H100", "--tp", "4", "--engine-version", version)
    assert d["given"]["enable_prefix_caching"] is None  # what the user typed: nothing
    assert d["settings"]["enable_prefix_caching"] is on
    r = d["resolved_from"]
    assert r["enable_prefix_caching"]["value"] is on and f"vLLM {version}" in r["enable_prefix_caching"]["source"]
    assert r["mamba_cache_mode"]["value"] == mode


@pytest.mark.parametrize("version, gmu, runner", [
    # config/cache.py CacheConfig: 0.9 in 0.19, 0.92 in 0.33; VLLM_USE_V2_MODEL_RUNNER 0 up to 0.21, V2 for every
    # model from 0.29 (config/vllm.py use_v2_model_runner); H100 80 GiB ≥ 70 GiB, not an A100: 8,192 / 1,024
    # (EngineArgs.get_batch_defaults, both releases); async scheduling on from 0.14 (VllmConfig.__post_init__)
    ("0.19.0", 0.9, "v1"), ("0.33.0", 0.92, "v2")])
def test_defaults_resolved_with_their_source(version, gmu, runner):
    d = cli_json("plan", MODEL, "--gpu", "H100", "--engine-version", version)
    r = d["resolved_from"]
    assert r["gpu_memory_utilization"]["value"] == gmu == d["settings"]["gpu_memory_utilization"]
    src = r["gpu_memory_utilization"]["source"]
    assert "config/cache.py" in src or "0.9000" in src  # the rule's source, or the 0.19.1 start-up line it quotes
    assert (r["max_num_batched_tokens"]["value"], r["max_num_seqs"]["value"]) == (8192, 1024)
    assert r["model_runner"]["value"] == runner
    assert r["async_scheduling"]["value"] is True
    assert r["enable_prefix_caching"]["value"] is True and d["settings"]["enable_prefix_caching"] is True


def test_a_given_flag_is_not_listed_as_resolved():
    d = cli_json("plan", QWEN_NEXT, "--gpu", "H100", "--tp", "4", "--engine-version", "0.33.0",
                 "--no-enable-prefix-caching", "--gpu-memory-utilization", "0.85")
    assert d["given"]["enable_prefix_caching"] is False and d["settings"]["enable_prefix_caching"] is False
    assert "enable_prefix_caching" not in d["resolved_from"] and "gpu_memory_utilization" not in d["resolved_from"]
    assert d["resolved_from"]["mamba_cache_mode"]["value"] == "none"  # prefix caching off: one live state


def test_async_scheduling_off_for_the_v1_runner_under_pp_on_033():
    # 0.33 config/vllm.py: v1_async_sched_incompat = "pipeline parallelism" when not use_v2_model_runner
    d = cli_json("plan", MODEL, "--gpu", "H100", "--engine-version", "0.33.0", "--pp", "2", "--model-runner", "v1")
    assert d["resolved_from"]["async_scheduling"]["value"] is False
    d = cli_json("plan", MODEL, "--gpu", "H100", "--engine-version", "0.33.0", "--pp", "2")  # V2: stays on
    assert d["resolved_from"]["async_scheduling"]["value"] is True


def test_other_engines_resolve_their_memory_fraction_only():
    # TensorRT-LLM: KvCacheConfig.free_gpu_memory_fraction defaults to 0.9 (plan_other.trtllm_plan); prefix caching
    # and the runner are vLLM's settings, left as given (null)
    d = cli_json("plan", MODEL, "--gpu", "H100", "--engine", "trtllm")
    assert d["resolved_from"] == {"free_gpu_memory_fraction": {
        "value": 0.9, "source": "free_gpu_memory_fraction 0.9 (default) of memory free after the dry run"}}
    assert d["settings"]["enable_prefix_caching"] is None


def test_max_num_seqs_lowered_to_a_smaller_given_budget_says_so():
    # vLLM 0.33 engine/arg_utils.py: with max_num_seqs not given, max_num_seqs = min(max_num_seqs,
    # max_num_batched_tokens) = min(1,024 (H100 default), 512) = 512; the source names that rule, not the batch defaults
    d = cli_json("plan", MODEL, "--gpu", "H100", "--max-num-batched-tokens", "512")
    r = d["resolved_from"]
    assert "max_num_batched_tokens" not in r  # given
    assert r["max_num_seqs"]["value"] == 512
    assert r["max_num_seqs"]["source"].startswith("vLLM 0.33.0: min(the default, the given --max-num-batched-tokens)")


@pytest.mark.parametrize("argv", [
    (MODEL, "--gpu", "H100"), (MODEL, "--gpu", "H100", "--engine-version", "0.11.0"),
    (MODEL, "--gpu", "H100", "--engine-version", "0.33.0", "--pp", "2", "--model-runner", "v1"),
    (QWEN_NEXT, "--gpu", "H100", "--tp", "4", "--engine-version", "0.19.0"),
    (MODEL, "--gpu", "H100", "--engine", "sglang"), (MODEL, "--gpu", "H100", "--engine", "trtllm")])
def test_settings_carry_every_value_resolved_from_names(argv):
    # before, settings had no async_scheduling, model_runner or mamba_cache_mode key (a script read null) while
    # resolved_from gave the value the plan applied
    d = cli_json("plan", *argv)
    resolved = {k: r["value"] for k, r in d["resolved_from"].items()}
    assert {k: d["settings"].get(k) for k in resolved} == resolved


@pytest.mark.parametrize("version, on", [
    # VllmConfig.__post_init__: off before 0.14 unless --async-scheduling (read in 0.11.0), on from 0.14 — as the
    # simulator resolves it (from_plan.default_async_scheduling)
    ("0.11.0", False), ("0.13.0", False), ("0.14.0", True), ("0.33.0", True)])
def test_settings_async_scheduling_is_the_releases_default(version, on):
    from kvledger.analyses.serving.from_plan import default_async_scheduling

    d = cli_json("plan", MODEL, "--gpu", "H100", "--engine-version", version)
    assert d["settings"]["async_scheduling"] is on is default_async_scheduling("vllm", version, "continuous")[0]
    assert d["settings"]["model_runner"] == d["resolved_from"]["model_runner"]["value"]
