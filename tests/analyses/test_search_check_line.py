"""Trial L: a candidate searched with prefix caching off carries --no-enable-prefix-caching on its `kvledger plan`
check line too, so the check re-derives the pool the search simulated. On a hybrid (Mamba) model the flag changes the
block size and so the blocks: Qwen3-Next-80B at TP 4 on H100, 8K, vLLM 0.33 — 272-token blocks with caching off,
320-token ones (align mode) with it on (tests/accounting/test_mamba_cache_mode.py)."""

from __future__ import annotations

import shlex

MODEL = "Qwen/Qwen3-Next-80B-A3B-Thinking"


def test_check_line_of_a_prefix_caching_off_candidate_reproduces_its_pool(cli_json):
    got = cli_json("search", MODEL, "--slo", "ttft=3s", "--rate", "1", "--gpus", "H100", "--tp", "4", "--max-model-len",
                "8K", "--prefix-caching", "off", "--show-command", "nvidia_h100_sxm:tp4:kv-auto:pc-off")
    check = shlex.split(got["launch"]["check"])
    assert check[-1] == "--no-enable-prefix-caching" and got["launch"]["vllm"].endswith("--no-enable-prefix-caching")
    memory = cli_json(*check[1:])["memory"]
    assert (memory["block_size"], memory["num_gpu_blocks"]) == (272, 9629)
    assert (got["plan"]["block_size"], got["plan"]["num_gpu_blocks"]) == (272, 9629)
    # the line without the flag plans caching on: another block size, other blocks (what it printed before)
    on = cli_json(*check[1:-1])["memory"]
    assert (on["block_size"], on["num_gpu_blocks"]) == (320, 8184)
