"""simulate's Mamba prefix caching end to end: Qwen3-Next-80B at TP 2 on H200 (vLLM 0.33 pages it in 576-token blocks
with prefix caching on), the worked case of tests/dynamics/test_mamba_prefix.py — 20 sequential 32,000-token prompts
sharing 30,000 tokens — prints the release's rule and its hit rate; vLLM 0.19's default launches without caching."""

from __future__ import annotations

from cli_run import run_cli

RUN = ("simulate", "Qwen/Qwen3-Next-80B-A3B-Thinking", "--gpu", "H200", "--tp", "2", "--prompt-lengths",
       "fixed:32000", "--output-lengths", "fixed:1", "--shared-prefix-tokens", "30000", "--concurrency", "1",
       "--num-requests", "20", "--max-num-batched-tokens", "8192")


def test_vllm_033_hits_the_junction_state():
    out = run_cli(*RUN).output
    # 18 × 29,952 of 20 × 32,000 prompt tokens (the derivation: tests/dynamics/test_mamba_prefix.py)
    assert "engine: 7,414 KV blocks × 576 tokens" in out
    assert "prefix cache: hit rate 84.2% (539,136 of 640,000 prompt tokens)" in out
    assert "note: Mamba prefix caching as vLLM 0.33.0 (mamba_cache_mode align, rule read in 0.29, 0.33)" in out


def test_vllm_019_default_is_off_and_says_why():
    out = run_cli(*RUN, "--engine-version", "0.19.0").output
    assert "prefix cache: hit rate 0.0% (0 of 640,000 prompt tokens)" in out
    assert "note: prefix caching off: vLLM 0.19.0 launches this Mamba hybrid without it" in out


def test_mamba_cache_mode_all_hits_every_cached_block():
    # Jamba-v0.1 at TP 4 with --enable-prefix-caching, vLLM 0.19: mamba_cache_mode all (SupportsMambaPrefixCaching),
    # blocks of 2,048 tokens. 10 sequential 10,000-token prompts sharing 8,000: 3 shared full blocks (6,144 tokens),
    # the hit cap (10,000 − 1) // 2,048 = 4 blocks is above them; prompt 1 keeps the state of every block, so prompts
    # 2–10 hit 6,144 each: 55,296 of 100,000 (before "all" mode was modelled: none simulated)
    out = run_cli("simulate", "ai21labs/Jamba-v0.1", "--gpu", "h100", "--tp", "4", "--engine-version", "0.19.0",
                  "--enable-prefix-caching", "--prompt-lengths", "fixed:10000", "--output-lengths", "fixed:10",
                  "--shared-prefix-tokens", "8000", "--concurrency", "1", "--num-requests", "10",
                  "--max-model-len", "16384").output
    assert "engine: 5,593 KV blocks × 2,048 tokens" in out
    assert "prefix cache: hit rate 55.3% (55,296 of 100,000 prompt tokens)" in out
    assert "note: Mamba prefix caching as vLLM 0.19.0 (mamba_cache_mode all, read in 0.19 and 0.27)" in out


def test_up_to_0_31_a_prompt_of_a_multiple_of_b_runs_in_one_chunk():
    # Qwen3-Next at 0.28: B = 544; 10 sequential copies of one 5,440-token prompt (10 blocks), budget 8,192. The hit
    # is capped at (5,440 − 1) // 544 = 9 blocks = 4,896 tokens, so it needs the state after 4,896. vLLM 0.28's split
    # stops at 5,440 − 5,440 % 544 = 5,440: copy 1 runs in one chunk (state at 5,440 only) → copy 2 hits 0 and stops at
    # its junction 4,896 (kept); copies 3–10 hit 4,896: 8 × 4,896 = 39,168 of 54,400. (0.32's split, (5,440 − 1) //
    # 544 × 544 = 4,896, would have copy 1 stop there: 9 × 4,896 = 44,064.)
    out = run_cli("simulate", "Qwen/Qwen3-Next-80B-A3B-Thinking", "--gpu", "H200", "--tp", "2", "--engine-version",
                  "0.28.0", "--num-requests", "10", "--prompt-lengths", "fixed:5440", "--output-lengths", "fixed:1",
                  "--shared-prefix-tokens", "5440", "--concurrency", "1", "--max-num-batched-tokens", "8192").output
    assert "engine: 7,851 KV blocks × 544 tokens" in out
    assert "prefix cache: hit rate 72.0% (39,168 of 54,400 prompt tokens)" in out
