"""vLLM's --prefix-cache-retention-interval in simulate, goodput --simulate, cost --simulate and kvledger.cost
(analyses/serving/retention_flag.py; the rules: tests/dynamics/test_swa_retention.py, test_mamba_prefix.py)."""

from __future__ import annotations

import pytest
from cli_run import MODEL, cli_json, refused, run_cli

import kvledger
from kvledger.errors import InputError

# the sliding-window worked case (tests/cli/test_swa_prefix_cli.py): gpt-oss-20b, W = 128, B = 16 (need 8), 10 prompts
# of 10,000 tokens sharing their first 8,000 (500 blocks), one after another
SWA = ("openai/gpt-oss-20b", "--gpu", "h100", "--prompt-lengths", "fixed:10000", "--output-lengths", "fixed:10",
       "--shared-prefix-tokens", "8000", "--concurrency", "1", "--num-requests", "10", "--max-model-len", "16384",
       "--engine-version", "0.33.0")
# the Mamba worked case (tests/cli/test_mamba_prefix_cli.py): Qwen3-Next at TP 2 on H200, B = 576, chunks of 8,064
MAMBA = ("simulate", "Qwen/Qwen3-Next-80B-A3B-Thinking", "--gpu", "H200", "--tp", "2", "--prompt-lengths",
         "fixed:32000", "--output-lengths", "fixed:1", "--shared-prefix-tokens", "30000", "--concurrency", "1",
         "--num-requests", "20", "--max-num-batched-tokens", "8192")


def test_a_sliding_window_interval_lets_the_second_prompt_hit():
    # I = 256 (16 blocks a segment): prompt 1 keeps sliding blocks i % 16 ≥ 8, so prompt 2's 500-block chain walks
    # back to 496 blocks (blocks 488–495 kept: 7,936 = 31 × 256 tokens) and its junction 8,000 keeps 492–499;
    # prompts 3–10 hit 8,000: 7,936 + 8 × 8,000 = 71,936 of 100,000 (without the flag 64,000)
    d = cli_json("simulate", *SWA, "--prefix-cache-retention-interval", "256")
    assert (d["summary"]["prefix_cache_hit_tokens"], d["summary"]["prefix_cache_query_tokens"]) == (71_936, 100_000)
    assert any("before every multiple of 256 tokens (--prefix-cache-retention-interval)" in n for n in d["notes"])
    # the engine JSON says which retention ran: 256 here, vLLM 0.33's default 0 without the flag, null at 0.28 (no
    # interval: every full block kept) and for a model with no hybrid rule (Llama-3.1-8B: full attention only)
    assert d["engine"]["prefix_cache_retention_interval"] == 256
    assert d["engine"]["step_blocks"] == "vLLM per-step hybrid rule (sliding-window / Mamba groups)"
    assert cli_json("simulate", *SWA)["engine"]["prefix_cache_retention_interval"] == 0
    assert cli_json("simulate", *SWA[:-1], "0.28.0")["engine"]["prefix_cache_retention_interval"] is None
    assert cli_json("simulate", MODEL, "--gpu", "h100", "--num-requests", "5")["engine"][
        "prefix_cache_retention_interval"] is None


def test_a_mamba_interval_on_the_chunk_grid_keeps_the_chunk_end_states():
    # I = 8,064 (14 blocks, the chunk length): request 1's states at 8,064, 16,128, 24,192 are kept, so request 2 hits
    # 24,192 and requests 3–20 the junction's 29,952: 24,192 + 18 × 29,952 = 563,328 of 640,000 (without: 539,136)
    out = run_cli(*MAMBA, "--prefix-cache-retention-interval", "8064").output
    assert "prefix cache: hit rate 88.0% (563,328 of 640,000 prompt tokens)" in out
    assert "every multiple of 8,064 tokens where a chunk ends or checkpoints" in out


def test_zero_is_the_default():
    d = cli_json("simulate", *SWA, "--prefix-cache-retention-interval", "0")
    assert d["summary"]["prefix_cache_hit_tokens"] == 64_000  # as without the flag (test_swa_prefix_cli.py)
    assert any(n.startswith("--prefix-cache-retention-interval 0: vLLM 0.33.0's default") for n in d["notes"])


def test_the_variable_set_to_0_on_0_28_keeps_0_29_s_default_rule():
    # vLLM 0.28.0 with VLLM_PREFIX_CACHE_RETENTION_INTERVAL=0: SlidingWindowManager.reachable_block_mask lays no
    # segment tails and keeps the replay boundary's and the junction's, as 0.29's default 0. The worked case
    # (swa_retention.py): prompt 1 hits 0, prompt 2's sliding blocks 492–499 were not kept (hit 0, its junction
    # 8,000 keeps them), prompts 3–10 hit 8,000 each: 8 × 8,000 = 64,000 of 100,000 (the variable unset: every block
    # kept, prompts 2–10 hit 8,000: 72,000)
    d = cli_json("simulate", *SWA[:-1], "0.28.0", "--prefix-cache-retention-interval", "0")
    assert (d["summary"]["prefix_cache_hit_tokens"], d["summary"]["prefix_cache_query_tokens"]) == (64_000, 100_000)
    assert d["engine"]["prefix_cache_retention_interval"] == 0
    assert any("simulated as VLLM_PREFIX_CACHE_RETENTION_INTERVAL=0" in n for n in d["notes"])
    assert cli_json("simulate", *SWA[:-1], "0.28.0")["summary"]["prefix_cache_hit_tokens"] == 72_000
    # 0.28 refuses the variable set, 0 too, on a model with no sliding-window or Mamba group ("Unset it"; 0.29
    # takes 0 there)
    msg = refused("simulate", MODEL, "--gpu", "h100", "--num-requests", "5", "--engine-version", "0.28.0",
                  "--prefix-cache-retention-interval", "0")
    assert "no sliding-window or Mamba KV cache group, so retention has no effect. Unset it" in msg


def test_goodput_and_cost_simulate_take_it():
    slo = ("--slo", "ttft:2s")
    g = cli_json("goodput", "--simulate", *SWA, *slo, "--prefix-cache-retention-interval", "256")
    c = cli_json("cost", "--simulate", *SWA, *slo, "--api", "gpt-4o-mini", "--at-offered-load",
                 "--prefix-cache-retention-interval", "256")
    for d in (g, c):
        assert any("before every multiple of 256 tokens" in n for n in d["simulation"]["notes"])


@pytest.mark.parametrize("args, words", [
    (("--engine-version", "0.22.0", "--prefix-cache-retention-interval", "256"),
     'vLLM 0.22.0 refuses it at argument parsing ("vllm serve: error: unrecognized arguments: '
     '--prefix-cache-retention-interval 256")'),
    (("--engine-version", "0.25.0", "--prefix-cache-retention-interval", "0"),
     "0.23–0.25 read the environment variable VLLM_PREFIX_CACHE_RETENTION_INTERVAL instead (unset: every block "
     "kept, the default simulated); set to 0 is not modelled there"),
    (("--prefix-cache-retention-interval", "250"),
     '"prefix_cache_retention_interval (250) must be non-negative and a multiple of scheduler_block_size (16)."'),
    (("--prefix-cache-retention-interval", "256", "--policy", "sglang"), "is a vLLM flag"),
])
def test_refused_as_vllm_refuses(args, words):
    # gpt-oss-20b's groups all have 16-token blocks: scheduler_block_size = lcm = 16, and 250 is not a multiple
    assert words in refused("simulate", *SWA[:-2], *args)


def test_a_model_without_sliding_or_mamba_groups_refuses_a_positive_interval():
    msg = refused("simulate", MODEL, "--gpu", "h100", "--num-requests", "5", "--prefix-cache-retention-interval", "16")
    assert "this model has no sliding-window or Mamba KV cache group, so retention has no effect" in msg
    d = cli_json("simulate", MODEL, "--gpu", "h100", "--num-requests", "5", "--prefix-cache-retention-interval", "0")
    assert d["workload"]["num_requests"] == 5  # 0 is accepted (vLLM returns before the group check)


def test_with_prefix_caching_off_it_is_checked_and_said_to_change_nothing():
    d = cli_json("simulate", *SWA, "--prefix-cache-retention-interval", "256", "--no-enable-prefix-caching")
    assert d["summary"]["prefix_cache_hit_tokens"] == 0
    assert ("--prefix-cache-retention-interval 256 with --no-enable-prefix-caching: vLLM 0.33.0 checks it at start-up "
            "but caches no block, so it changes nothing here") in d["notes"]
    # still refused off the block grid (kv_cache_coordinator.py validates it whether caching is on or off)
    assert "must be non-negative and a multiple of scheduler_block_size (16)" in refused(
        "simulate", *SWA, "--prefix-cache-retention-interval", "250", "--no-enable-prefix-caching")


def test_a_negative_interval_is_out_of_range():
    assert "prefix-cache-retention-interval" in refused("simulate", *SWA, "--prefix-cache-retention-interval", "-16")


def test_the_api_takes_it_as_cost_does():
    # refused in the API's words (the parameter, not the flag), as cost --simulate refuses the flag
    with pytest.raises(InputError, match="prefix_cache_retention_interval 256: vLLM 0.22.0 refuses it at") as e:
        kvledger.cost(simulate="openai/gpt-oss-20b", gpu="h100", slo="ttft:2s", api="gpt-4o-mini",
                      engine_version="0.22.0", prefix_cache_retention_interval=256, at_offered_load=True,
                      num_requests=5, cache=False)
    # vLLM's own words, quoted, keep vLLM's flag; kvledger's advice outside the quotes names the parameter
    assert '("vllm serve: error: unrecognized arguments: --prefix-cache-retention-interval 256")' in str(e.value)
    assert str(e.value).endswith("drop it, or use engine_version 0.29.0 or later")



def test_simulate_and_goodput_apis_take_it_as_their_commands_do():
    # the sliding-window worked case through kvledger.simulate: 7,936 + 8 × 8,000 = 71,936 (as the command), the
    # engine JSON saying 256; kvledger.goodput runs the same simulation (its summary's hits are the run's)
    kw = dict(prompt_lengths="fixed:10000", output_lengths="fixed:10", shared_prefix_tokens=8000, concurrency=1,
              num_requests=10, max_model_len=16384, engine_version="0.33.0", prefix_cache_retention_interval=256)
    doc = kvledger.simulate("openai/gpt-oss-20b", "h100", **kw)
    assert doc.summary["prefix_cache_hit_tokens"] == 71_936
    assert doc.to_dict()["engine"]["prefix_cache_retention_interval"] == 256
    with pytest.raises(InputError, match="prefix_cache_retention_interval 250: vLLM 0.33.0 refuses to start"):
        kvledger.simulate("openai/gpt-oss-20b", "h100", **{**kw, "prefix_cache_retention_interval": 250})
    g = kvledger.goodput("openai/gpt-oss-20b", "h100", slo="ttft=2s", cache=False, **kw).to_dict()
    assert g["simulation"]["engine"]["prefix_cache_retention_interval"] == 256


SEARCH = ("search", "openai/gpt-oss-20b", "--slo", "ttft=2s,tpot=100ms", "--gpus", "H100", "--tp", "1",
          "--max-model-len", "16K", "--prompt-lengths", "fixed:10000", "--output-lengths", "fixed:10",
          "--shared-prefix-tokens", "8000", "--num-requests", "50", "--utilization", "0.5", "--backend", "serial")


def test_search_simulates_with_it_and_its_vllm_line_carries_it():
    d = cli_json(*SEARCH, "--engine-version", "0.33.0", "--prefix-cache-retention-interval", "256")
    assert d["spec"]["prefix_cache_retention_interval"] == 256
    (c,) = d["candidates"]
    assert c["launch"]["vllm"].endswith("--max-num-batched-tokens 8192 --prefix-cache-retention-interval 256")
    assert "retention" not in c["launch"]["check"]  # kvledger plan has no such flag: the pool does not depend on it


def test_search_refuses_it_before_any_candidate_for_vllm_before_0_23():
    msg = refused(*SEARCH, "--engine-version", "0.22.0", "--prefix-cache-retention-interval", "256")
    assert msg.startswith("--prefix-cache-retention-interval 256: vLLM 0.22.0 refuses it at argument parsing")


def test_search_refuses_a_positive_interval_for_a_model_without_sliding_or_mamba_layers_before_any_candidate():
    # Llama-3.1-8B has full-attention layers only: vLLM refuses a positive interval at any GPU or TP, so search says
    # so once, exit 2 (it was each candidate's 'simulation error', exit 1, with '--resume LEDGER to redo only those')
    args = ("search", MODEL, "--slo", "ttft=2s,tpot=100ms", "--gpus", "H100", "--tp", "1,2", "--rate", "1",
            "--num-requests", "50", "--backend", "serial", "--prefix-cache-retention-interval", "16")
    assert refused(*args) == (
        "--prefix-cache-retention-interval 16: vLLM 0.33.0 refuses to start (v1/core/kv_cache_coordinator.py "
        "_validate_prefix_cache_retention_interval): \"prefix_cache_retention_interval is set but this model has no "
        "sliding-window or Mamba KV cache group, so retention has no effect. Set it to 0 (it only applies to "
        "sliding-window and Mamba attention).\" Drop it, or give 0")
    assert refused("simulate", MODEL, "--gpu", "h100", "--num-requests", "5", "--prefix-cache-retention-interval",
                   "16") == refused(*args)  # simulate's words, from the plan's groups


def test_the_search_api_takes_it_and_refuses_it_before_any_candidate():
    # kvledger.search passes it to the search as --prefix-cache-retention-interval does: refused for a model with
    # full attention only (Llama-3.1-8B) and for vLLM 0.22 before any candidate is planned, in the API's words
    kw = dict(slo="ttft=2s,tpot=100ms", gpus=["H100"], tp=[1], rate=1, num_requests=50)
    with pytest.raises(InputError, match="prefix_cache_retention_interval 16: vLLM 0.33.0 refuses to start .*this "
                                         "model has no sliding-window or Mamba KV cache group"):
        kvledger.search(MODEL, prefix_cache_retention_interval=16, **kw)
    with pytest.raises(InputError, match="prefix_cache_retention_interval 256: vLLM 0.22.0 refuses it at argument"):
        kvledger.search("openai/gpt-oss-20b", engine_version="0.22.0", prefix_cache_retention_interval=256, **kw)


@pytest.mark.parametrize("version, hit_tokens", [("0.25.0", 71_424), ("0.28.0", 71_936)])
def test_before_0_29_it_stands_for_the_environment_variable(version, hit_tokens):
    # VLLM_PREFIX_CACHE_RETENTION_INTERVAL=256 (envs.py, 0.23–0.28; unset: every block kept, 72,000 at 0.28). As the
    # 0.33 case above: prompt 2 walks back from its 500-block chain to 496 (blocks 488–495 kept, i % 16 ≥ 8): 7,936.
    # 0.28 (0.26 on: reachable_block_mask's reachable_boundaries) keeps prompt 2's junction 492–499:
    # 7,936 + 8 × 8,000 = 71,936. 0.25 (0.23–0.25) keeps the replay boundary's tail only (num_prompt_tokens − 1), so
    # prompts 3–10 walk back as prompt 2 did: 9 × 7,936 = 71,424 of 100,000.
    d = cli_json("simulate", *SWA[:-1], version, "--prefix-cache-retention-interval", "256")
    assert d["summary"]["prefix_cache_hit_tokens"] == hit_tokens
    assert f"--prefix-cache-retention-interval 256: vLLM {version} has no such flag (it came in 0.29.0); simulated " \
           "as VLLM_PREFIX_CACHE_RETENTION_INTERVAL=256 in the server's environment" in " ".join(d["notes"])


def prefix_line(*args: str) -> str:
    out = run_cli(*MAMBA, *args).output
    return next(line.strip() for line in out.splitlines() if "prefix cache: hit rate" in line)


def test_before_0_29_the_environment_variable_keeps_mamba_states_as_each_release_does():
    # the Mamba case with VLLM_PREFIX_CACHE_RETENTION_INTERVAL = 8,160 (MambaManager.reachable_block_mask): 0.23–0.28
    # lay Qwen3-Next out with B = 544, so chunks are 15 blocks = 8,160 (the interval: the chunk grid). Request 1's
    # chunks end at 8,160, 16,320, 24,480 (multiples of I: kept) and 31,552 (P − P % B up to 0.31, its replay
    # boundary (32,000 − 1) // 544 × 544: kept). Request 2's chain is 55 blocks (29,920): it hits 24,480 and its
    # chunk stops at the junction 29,920 (0.24–0.25 the admitted chunk, 0.26 on every chunk).
    # 0.28 (reachable_boundaries) keeps that state: requests 3–20 hit 29,920: 24,480 + 18 × 29,920 = 563,040.
    # 0.25 (num_prompt_tokens only) does not: every request from the second hits 24,480: 19 × 24,480 = 465,120
    # (unset, 0.25 keeps every chunk end: 563,040). Prefix caching is on by default for hybrids from 0.26 only.
    on = ("--enable-prefix-caching", "--prefix-cache-retention-interval", "8160")
    assert prefix_line("--engine-version", "0.28.0", *on).startswith(
        "prefix cache: hit rate 88.0% (563,040 of 640,000 prompt tokens)")
    assert prefix_line("--engine-version", "0.25.0", *on).startswith(
        "prefix cache: hit rate 72.7% (465,120 of 640,000 prompt tokens)")
    # 0.23 does not start: its _validate_prefix_cache_retention_interval (v1/core/kv_cache_coordinator.py, read in
    # 0.23.0) takes only a SlidingWindowSpec group, and Qwen3-Next has full-attention and Mamba groups (Mamba counted
    # from 0.24.0)
    assert refused(*MAMBA, "--engine-version", "0.23.0", *on) == (
        "--prefix-cache-retention-interval 8160: vLLM 0.23.0 refuses to start (v1/core/kv_cache_coordinator.py "
        "_validate_prefix_cache_retention_interval): \"VLLM_PREFIX_CACHE_RETENTION_INTERVAL is set but this model has "
        "no sliding-window KV cache group, so retention has no effect. Unset it (the feature only applies to "
        "sliding-window attention).\" Drop it")


def test_releases_before_0_29_refuse_a_model_without_their_groups_in_the_variable_s_words():
    # kv_cache_coordinator.py::_validate_prefix_cache_retention_interval names VLLM_PREFIX_CACHE_RETENTION_INTERVAL
    # and says "Unset it" in 0.24.0-0.28.0 (read in 0.24, 0.25, 0.26, 0.28); 0.29.0 names the field and says "Set it
    # to 0" (test above). Llama-3.1-8B (full attention only) on 0.28 with the variable at 16:
    assert refused("simulate", MODEL, "--gpu", "h100", "--num-requests", "5", "--engine-version", "0.28.0",
                   "--prefix-cache-retention-interval", "16") == (
        "--prefix-cache-retention-interval 16: vLLM 0.28.0 refuses to start (v1/core/kv_cache_coordinator.py "
        "_validate_prefix_cache_retention_interval): \"VLLM_PREFIX_CACHE_RETENTION_INTERVAL is set but this model has "
        "no sliding-window or Mamba KV cache group, so retention has no effect. Unset it (it only applies to "
        "sliding-window and Mamba attention).\" Drop it")
    # search refuses Qwen3-Next (full + Mamba layers) on 0.23 before any candidate, in 0.23's words
    with pytest.raises(InputError, match="vLLM 0.23.0 refuses to start .*VLLM_PREFIX_CACHE_RETENTION_INTERVAL is set "
                                         "but this model has no sliding-window KV cache group"):
        kvledger.search("Qwen/Qwen3-Next-80B-A3B-Thinking", engine_version="0.23.0",
                        prefix_cache_retention_interval=8160, slo="ttft=2s,tpot=100ms", gpus=["H200"], tp=[2],
                        rate=1, num_requests=50)


def test_search_launches_vllm_before_0_29_with_the_environment_variable():
    d = cli_json(*SEARCH, "--engine-version", "0.28.0", "--prefix-cache-retention-interval", "256")
    (c,) = d["candidates"]
    assert c["launch"]["vllm"].startswith("VLLM_PREFIX_CACHE_RETENTION_INTERVAL=256 vllm serve openai/gpt-oss-20b ")
    assert "--prefix-cache-retention-interval" not in c["launch"]["vllm"]  # 0.28's argparse refuses the flag
