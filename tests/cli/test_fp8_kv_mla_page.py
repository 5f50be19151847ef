"""fp8-kv's page row names each column's block size: DeepSeek-V3 on H200 at TP 8 takes 16-token blocks at 16-bit
(FLASH_ATTN_MLA) and 64-token blocks at fp8 (FLASHMLA), so its fp8 page is 64 × 35,136 B = 2,248,704 B, not
"block_size 16 × bytes per token" (16 × 35,136 = 562,176)."""

from __future__ import annotations

from cli_run import run_cli


def test_dsv3_fp8_page_says_its_own_block_size():
    res = run_cli("fp8-kv", "deepseek-ai/DeepSeek-V3", "--gpu", "H200", "--tp", "8", "--concurrency", "64")
    assert res.exit_code == 0, res.output
    row = next(line for line in res.stdout.splitlines() if "page (bytes per block)" in line)
    # 16-bit: 16 × 70,272 = 1,124,352 B; fp8: 64 × 35,136 = 2,248,704 B
    assert "1,124,352 B" in row and "2,248,704 B" in row
    assert "16 tokens per block at 16-bit, 64 at fp8" in row


def test_the_capacity_sentence_compares_pages_per_token_where_the_block_size_changes():
    # DeepSeek-V3 on H200 TP 8: 40,354 blocks of 16 tokens × 70,272 B at 16-bit, 20,177 of 64 × 35,136 B at fp8:
    # per token 70,272 → 35,136 B, 2.00× smaller; token slots 40,354 × 16 = 645,664 → 20,177 × 64 = 1,291,328, 2.00×.
    # It said "shrinks the page 0.50× … and grows the pool 0.50×" (the block ratios at different block sizes)
    res = run_cli("fp8-kv", "deepseek-ai/DeepSeek-V3", "--gpu", "H200", "--tp", "8", "--concurrency", "64")
    text = " ".join(res.stdout.split())
    assert ("Capacity: FP8 KV shrinks the page per token 2.00× (1.07 MiB per 16-token block → 2.14 MiB per 64-token "
            "block) and grows the pool 2.00× in token slots: 40,354 → 20,177 blocks = 645,664 → 1,291,328 "
            "tokens") in text
    assert "0.50×" not in text



def test_a_hybrid_model_whose_fp8_block_grows_is_compared_per_token():
    # Qwen3-Next-80B-A3B at TP 4 on H100: 8,184 blocks of 320 tokens (3,932,160 B: 320 × 12,288 B of attention KV)
    # at 16-bit, 9,094 blocks of 576 (3,538,944 B: 576 × 6,144 B) at fp8 (the block follows the Mamba state's page).
    # Per token 12,288 → 6,144 B (2.00×); slots 8,184 × 320 = 2,618,880 → 9,094 × 576 = 5,238,144 (2.00×). It said
    # "shrinks the page 1.11× (3.75 MiB → 3.38 MiB per 320-token block) and grows the pool 1.11×"
    res = run_cli("fp8-kv", "Qwen/Qwen3-Next-80B-A3B-Thinking", "--gpu", "h100-sxm", "--tp", "4")
    assert res.exit_code == 0, res.output
    text = " ".join(res.stdout.split())
    assert ("shrinks the page per token 2.00× (3.75 MiB per 320-token block → 3.38 MiB per 576-token block) and grows "
            "the pool 2.00× in token slots: 8,184 → 9,094 blocks = 2,618,880 → 5,238,144 tokens") in text
