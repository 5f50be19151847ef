"""The --kv-cache-dtype fp8 fix says what the re-planned numbers do: blocks double where attention sets the page;
with Mamba / linear-attention state the page stays, so the block count stays and each block holds twice the tokens."""

from __future__ import annotations

from pathlib import Path

from cli_run import run_cli

GEMMA3 = str(Path(__file__).resolve().parents[1] / "fixtures" / "configs" / "google--gemma-3-27b-it.json")


def test_qwen3_next_on_l40s_tp4_keeps_its_blocks():
    # Qwen3-Next-80B at TP 4 on L40S (vLLM 0.33.0): 575 blocks of 272 tokens; FP8 halves the attention bytes per
    # token but the Gated DeltaNet state page is unchanged, so the attention block widens to 544 tokens to fill it:
    # 575 blocks either way.
    out = run_cli("plan", "Qwen/Qwen3-Next-80B-A3B-Thinking", "--gpu", "L40S", "--tp", "4", "--verbose").output
    assert ("--kv-cache-dtype fp8: 1 concurrent 262,144-token request (1.18x); attention pages halve but the state "
            "page stays: 575 blocks of 272 tokens → 575 of 544 (kv_cache_interface.py)") in out
    assert "blocks double" not in out


def test_gemma3_blocks_double():
    # Gemma-3-27B on H100 (attention only): the page halves, 13,866 → 27,733 blocks of 16 tokens (the re-plan).
    out = run_cli("plan", GEMMA3, "--gpu", "H100-SXM", "--verbose").output
    assert "--kv-cache-dtype fp8: 1 concurrent 131,072-token request (1.88x); page size halves, blocks double" in out
