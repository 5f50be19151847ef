"""kvledger.search takes all2all_backend (the DP candidates') and prefix_cache_retention_interval, and kvledger.simulate
and kvledger.goodput take long_prefill_token_threshold, long_prefill_token_threshold_adaptive and
prefix_cache_retention_interval, as the commands take the flags (and kvledger.cost the parameters): the same values
reach the run, refused with the same words, naming the parameter."""

from __future__ import annotations

import pytest

import kvledger
from kvledger.errors import InputError

L8 = "meta-llama/Llama-3.1-8B"
SMALL = dict(gpu="H100", prompt_lengths="fixed:2K", output_lengths="fixed:16", rate=1.0, num_requests=5)
# the sliding-window worked case (tests/cli/test_retention_interval_cli.py): gpt-oss-20b, W = 128, B = 16, 10 prompts
# of 10,000 tokens sharing their first 8,000, one after another
SWA = dict(gpu="h100", prompt_lengths="fixed:10000", output_lengths="fixed:10", shared_prefix_tokens=8000,
           concurrency=1, num_requests=10, max_model_len=16384, engine_version="0.33.0")


def test_simulate_takes_the_long_prefill_flags():
    # vLLM 0.30.0 keeps the cap for a request alone (its scheduler, before 0.31); the threshold reaches the engine
    d = kvledger.simulate(L8, engine_version="0.30.0", long_prefill_token_threshold=512, **SMALL).to_dict()
    assert d["engine"]["long_prefill_token_threshold"] == 512 and d["engine"]["long_prefill_cap_alone"] is True
    # the adaptive floor exists from 0.31.0: refused before, in vLLM's words with the parameter's name
    with pytest.raises(InputError, match=r"long_prefill_token_threshold_adaptive: vLLM 0\.30\.0 refuses it at argument "
                                         "parsing"):
        kvledger.simulate(L8, engine_version="0.30.0", long_prefill_token_threshold=512,
                          long_prefill_token_threshold_adaptive=True, **SMALL)


def test_simulate_and_goodput_take_the_retention_interval():
    # I = 256: prompt 2 hits 7,936 = 31 × 256 tokens, prompts 3–10 the junction's 8,000:
    # 7,936 + 8 × 8,000 = 71,936 of 10 × 10,000 = 100,000 prompt tokens (64,000 without it)
    d = kvledger.simulate("openai/gpt-oss-20b", prefix_cache_retention_interval=256, **SWA).to_dict()
    assert (d["summary"]["prefix_cache_hit_tokens"], d["summary"]["prefix_cache_query_tokens"]) == (71_936, 100_000)
    g = kvledger.goodput("openai/gpt-oss-20b", slo="ttft=2s", prefix_cache_retention_interval=256, cache=False,
                         **SWA).to_dict()
    assert any("before every multiple of 256 tokens" in n for n in g["simulation"]["notes"])
    # 250 is off the scheduler block grid (16): vLLM's own refusal
    with pytest.raises(InputError, match=r"must be non-negative and a multiple of scheduler_block_size \(16\)"):
        kvledger.goodput("openai/gpt-oss-20b", slo="ttft=2s", prefix_cache_retention_interval=250, cache=False,
                         **SWA)


def test_goodput_takes_the_long_prefill_threshold_and_names_a_bad_one():
    g = kvledger.goodput(L8, slo="ttft=2s", long_prefill_token_threshold=512, cache=False, **SMALL).to_dict()
    assert g["simulation"]["engine"]["long_prefill_token_threshold"] == 512
    with pytest.raises(InputError, match=r"^kvledger\.goodput: long_prefill_token_threshold -1 is out of range"):
        kvledger.goodput(L8, slo="ttft=2s", long_prefill_token_threshold=-1, cache=False, **SMALL)


def test_search_carries_all2all_and_the_interval_into_its_spec(monkeypatch):
    import kvledger.analyses.search.search_run as search_run  # the run path the command and the call share

    seen = {}

    def stop(spec, ax, run):
        seen["spec"] = spec
        raise RuntimeError("stopped before any candidate")

    monkeypatch.setattr(search_run, "run_candidates", stop)
    with pytest.raises(RuntimeError, match="stopped"):
        kvledger.search("Qwen/Qwen3-30B-A3B", slo="ttft=1s", gpus=["H100"], data_parallel_size=[1, 2],
                        engine_version="0.33.0", all2all_backend="deepep_low_latency",
                        prefix_cache_retention_interval=256, cache=False)
    assert seen["spec"].all2all_backend == "deepep_low_latency"
    assert seen["spec"].prefix_cache_retention_interval == 256


def test_search_refuses_them_before_any_candidate():
    with pytest.raises(InputError, match="invalid choice: 'bogus'"):
        kvledger.search("Qwen/Qwen3-30B-A3B", slo="ttft=1s", gpus=["H100"], data_parallel_size=[1, 2],
                        engine_version="0.19.0", all2all_backend="bogus", cache=False)
    # 0.22: no flag and no VLLM_PREFIX_CACHE_RETENTION_INTERVAL (first in 0.23's envs.py)
    with pytest.raises(InputError, match=r"prefix_cache_retention_interval 256: vLLM 0\.22\.0 refuses it at argument"):
        kvledger.search("openai/gpt-oss-20b", slo="ttft=1s", gpus=["H100"], engine_version="0.22.0",
                        prefix_cache_retention_interval=256, cache=False)
