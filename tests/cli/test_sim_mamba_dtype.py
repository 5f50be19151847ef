"""--mamba-ssm-cache-dtype on the simulating commands: the same values, checks and pool as `kvledger plan`
(Qwen3-Next-80B-A3B at TP 4 on H100, max_model_len 32,768, vLLM 0.33.0; Nemotron-H-56B-Base-8K at TP 2)."""

from __future__ import annotations

import json

from cli_run import refused, run_cli

QWEN = ("Qwen/Qwen3-Next-80B-A3B-Instruct", "--gpu", "H100-SXM", "--tp", "4", "--max-model-len", "32768")
SIM = ("--prompt-lengths", "fixed:200", "--output-lengths", "fixed:20", "--rate", "inf", "--num-requests", "4")


def _pools(*extra: str) -> tuple[tuple[int, int], tuple[int, int]]:
    """((plan's blocks, block size), (simulate's blocks, block size)) for the same flags."""
    m = json.loads(run_cli("plan", *QWEN, "--json", *extra).stdout)["memory"]
    e = json.loads(run_cli("simulate", *QWEN, *SIM, "--json", *extra).stdout)["engine"]
    return (m["num_gpu_blocks"], m["block_size"]), (e["num_gpu_blocks"], e["block_size"])


def test_simulate_sizes_the_pool_as_plan_at_each_ssm_dtype():
    # Qwen3-Next: 36 Gated DeltaNet + 12 full layers in 4 groups of 12 slots; per GPU at TP 4 one layer's state page is
    # (24,576 conv + 524,288 SSM elements) / 4 and one full layer's KV is 2 × 1 KV head × 256 × 2 B = 1,024 B/token.
    # auto (the model dtype, bfloat16: Qwen3-Next has no config hook): page (49,152 + 1,048,576) / 4 = 274,432 B →
    #   274,432 / 1,024 = 268 tokens, aligned up to 320 (a multiple of 64); a block is 320 × 1,024 × 12 = 3,932,160 B.
    # float32: page (49,152 + 2,097,152) / 4 = 536,576 B → 524 tokens → 576; a block 576 × 1,024 × 12 = 7,077,888 B.
    # The available KV is the same 29.97 GiB for both (32,183,156,736 ≤ bytes < 32,184,729,600): ⌊/ 3,932,160⌋ =
    # 8,184 blocks (8,183 usable × 320 = 2,618,560 token slots) and ⌊/ 7,077,888⌋ = 4,547 (4,546 × 576 = 2,618,496).
    auto_plan, auto_sim = _pools("--mamba-ssm-cache-dtype", "auto")
    f32_plan, f32_sim = _pools("--mamba-ssm-cache-dtype", "float32")
    assert auto_plan == auto_sim == (8184, 320)
    assert f32_plan == f32_sim == (4547, 576)
    assert _pools()[1] == (8184, 320)  # left out: auto


def test_nemotron_h_float16_as_plan():
    # Nemotron-H's auto is float32 (its config hook, vLLM 0.20+): 198 blocks of 4,128 tokens; float16 halves the SSM
    # page and the block (2,080 tokens) and about doubles the blocks, 393 (tests/cli/test_mamba_flags.py works both).
    nemo = ("nvidia/Nemotron-H-56B-Base-8K", "--gpu", "H100-SXM", "--tp", "2", *SIM, "--json")
    for extra, pool in (((), (198, 4128)), (("--mamba-ssm-cache-dtype", "float16"), (393, 2080))):
        doc = json.loads(run_cli("simulate", *nemo, *extra).stdout)
        assert (doc["engine"]["num_gpu_blocks"], doc["engine"]["block_size"]) == pool
    assert any(n.startswith("Mamba SSM state in float32 (4 B per element): --mamba-ssm-cache-dtype auto becomes vLLM's "
                            "default for Nemotron-H (float32)") for n in json.loads(run_cli("simulate", *nemo).stdout)
               ["notes"])


def test_simulate_says_when_it_has_no_effect():
    # as plan says it (tests/cli/test_mamba_flags.py): Llama-3.1-8B keeps no state layer
    doc = json.loads(run_cli("simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100-SXM", *SIM, "--json",
                             "--mamba-ssm-cache-dtype", "float16").stdout)
    assert "--mamba-ssm-cache-dtype float16 has no effect: the model keeps no Mamba (SSM) state" in doc["notes"]


def test_simulating_commands_refuse_what_plan_refuses():
    assert refused("simulate", *QWEN, *SIM, "--mamba-ssm-cache-dtype", "fp8") == (
        "--mamba-ssm-cache-dtype fp8: vLLM accepts auto, float32, float16, bfloat16")
    msg = refused("simulate", *QWEN, *SIM, "--policy", "sglang", "--mamba-ssm-cache-dtype", "float32")
    assert msg.startswith("--mamba-ssm-cache-dtype is a vLLM flag") and "with --policy sglang" in msg
    # goodput and cost take it with --simulate only, as every simulation flag
    msg = refused("goodput", "nofile.json", "--slo", "ttft=200ms", "--mamba-ssm-cache-dtype", "float32")
    assert msg.startswith("--mamba-ssm-cache-dtype describes a simulation; add --simulate MODEL")


def test_goodput_and_cost_simulate_take_it():
    # the flag reaches the simulated plan, which refuses fp8 as plan does (cost searches its own rates: no --rate)
    cost = ("cost", "--simulate", *QWEN, *SIM[:4], "--num-requests", "50")
    for cmd in (("goodput", "--simulate", *QWEN, *SIM), cost):
        assert refused(*cmd, "--slo", "ttft=200ms", "--mamba-ssm-cache-dtype", "fp8").startswith(
            "--mamba-ssm-cache-dtype fp8: vLLM accepts auto")


def test_offload_reads_it_as_plan():
    off = ("offload", *QWEN, "--kv-offloading-size", "64")
    assert refused(*off, "--mamba-ssm-cache-dtype", "fp8") == (
        "--mamba-ssm-cache-dtype fp8: vLLM accepts auto, float32, float16, bfloat16")
    msg = refused(*off[:-2], "--engine", "sglang", "--mamba-ssm-cache-dtype", "float32")
    assert msg.startswith("--mamba-ssm-cache-dtype is a vLLM flag") and "with --engine sglang" in msg


def test_search_plans_simulates_and_launches_every_candidate_with_it():
    # the one candidate (H100, TP 4) is planned as plan plans float32 above: 4,547 blocks of 576 tokens; its vllm and
    # check lines carry the flag, so the check line's plan is that pool
    argv = ("search", "Qwen/Qwen3-Next-80B-A3B-Instruct", "--slo", "ttft=2000ms,tpot=200ms", "--gpu", "H100-SXM",
            "--tp", "4", "--max-model-len", "32768", "--prompt-lengths", "fixed:200", "--output-lengths", "fixed:20",
            "--num-requests", "50", "--rate", "1")
    doc = json.loads(run_cli(*argv, "--mamba-ssm-cache-dtype", "float32", "--json").stdout)
    launch = doc["winner"]["launch"]
    assert doc["spec"]["mamba_ssm_cache_dtype"] == "float32"
    assert "4,547 KV blocks of 576 tokens per TP group (4 GPUs)" in launch["note"]  # each rank holds the pool
    assert launch["vllm"].endswith("--mamba-ssm-cache-dtype float32")
    assert launch["check"].endswith("--mamba-ssm-cache-dtype float32")
    assert refused(*argv, "--mamba-ssm-cache-dtype", "fp8") == (
        "--mamba-ssm-cache-dtype fp8: vLLM accepts auto, float32, float16, bfloat16")
