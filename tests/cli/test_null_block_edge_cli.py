"""``kvledger plan`` where one max_model_len request needs every block of vLLM's pool: vLLM before 0.29 starts (its
start-up check, v1/core/kv_cache_utils.py, counts the null block), so plan exits 0 with the warning that such a request
is never scheduled; from 0.29 the check reserves the null block and plan exits 3, as vLLM refuses."""

from __future__ import annotations

from cli_run import run_cli

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
    # vLLM 0.29's estimate: 511 usable blocks × 16 = 8,176 tokens
    assert res.exit_code == 3 and "the estimated maximum model length is 8,176" in out
