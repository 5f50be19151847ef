"""``kvledger plan`` where one max_model_len request needs every block of vLLM's pool: vLLM before 0.29 starts (its
start-up check, v1/core/kv_cache_utils.py, counts the null block), so plan exits 0 with the warning that such a request
is never scheduled; from 0.29 the check reserves the null block and plan exits 3, as vLLM refuses."""

from __future__ import annotations

from cli_run import refused, run_cli

# --num-gpu-blocks-override 512 (vLLM 0.28 sizes its check from it: available = 512 × the block's bytes) and
# max_model_len 8,192 = 512 blocks of 16 tokens: the whole pool; 511 usable (block 0 is the null block) = 8,176 tokens.
ARGS = ("plan", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100", "--max-model-len", "8192",
        "--num-gpu-blocks-override", "512", "--engine-version")


def test_028_starts_with_the_warning_and_exits_0():
    res = run_cli(*ARGS, "0.28.0")
    out = " ".join(res.stdout.split())
    assert res.exit_code == 0, res.output
    assert "fits: vLLM 0.28.0 starts, but a request of max_model_len 8,192 tokens can never be scheduled" in out
    assert "→ --max-model-len 8176: 1 concurrent 8,176-token request (1.00x)" in out  # 511 / 511 blocks


def test_029_refuses_and_exits_3():
    res = run_cli(*ARGS, "0.29.0")
    out = " ".join(res.stdout.split())
    # vLLM 0.29's estimate: 511 usable blocks × 16 = 8,176 tokens, the fix the short plan gives (its words, vLLM's
    # "estimated maximum model length", under --verbose)
    assert res.exit_code == 3 and "→ --max-model-len 8176: 1 concurrent 8,176-token request (1.00x)" in out
    assert "its 511 usable blocks hold (512 less vLLM's null block); short by 0.00 GiB" in out
    full = " ".join(run_cli(*ARGS, "0.29.0", "--verbose").stdout.split())
    assert "the estimated maximum model length is 8,176" in full and "block_pool.py keeps block 0 for itself" in full


SIM = ("simulate", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100", "--max-model-len", "8192",
       "--num-gpu-blocks-override", "512", "--engine-version", "0.28.0", "--rate", "1", "--num-requests", "5",
       "--prompt-lengths", "fixed:8000")


def test_simulate_runs_the_edge_when_no_request_reaches_it_with_a_warning():
    # 8,000 prompt + 100 output tokens: the last sampled token is never computed, so 8,099 tokens, ⌈8,099 / 16⌉ = 507
    # blocks ≤ the 511 usable: vLLM 0.28 serves every request. Before, the whole run was refused at the edge
    res = run_cli(*SIM, "--output-lengths", "fixed:100")
    out = " ".join(res.stdout.split())
    assert res.exit_code == 0, res.output
    assert ("vLLM 0.28.0 starts with this pool, but a request that computes more tokens than its 511 usable blocks "
            "hold is never scheduled (its start-up check counts the null block before 0.29; max_model_len 8,192 needs "
            "512 blocks); no request of this workload computes that many tokens") in out


def test_simulate_refuses_the_edge_naming_the_request_that_reaches_it():
    # 8,000 + 200 = 8,200 > 8,192: vLLM v1 caps the output at 192 tokens, so the request computes 8,191 tokens,
    # ⌈8,191 / 16⌉ = 512 blocks > 511 usable: it would wait forever, and so would the run (exit 3, does not fit)
    msg = " ".join(refused(*SIM, "--output-lengths", "fixed:200").split())
    assert ("request 'synthetic-0' (8,000 prompt + 200 output tokens) computes 8,191 tokens, 512 blocks, so it would "
            "wait forever (5 of 5 requests would); --max-model-len 8176 runs every request") in msg
