"""simulate on a Mamba hybrid (Qwen3-Next-80B, TP 4, H100): the engine line says the prefix caching the launch has —
vLLM 0.33 turns it on by default for hybrids and pages the pool for it ("align" mode: 8,184 blocks of 320 tokens;
with --no-enable-prefix-caching, 9,629 of 272, as plan prints) — and that its reuse is not simulated where no prompt
shares a prefix (the default trace); --enable-prefix-caching simulates it (vLLM 0.33's Mamba rule, mamba_prefix.py)."""

from __future__ import annotations

import json

from cli_run import run_cli

Q3N = ("simulate", "Qwen/Qwen3-Next-80B-A3B-Thinking", "--gpu", "H100-SXM", "--tp", "4", "--num-requests", "20")


def test_engine_line_says_prefix_caching_is_on_at_launch_and_not_simulated():
    out = run_cli(*Q3N).output
    assert ("engine: 8,184 KV blocks × 320 tokens" in out and "prefix caching on at launch (the pool paged as vLLM "
            "pages it), its reuse not simulated" in out)
    on = json.loads(run_cli(*Q3N, "--enable-prefix-caching", "--json").output)["engine"]
    assert "prefix_caching_at_launch" not in on and on["enable_prefix_caching"] is True


def test_no_enable_prefix_caching_is_off_with_the_smaller_blocks():
    out = run_cli(*Q3N, "--no-enable-prefix-caching").output
    assert "engine: 9,629 KV blocks × 272 tokens" in out and "prefix caching off," in out
