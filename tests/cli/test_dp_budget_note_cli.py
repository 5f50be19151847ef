"""`kvledger plan` prints the DP + EP token-budget note (advice_mnbt.dp_budget_note) beside the DP ranks' lines, not
only under --verbose."""

from __future__ import annotations

from cli_run import run_cli


def test_plan_prints_it_beside_the_dp_lines():
    # Qwen3-30B-A3B DP 2 + EP on an H100, vLLM 0.19.0: 25,910 blocks at 8,192 (tests/cli/test_all2all_cli.py);
    # at max(8,192 // 2, 1,024) = 4,096 the rows are 2 × 4,096 = 8,192 and the pool 26,262 blocks:
    # 25,910 × 16 / 40,960 = 10.12× → 26,262 × 16 / 40,960 = 10.26×
    out = run_cli("plan", "Qwen/Qwen3-30B-A3B", "--gpu", "H100", "-dp", "2", "--enable-expert-parallel",
                  "--engine-version", "0.19.0").stdout
    assert "note: DP + EP token budget: the profile run's MoE layers gather DP 2 × 8,192 = 16,384 rows" in out
    assert "25,910 → 26,262 KV blocks and 10.12× → 10.26×" in " ".join(out.split())
