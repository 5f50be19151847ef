"""simulate's preemption explanation on a sliding-window model counts the requests the pool holds as plan counts them
(gpt-oss-20b on H100, vLLM 0.33.0, max_model_len 8,192, a 3,000-block pool: 2,999 usable blocks of 16 tokens)."""

from __future__ import annotations

import json

from cli_run import run_cli

RUN = ("simulate", "openai/gpt-oss-20b", "--gpu", "H100-SXM", "--max-model-len", "8192",
       "--num-gpu-blocks-override", "3000", "--prompt-lengths", "fixed:500", "--output-lengths", "fixed:500",
       "--rate", "inf", "--num-requests", "200")


def test_gpt_oss_pool_holds_and_the_batch_cap_follow_plans_count():
    # the mean request is 500 + 500 = 1,000 tokens; while decoding it holds cdiv(1,000, 16) = 63 full-attention
    # blocks + cdiv(127, 16) + 1 = 9 sliding blocks (window 128) = 72, so 2,999 // 72 = 41 such requests at once
    # (token slots would say 2,999 × 16 = 47,984 ÷ 1,000 = 47, more than run at once)
    doc = json.loads(run_cli(*RUN, "--json").output)
    p = doc["preemptions"]
    assert (p["mean_requests_pool_holds"], p["mean_request_blocks"]) == (41, 72)
    assert "SlidingWindowManager" in p["mean_requests_rule"]
    assert any(o["action"] == "--max-num-seqs 41" and o["requests_of_observed_size"] == 41 for o in p["options"])
    out = " ".join(run_cli(*RUN).output.split())  # the text's lines wrapped at the console's width
    assert ("while the pool holds 41 requests of this workload's mean length at once while decoding (2,999 usable "
            "blocks ÷ 72 blocks per 1,000-token request at the prompt + output means, as `kvledger plan` counts a "
            "request while decoding under vLLM's hybrid KV cache manager: sliding layers hold ≤ 128 tokens + a block"
            ) in out
    assert "--max-num-seqs 41 (as counted above: the requests of the mean length the pool holds" in out


def test_gpt_oss_seq_cap_note_counts_the_same_way():
    # --max-num-seqs 8 at 40 req/s: 8 requests decode at once holding ≤ 8 × 72 = 576 of 2,999 blocks (≤ 19.2 %), so
    # the cap held the batch; the pool holds 2,999 // 72 = 41 requests of the 1,000-token mean, as above
    capped = (*RUN[:-4], "--rate", "40", "--num-requests", "600", "--max-num-seqs", "8", "--json")
    doc = json.loads(run_cli(*capped).output)
    c = doc["overload"]["seq_cap"]
    assert (c["kv_pool_requests"], c["kv_pool_request_blocks"], c["kv_pool_tokens"]) == (41, 72, 47_984)
    assert ("one replica's KV pool holds about 41 requests of this run's mean length (2,999 usable blocks ÷ 72 blocks "
            "per 1,000-token request") in c["note"]
