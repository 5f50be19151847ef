"""Short plans of hybrid models past 26 lines at 80 columns (a sweep over the bundled configs): Qwen3-Next-80B (Gated
DeltaNet, 27–31 lines under vLLM and SGLang), Jamba-v0.1 (Mamba, 27–28) and Kimi-K2 under SGLang at TP 8 on H200 (29).
The short plan folds the roofline's per-context list and the rows' "while decoding" figures into one list each, and
leaves the Mamba pages at each point of a step, why decode attention varies, SGLang's fixed budget terms by name and its
lower-length rules to --verbose; the per-context concurrency and the KV pool stay."""

from __future__ import annotations

import re

import pytest
from cli_run import run_cli

# the bundled configs by their Hub ids (a config file's path lengthens the title by its own length)
QWEN3_NEXT = "Qwen/Qwen3-Next-80B-A3B-Thinking"
JAMBA = "ai21labs/Jamba-v0.1"
KIMI_K2 = "moonshotai/Kimi-K2-Instruct"

# (model, engine, TP, GPU): the lines each took before, at 80 columns
OVER = [(QWEN3_NEXT, "vllm", 8, "H100"),  # 31
        (QWEN3_NEXT, "vllm", 8, "H200"), (QWEN3_NEXT, "vllm", 4, "H200"), (QWEN3_NEXT, "vllm", 2, "H200"),  # 30
        (QWEN3_NEXT, "vllm", 4, "H100"), (QWEN3_NEXT, "sglang", 8, "H100"), (QWEN3_NEXT, "sglang", 4, "H100"),  # 29
        (QWEN3_NEXT, "sglang", 4, "H200"), (QWEN3_NEXT, "sglang", 2, "H200"), (QWEN3_NEXT, "sglang", 2, "H100"),  # 27
        (JAMBA, "vllm", 1, "H200"), (JAMBA, "sglang", 8, "H200"), (JAMBA, "sglang", 4, "H200"),  # 28
        (JAMBA, "sglang", 2, "H100"),  # 28
        (JAMBA, "vllm", 4, "H200"), (JAMBA, "sglang", 8, "H100"), (JAMBA, "sglang", 1, "H200"),  # 27
        (KIMI_K2, "sglang", 8, "H200")]  # 29


def _plan(model: str, engine: str, tp: int, gpu: str, *more: str) -> tuple[list[str], str]:
    res = run_cli("plan", model, "--engine", engine, "--tp", str(tp), "--gpu", gpu, *more, columns=80)
    assert res.exit_code in (0, 3), res.output
    return res.stdout.splitlines(), " ".join(res.stdout.split())


@pytest.mark.parametrize(("model", "engine", "tp", "gpu"), OVER)
def test_hybrid_short_plan_within_26_lines(model, engine, tp, gpu):
    lines, _ = _plan(model, engine, tp, gpu)
    assert len(lines) <= 26 and max(len(line) for line in lines) <= 80, "\n".join(lines)


def test_qwen3_next_tp8_h100_short_plan_keeps_the_answer():
    lines, flat = _plan(QWEN3_NEXT, "vllm", 8, "H100")
    # 21,893 blocks of 192 tokens; 262,144 tokens: cdiv(262,144, 192) = 1,366 full-attention blocks + 3 state groups ×
    # 3 pages at start-up = 1,375 → 21,893 / 1,375 = 15.92x, 15 requests; while decoding 1,366 + 3 × 2 = 1,372 →
    # 21,892 // 1,372 = 15. Each row keeps its requests and ×; the ≈ figures in one list, in the rows' order
    assert "21,893 blocks of 192 tokens (21,156–22,935)" in flat
    assert "262,144 tokens: 15 requests (15.92x, range 15.38–16.68x) — the requests and × are vLLM's start-up" in flat
    assert "≈1,287/446/123/31/15 at once while decoding (each Mamba state group holds ≤ 2 pages);" in flat
    # the state bytes a request reads: 36 layers × (24,576 + 524,288) × 2 B / TP 8 = 4,939,776 B, why decode attention
    # varies with the context: --verbose's
    assert "4,939,776 B of recurrent or compressor state" not in flat
    fold = re.search(r"decode attention FLOP/B at 2K/8K/32K/128K/256K tokens: ([0-9./]+), bandwidth-bound", flat)
    full = " ".join(run_cli("plan", QWEN3_NEXT, "--tp", "8", "--gpu", "H100", "--verbose").stdout.split())
    by_context = re.search(r"tokens of context \(([^:]*): each request also reads a fixed 4,939,776 B of recurrent or "
                           r"compressor state\)", full)
    assert fold and by_context  # the short list says the full ledger's figures, context by context
    assert fold.group(1).split("/") == [c.split(" at ")[0] for c in by_context.group(1).split(", ")]
    assert "262,144 tokens: 15 requests (15.92x, range 15.38–16.68x), ≈15 while decoding" in full
    assert "1 between steps, 2 while a step crosses a block boundary" in full


def test_kimi_k2_sglang_short_budget_and_lower_length():
    _, flat = _plan(KIMI_K2, "sglang", 8, "H200")
    # the pool: 7,064 token slots; max_req_len = min(131,072, 7,064) − 1 = 7,063; prompts of 7,063 − 5 = 7,058 tokens
    # or more aborted. The short plan counts SGLang's four fixed terms (RoPE buffer, segment tails, MLA's w_kc/w_vc
    # copies, weight-load overhead); --verbose names them and the rules
    assert ("free before the weights load 137.29 GiB less weights, 4 other terms, reserve (1 − mem_fraction_static "
            "0.886) of it) → 7,064 blocks of 1 token (0–46,349)") in flat
    assert "so max_req_len = 7,063: prompts of 7,058 tokens or more are aborted" in flat
    full = " ".join(run_cli("plan", KIMI_K2, "--engine", "sglang", "--tp", "8", "--gpu", "H200",
                            "--verbose").stdout.split())
    assert ("less weights, RoPE cos/sin buffer, allocator segment tails, MLA w_kc/w_vc copies, weight-load overhead, "
            "reserve (1 − mem_fraction_static 0.886) × free before load") in full
    assert "— the low end does not start: the engine may refuse" in full


def test_sglang_dp_attention_short_plan_within_26_lines():
    # DP attention's line folds the ranks' totals into one list and the rule to its head (34 lines before): the
    # per-rank rows stay, and 2 × 798 = 1,596 requests of 2,048 tokens lead the totals (the product under --verbose)
    lines, flat = _plan("deepseek-ai/DeepSeek-V2-Lite", "sglang", 2, "H100", "--attn-dp-size", "2")
    assert len(lines) <= 26 and max(len(line) for line in lines) <= 80, "\n".join(lines)
    assert "each its own scheduler and KV pool (figures per GPU are one rank's)" in flat
    totals = re.search(r"requests held at once in all: ([\d,]+) / ", flat)
    per_rank = re.search(r"2,048 tokens: ([\d,]+) requests", flat)
    assert totals and per_rank and int(totals[1].replace(",", "")) == 2 * int(per_rank[1].replace(",", ""))
