"""simulate's "the pool holds N requests of the mean length" counts a request as plan's concurrency rows do
(``accounting.window_capacity.held_blocks``): a hybrid layout's sliding groups at their window, Mamba state groups at
the pages vLLM holds while decoding, full attention at every block; one full-attention group keeps token slots ÷ the
mean (vLLM 0.33, H100)."""

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


def test_nemotron_h_counts_its_state_pages_as_vllm_holds_them_while_decoding():
    # TP 2, prefix caching on ("align", vLLM 0.33): 197 usable blocks of 4,128 tokens, 1 full-attention group and 6
    # state groups (54 Mamba-2 layers in groups of 10). vLLM's start-up check counts 2 + 1 checkpoint = 3 pages per
    # state group: 8,192 tokens → cdiv(8,192, 4,128) = 2 + 6 × 3 = 20 → 197 // 20 = 9 (plan's start-up figure).
    # While decoding, MambaManager frees every state page before the last computed token's at each step, so a request
    # holds 1 page per state group, 2 in the step that crosses a block boundary (here at token 4,128): 2 + 6 × 2 = 14
    # → 197 // 14 = 14, plan's "≈14 while decoding" (token slots would give 197 × 4,128 / 8,192 = 99).
    setup, p = _setup("nvidia/Nemotron-H-56B-Base-8K", tp=2)
    h = pool_holds(setup, 8192.0)
    assert (h.requests, h.blocks_per_request) == (14, 14) and h.requests == p.row_at(8192).decode_requests
    assert p.row_at(8192).max_requests == 9 and p.row_at(8192).blocks_per_request == 20
    assert "each Mamba state group holds ≤ 2 pages: 1 between steps, 2 while a step crosses a block boundary" in h.rule
    assert "MambaManager.remove_skipped_blocks" in h.rule
    # a mean of 2,000 tokens stays within one 4,128-token block, never crosses one: 1 + 6 × 1 = 7 → 197 // 7 = 28, the
    # batch the simulator peaked at on this deployment (the start-up count, 1 + 6 × 3 = 19, gave 197 // 19 = 10)
    assert (pool_holds(setup, 2000.0).requests, pool_holds(setup, 2000.0).blocks_per_request) == (28, 7)


def test_nemotron_h_without_prefix_caching_holds_one_page_as_counted():
    # --no-enable-prefix-caching: mamba_cache_mode none, 1 page per state group at start-up and while decoding (the
    # Mamba block is max_model_len long): 2 + 6 × 1 = 8 blocks at 8,192 tokens, no separate decoding figure
    setup, p = _setup("nvidia/Nemotron-H-56B-Base-8K", tp=2, enable_prefix_caching=False)
    h = pool_holds(setup, 8192.0)
    assert h.blocks_per_request == 8 and h.requests == p.row_at(8192).max_requests
    assert p.row_at(8192).decode_requests is None
    assert "each Mamba state group at 1 page (mamba_cache_mode none)" in h.rule


def test_qwen3_next_80b_tp4_state_pages_while_decoding():
    # TP 4 on H100, align mode with FlashInfer GDN prefill checkpoints: 3 pages per state group at start-up; 8,183
    # usable blocks of 320 tokens; 1 full-attention group (12 layers) and 3 state groups (36 GDN layers / 12).
    # 8,192 tokens: start-up cdiv(8,192, 320) = 26 + 3 × 3 = 35 → 8,183 // 35 = 233; decoding 26 + 3 × 2 = 32 →
    # 8,183 // 32 = 255. 32,768 tokens: 103 + 9 = 112 → 73; decoding 103 + 6 = 109 → 75.
    setup, p = _setup("Qwen/Qwen3-Next-80B-A3B-Instruct", tp=4, contexts=[8192, 32768])
    assert (p.memory.usable_blocks, p.memory.block_size) == (8183, 320)
    for tokens, start, held, n_start, n_held in ((8192, 35, 32, 233, 255), (32768, 112, 109, 73, 75)):
        h, r = pool_holds(setup, float(tokens)), p.row_at(tokens)
        assert (r.blocks_per_request, r.max_requests) == (start, n_start)
        assert (h.blocks_per_request, h.requests) == (held, n_held) == (r.decode_blocks_per_request, r.decode_requests)
    # 300 tokens, within one block: 1 + 3 × 1 = 4 → 8,183 // 4 = 2,045
    assert pool_holds(setup, 300.0).blocks_per_request == 4


def test_one_full_attention_group_keeps_token_slots():
    # Llama-3.1-8B: 28,159 usable × 16 = 450,544 slots ÷ 2,000.5 = 225.2 → 225, no blocks per request
    setup, _ = _setup("meta-llama/Llama-3.1-8B")
    h = pool_holds(setup, 2000.5)
    assert (h.requests, h.blocks_per_request, h.rule) == (225, None, "")
    assert h.why() == "450,544 slots ÷ 2,000 tokens, prompt + output means"
    assert pool_holds(setup, 0.0) is None


def test_a_shared_prefix_is_held_once_not_per_request():
    # Llama-3.1-70B at TP 4 on H100: 28,800 usable blocks × 16 = 460,800 slots. A workload of prompt mean 80,939 and
    # output mean 548 (81,487 tokens) whose every prompt starts with the same 20,000 tokens (1,250 full blocks, vLLM's
    # hash cache shares them with a reference count): (460,800 − 20,000) ÷ (81,487 − 20,000) = 440,800 ÷ 61,487 =
    # 7.17 → 7 requests; the old count, 460,800 ÷ 81,487 = 5.65 → 5, took the prefix once per request.
    setup, _ = _setup("meta-llama/Llama-3.1-70B", tp=4)
    assert setup.config.num_usable_blocks * 16 == 460_800
    setup.config.enable_prefix_caching = True
    setup.workload_info = {"shared_prefix_tokens": 20_000, "shared_prefix_requests": 300, "num_requests": 300}
    h = pool_holds(setup, 81_487.0)
    assert (h.requests, h.shared_tokens, h.private_mean_tokens) == (7, 20_000, 61_487.0)
    assert "(460,800 slots − 20,000 shared-prefix tokens, cached once for every request) ÷ 61,487 tokens" in h.why()
    # A 20,007-token prefix shares only its 1,250 full blocks (20,000 tokens: the partial block is each request's);
    # half the prompts reaching it: (460,800 − 20,000) ÷ (81,487 − 0.5 × 20,000) = 440,800 ÷ 71,487 = 6.17 → 6.
    setup.workload_info = {"shared_prefix_tokens": 20_007, "shared_prefix_requests": 150, "num_requests": 300}
    assert (pool_holds(setup, 81_487.0).requests, pool_holds(setup, 81_487.0).shared_tokens) == (6, 20_000)
    # Prefix caching off: every request prefills and holds its own copy, 460,800 ÷ 81,487 → 5.
    setup.config.enable_prefix_caching = False
    assert (pool_holds(setup, 81_487.0).requests, pool_holds(setup, 81_487.0).shared_tokens) == (5, 0)
