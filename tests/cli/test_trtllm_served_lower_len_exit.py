"""TensorRT-LLM with a max_model_len its KV pool cannot hold for one request starts and lowers max_seq_len to
blocks × tokens_per_block (``_torch/pyexecutor/resource_manager.py``
``KVCacheManager.get_max_atten_window_upper_bound``; it asserts only at zero blocks): ``plan`` says
"served_at_lower_len" and exits 0, as it does for vLLM before 0.29 that starts with a request it can never schedule;
exit 3 is kept for a deployment where nothing can start."""

from __future__ import annotations

import json

from cli_run import run_cli

# Qwen3-8B's KV: 2 × 36 layers × 8 KV heads × 128 head_dim × 2 B = 147,456 B a token; 32-token blocks of 4,718,592 B.
# --available-kv-memory 4718592000B = 1,000 blocks; a 40,960-token request needs 40,960 / 32 = 1,280 blocks, so
# TensorRT-LLM lowers max_seq_len to 1,000 × 32 = 32,000 tokens.
ARGS = ("plan", "Qwen/Qwen3-8B", "--gpu", "l4", "--engine", "trtllm", "--max-model-len", "40960",
        "--available-kv-memory", "4718592000B")


def test_a_pool_short_of_one_request_exits_0_with_its_own_verdict():
    res = run_cli(*ARGS, "--json")
    a = json.loads(res.stdout)["advice"]
    assert res.exit_code == 0 and a["verdict"] == "served_at_lower_len" and a["estimated_max_model_len"] == 32_000
    res = run_cli(*ARGS)
    assert res.exit_code == 0 and "served at a lower length: TensorRT-LLM starts" in res.stdout
    assert "1,000 × 32 = 32,000 tokens" in res.stdout


def test_a_vllm_plan_of_the_same_pool_still_exits_3(cli_entry):
    # vLLM 0.33 refuses to start (check_enough_kv_cache_memory): 16-token blocks, 2,560 needed, 2,000 − 1 null usable
    code, out, _ = cli_entry("plan", "Qwen/Qwen3-8B", "--gpu", "l4", "--max-model-len", "40960",
                             "--available-kv-memory", "4718592000B", "--json")
    assert code == 3 and json.loads(out)["advice"]["verdict"] == "max_model_len_does_not_fit"
