"""Fixes from the long-context RAG trial (Llama-3.1-70B / Qwen2.5-72B-Instruct at 40K–120K prompts)."""

from __future__ import annotations

from cli_run import cli_json, refused, run_cli


def test_qwen25_72b_instruct_plans_at_its_own_32k_and_refuses_128k_as_vllm_does():
    # The Instruct's config.json says max_position_embeddings 32,768; vLLM 0.33 raises "User-specified max_model_len
    # (131072) is greater than the derived max_model_len" without VLLM_ALLOW_LONG_MAX_MODEL_LEN (config/model.py
    # _get_and_verify_max_len). Before, the Instruct planned on the base config: max_model_len 131,072 by default.
    doc = cli_json("plan", "Qwen/Qwen2.5-72B-Instruct", "--gpu", "H100-SXM", "--tp", "4")
    assert doc["settings"]["max_model_len"] == 32_768
    msg = refused("plan", "Qwen/Qwen2.5-72B-Instruct", "--gpu", "H100-SXM", "--tp", "4", "--max-model-len", "131072")
    assert "exceeds the 32,768 tokens Qwen/Qwen2.5-72B-Instruct supports" in msg


def test_simulate_counts_a_shared_prefix_once_in_its_preemption_advice():
    # 300 requests, prompts uniform 40,000–120,000 (mean 80,939 with seed 0), outputs uniform 300–800 (548): 81,486.7
    # tokens a request. Llama-3.1-70B at TP 4 on H100: 28,800 usable blocks × 16 = 460,800 slots; all 300 prompts
    # start with the same 20,000 tokens (1,250 full blocks, cached once). Pool: (460,800 − 20,000) ÷ (81,486.7 −
    # 20,000) = 7.17 → 7 (the old 460,800 ÷ 81,486.7 = 5.65 → 5, while the run's batch peaked at 9); fp8 KV:
    # 57,602 usable blocks × 16 = 921,632 → (921,632 − 20,000) ÷ 61,486.7 = 14.66 → 14 (was 11); TP 8: 83,863 × 16 =
    # 1,341,808 → 21.5 → 21 (was 16); the cap --max-num-seqs 7 (was 5).
    doc = cli_json("simulate", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "H100-SXM", "--tp", "4",
                   "--prompt-lengths", "uniform:40000:120000", "--output-lengths", "uniform:300:800",
                   "--shared-prefix-tokens", "20000", "--rate", "0.5", "--num-requests", "300",
                   "--max-model-len", "131072")
    p = doc["preemptions"]
    held = (p["mean_requests_pool_holds"], p["shared_prefix_tokens_held_once"], p["running_max"]["requests"])
    assert held == (7, 20_000, 9)
    counts = {o["action"]: o["requests_of_observed_size"] for o in p["options"]}
    assert [counts[a] for a in ("--kv-cache-dtype fp8", "--tensor-parallel-size 8", "--max-num-seqs 7")] == [14, 21, 7]
    assert "(460,800 slots − 20,000 shared-prefix tokens, cached once for every request) ÷ 61,487 tokens" in p["why"]


def test_disk_bandwidth_is_said_per_gpu():
    # The simulator divides each GPU's share of a prefix by --nvme-read-bandwidth: Llama-3.1-70B at TP 4 holds 81,920 B
    # of KV per token per GPU, so a 131,071-token prefix is 10,737,336,320 B per GPU, 1.534 s at 7 GB/s — one drive per
    # GPU. The help and the tier note now say so, and what a shared drive means.
    out = " ".join(run_cli("offload", "--help").output.split())  # the help's lines joined
    assert "disk read bandwidth per GPU, GB/s (default 7, an assumption: one PCIe Gen4 x4 drive for each GPU" in out
    doc = cli_json("plan", "meta-llama/Llama-3.1-70B", "--gpu", "H100-SXM", "--tp", "4", "--kv-offloading-size", "512",
                   "--kv-offloading-backend", "lmcache", "--kv-tier-nvme", "2TiB")
    text = str(doc)
    assert "NVMe and remote bandwidths are assumptions, per GPU" in text
