"""simulate's "the pool holds N requests of the mean length" counts a request as plan's concurrency rows do
(``accounting.window_capacity.held_blocks``): a hybrid layout's sliding groups at their window, Mamba state groups at
their pages, full attention at every block; one full-attention group keeps token slots ÷ the mean (vLLM 0.33, H100)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.analyses.serving.pool_holds import pool_holds
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model

H100 = get_gpu("H100-SXM")
GEMMA3 = str(Path(__file__).resolve().parents[1] / "fixtures" / "configs" / "google--gemma-3-27b-it.json")


def _setup(model: str, batching: str = "continuous", **kw):
    """A SimSetup's two parts pool_holds reads: the simulated pool (as the plan sizes it) and the plan."""
    p = build_plan(load_model(model), H100, make_settings(**kw), with_roofline=False, with_advice=False)
    cfg = SimpleNamespace(num_usable_blocks=p.memory.usable_blocks, block_size=p.memory.block_size, batching=batching)
    return SimpleNamespace(config=cfg, plan=p), p


def test_gemma3_27b_at_8k_holds_plans_15_not_the_token_slots_27():
    # 13,865 usable blocks of 16 (tests/cli/test_window_decode_capacity.py). Token slots 13,865 × 16 = 221,840 ÷ 8,192
    # = 27.08 → 27 (the old figure). A request of 8,192 tokens while decoding: its full group cdiv(8,192, 16) = 512
    # blocks + 6 sliding groups × (cdiv(1,023, 16) + 1 = 65) = 902 → 13,865 // 902 = 15, plan's "≈15 while decoding".
    setup, p = _setup(GEMMA3, max_model_len=8192)
    h = pool_holds(setup, 8192.0)
    assert (h.requests, h.blocks_per_request, h.token_slots) == (15, 902, 221_840)
    assert h.requests == p.row_at(8192).decode_requests
    assert "sliding layers hold ≤ 1,024 tokens + a block — the blocks before the window are freed" in h.why()
    # a mean of 2,000.4 tokens counts as 2,001: cdiv(2,001, 16) = 126 + 6 × 65 = 516 → 13,865 // 516 = 26
    assert (pool_holds(setup, 2000.4).requests, pool_holds(setup, 2000.4).blocks_per_request) == (26, 516)


def test_gpt_oss_20b_at_8k_is_plans_294():
    # 153,308 usable blocks; 8,192 tokens: full 512 + sliding cdiv(127, 16) + 1 = 9 → 521; 153,308 // 521 = 294
    # (token slots would give 153,308 × 16 / 8,192 = 299)
    setup, p = _setup("openai/gpt-oss-20b", max_model_len=8192)
    h = pool_holds(setup, 8192.0)
    assert (h.requests, h.blocks_per_request) == (294, 521) and h.requests == p.row_at(8192).decode_requests


def test_nemotron_h_counts_its_state_pages_as_plan():
    # TP 2, prefix caching on ("align"): 197 usable blocks of 4,128 tokens; 8,192 tokens: cdiv(8,192, 4,128) = 2
    # attention blocks + 6 state groups × 3 pages = 20 → 197 // 20 = 9, plan's 9 at 8,192 (token slots would give
    # 197 × 4,128 / 8,192 = 99)
    setup, p = _setup("nvidia/Nemotron-H-56B-Base-8K", tp=2)
    h = pool_holds(setup, 8192.0)
    assert (h.requests, h.blocks_per_request) == (9, 20) and h.requests == p.row_at(8192).max_requests
    assert "each Mamba state group at 3 pages, as vLLM's start-up check counts it" in h.rule


def test_one_full_attention_group_keeps_token_slots():
    # Llama-3.1-8B: 28,159 usable × 16 = 450,544 slots ÷ 2,000.5 = 225.2 → 225, no blocks per request
    setup, _ = _setup("meta-llama/Llama-3.1-8B")
    h = pool_holds(setup, 2000.5)
    assert (h.requests, h.blocks_per_request, h.rule) == (225, None, "")
    assert h.why() == "450,544 slots ÷ 2,000 tokens, prompt + output means"
    assert pool_holds(setup, 0.0) is None
