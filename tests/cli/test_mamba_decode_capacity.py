"""Hybrid Mamba / Gated-DeltaNet models: plan keeps vLLM's start-up check (each state group at the pages
``MambaSpec.max_memory_usage_bytes`` counts) and adds what runs at once while decoding, when ``MambaManager`` holds the
page of each request's last computed state and, for the step that crosses a block boundary, the page it reads (vLLM
0.33.0, vllm/v1/core/single_type_kv_cache_manager.py: get_num_skipped_tokens = computed − 1, remove_skipped_blocks
frees the pages below it); simulate's "the pool holds N" and its --max-num-seqs follow the same count."""

from __future__ import annotations

import json

from cli_run import run_cli

NEMOTRON = ("nvidia/Nemotron-H-56B-Base-8K", "--gpu", "H100-SXM", "--tp", "2")


def test_nemotron_h_56b_tp2_plan_start_up_and_decoding():
    # 198 blocks of 4,128 tokens (197 usable); 1 full-attention group (10 layers) and 6 state groups (54 Mamba-2
    # layers, 10 a group). Start-up check, align mode: 2 + 1 checkpoint = 3 pages a state group; 8,192 tokens:
    # cdiv(8,192, 4,128) = 2 + 6 × 3 = 20 blocks → 198 / 20 = 9.90x, 197 // 20 = 9 requests.
    # While decoding: ≤ 2 pages a state group (the last state's page, and the page a step crossing token 4,128 writes
    # while the old one is read): 2 + 6 × 2 = 14 → 198 / 14 = 14.14x, 197 // 14 = 14. At 2,048 tokens a request
    # never crosses a block: 1 + 6 × 1 = 7 → 197 // 7 = 28 (start-up 1 + 18 = 19 → 10).
    doc = json.loads(run_cli("plan", *NEMOTRON, "--context", "2K,8K", "--json").output)
    rows = {r["context_tokens"]: r for r in doc["concurrency"]}
    assert (rows[8192]["blocks_per_request"], rows[8192]["max_requests"]) == (20, 9)
    assert (rows[8192]["decode_blocks_per_request"], rows[8192]["decode_requests"]) == (14, 14)
    assert round(rows[8192]["decode_concurrency"], 2) == 14.14
    assert (rows[2048]["blocks_per_request"], rows[2048]["max_requests"]) == (19, 10)
    assert (rows[2048]["decode_blocks_per_request"], rows[2048]["decode_requests"]) == (7, 28)
    out = " ".join(run_cli("plan", *NEMOTRON, "--context", "2K,8K").output.split())  # lines wrapped at the width
    # the short plan says what the state groups hold once, on its concurrency line, and the verdict no more again
    assert "9 concurrent 8,192-token requests at start-up (9.90x); ≈14 at once while decoding" in out
    # the rows' ≈ figures in one list (28 at 2,048, 14 at 8,192) and the state groups' bound; the pages at each point of
    # a step, the rows' own ≈ figures and the engine's printed line under --verbose
    assert ("8,192 tokens: 9 requests (9.90x, range 9.00–10.25x) — the requests and × are vLLM's start-up check; "
            "≈28/14 at once while decoding (each Mamba state group holds ≤ 2 pages)") in out
    assert out.count("each Mamba state group holds ≤ 2 pages") == 1
    # how the start-up check counts the state groups and which manager frees them: the full ledger (--verbose); the
    # short plan keeps the clause's facts within its 26 lines
    full = " ".join(run_cli("plan", *NEMOTRON, "--context", "2K,8K", "--verbose").output.split())
    assert ("9 concurrent 8,192-token requests at vLLM's start-up check (the engine's printed 9.90x); ≈14 at once "
            "while decoding (each Mamba state group holds ≤ 2 pages: 1 between steps, 2 while a step crosses a block "
            "boundary") in full
    assert "each Mamba state group counted at 3 pages (MambaSpec.max_memory_usage_bytes)" in full
    assert "8,192 tokens: 9 requests (9.90x, range 9.00–10.25x), ≈14 while decoding" in full
    assert ("are vLLM's start-up check (its printed \"Maximum concurrency\": each Mamba state group counted at 3 pages"
            in full) and "1 between steps" not in out
    assert "MambaManager.remove_skipped_blocks" in full and "MambaManager.remove_skipped_blocks" not in out


def test_nemotron_h_56b_tp2_without_prefix_caching_has_no_decoding_figure():
    # mamba_cache_mode none: one state page at start-up and while decoding, 2 + 6 = 8 blocks → 197 // 8 = 24
    doc = json.loads(run_cli("plan", *NEMOTRON, "--no-enable-prefix-caching", "--context", "8K", "--json").output)
    row = doc["concurrency"][0]
    assert (row["blocks_per_request"], row["max_requests"]) == (8, 24) and row.get("decode_requests") is None


def test_qwen3_next_80b_tp4_plan_decoding():
    # 8,184 blocks of 320 tokens (8,183 usable); 1 full group (12 layers), 3 state groups (36 GDN layers); FlashInfer
    # GDN prefill on H100 exports checkpoints: 3 pages a state group at start-up. 32,768 tokens: cdiv(32,768, 320) =
    # 103 + 9 = 112 → 73; while decoding 103 + 3 × 2 = 109 → 8,183 // 109 = 75.
    doc = json.loads(run_cli("plan", "Qwen/Qwen3-Next-80B-A3B-Instruct", "--gpu", "H100-SXM", "--tp", "4", "--context",
                             "32K", "--json").output)
    row = doc["concurrency"][0]
    assert (row["blocks_per_request"], row["max_requests"], row["decode_blocks_per_request"],
            row["decode_requests"]) == (112, 73, 109, 75)


def test_nemotron_h_56b_simulate_pool_holds_and_max_num_seqs():
    # prompts of 1,000 and outputs of 3,400 tokens (mean 4,400 > one 4,128-token block): the batch is admitted at
    # 1 + 6 = 7 blocks each (197 // 7 = 28, the simulated peak) and outgrows the pool as it decodes past token 4,128,
    # so it preempts. A 4,400-token request holds ≤ 2 + 6 × 2 = 14 blocks while decoding: the pool holds
    # 197 // 14 = 14 of them, and --max-num-seqs 14 is suggested (the start-up count, 20 blocks, said 9).
    run = ("simulate", *NEMOTRON, "--prompt-lengths", "fixed:1000", "--output-lengths", "fixed:3400", "--rate", "inf",
           "--num-requests", "80")
    p = json.loads(run_cli(*run, "--json").output)["preemptions"]
    assert p["num_preemptions"] > 0 and p["running_max"]["requests"] == 28
    assert (p["mean_requests_pool_holds"], p["mean_request_blocks"]) == (14, 14)
    assert "MambaManager.remove_skipped_blocks" in p["mean_requests_rule"]
    assert any(o["action"] == "--max-num-seqs 14" for o in p["options"])
    capped = json.loads(run_cli(*run, "--max-num-seqs", "14", "--json").output)
    assert not capped.get("preemptions")
