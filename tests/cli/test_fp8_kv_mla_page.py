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
