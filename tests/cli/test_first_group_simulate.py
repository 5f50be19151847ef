"""``kvledger simulate`` follows the plan's vLLM release's start-up check: 0.14–0.18 count the first KV cache group
alone (v1/core/kv_cache_utils.py ``_max_memory_usage_bytes_from_groups``, read in 0.14.0, 0.17.0 and 0.18.0), so they
start with a pool shorter than one max_model_len request; the simulator runs it where no request of the workload
reaches past the usable blocks, and refuses naming the first one that would (it would wait forever).

gpt-oss-20b, 24 layers alternating sliding (window 128, first) and full: with 8,192 tokens in flight the check counts
the sliding group's cdiv(min(127 + 8,192, 131,072), 16) + 1 = 521 blocks ≤ 1,000, while a 131,072-token request holds
min(cdiv(n, 16), cdiv(127, 16) + 1) + cdiv(n, 16) = 9 + 8,192 = 8,201 blocks at n = 131,072 (> 999 usable)."""

from __future__ import annotations

from cli_run import refused, run_cli

SIM = ("simulate", "openai/gpt-oss-20b", "--gpu", "H100", "--max-model-len", "131072", "--num-gpu-blocks-override",
       "1000", "--engine-version", "0.17.0", "--rate", "1", "--num-requests", "2")


def test_017_pool_runs_where_no_request_outgrows_it():
    # 2,000 + 100 tokens: 2,099 computed, 9 + cdiv(2,099, 16) = 9 + 132 = 141 blocks ≤ 999 usable
    res = run_cli(*SIM, "--prompt-lengths", "fixed:2000", "--output-lengths", "fixed:100")
    out = " ".join(res.stdout.split())
    assert res.exit_code == 0, res.output
    assert ("vLLM 0.17.0 starts with this pool, but a request that computes more tokens than its 999 usable blocks "
            "hold is never scheduled (its start-up check counts only the first of the 2 KV cache groups") in out
    assert "max_model_len 131,072 needs 8,201 blocks); no request of this workload computes that many tokens" in out


def test_017_pool_refused_naming_the_request_that_outgrows_it():
    # 20,000 + 100 tokens: 20,099 computed, 9 + cdiv(20,099, 16) = 9 + 1,257 = 1,266 blocks > 999
    msg = " ".join(refused(*SIM, "--prompt-lengths", "fixed:20000", "--output-lengths", "fixed:100").split())
    assert ("request 'synthetic-0' (20,000 prompt + 100 output tokens) computes 20,099 tokens, 1,266 blocks, so it "
            "would wait forever (2 of 2 requests would)") in msg
