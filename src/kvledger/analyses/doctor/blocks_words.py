"""What doctor says when the ledger agrees with a start-up's capacity figures, worded by the figures themselves: the
block count reproduced only where the ledger's equals the log's; otherwise how many blocks apart and why.

The usual cause is the print: vLLM writes "Available KV cache memory: X GiB" to 2 decimals (gpu_worker.py ::
determine_available_memory, vLLM 0.19.0) and sizes the pool from the unrounded bytes, ``floor(available /
bytes_per_block)`` (kv_cache_utils.py :: get_num_blocks). The ledger, given only the printed X, takes it as exact;
n blocks need between n and n + 1 blocks' bytes, so the log's count is explained by the rounding when that span
prints as X.
"""

from __future__ import annotations

from kvledger.analyses.doctor.types import ComparisonRow
from kvledger.units import GiB

__all__ = ["REPRODUCED", "capacity_words"]

REPRODUCED = "the ledger reproduces the log's block count, printed tokens and concurrency from the log's KV memory"


def _others(rows: list[ComparisonRow]) -> str:
    """The capacity figures checked besides the block count, as the headline names them."""
    names = [("tokens" if r.unit == "tokens" else "concurrency" if r.unit == "x" else r.term)
             for r in rows if r.agrees is not None and r.unit != "blocks"]
    return " and ".join(dict.fromkeys(f"printed {n}" if n == "tokens" else n for n in names)) or "nothing else"


def capacity_words(rows: list[ComparisonRow], available_bytes: float | None, bytes_per_block: int | None,
                   pp: int = 1) -> str:
    """The headline for a start-up whose capacity checks all agree (``StartupComparison.consistent``): ``REPRODUCED``
    where the ledger's block count equals the log's; else the printed tokens and concurrency reproduced from the log's
    block count, and the block count ``n`` apart, with why: the 2-decimal GiB print where the log's count rounds to the
    printed memory (derived: the bytes ``n`` and ``n + 1`` blocks take, in GiB), pipeline parallelism (the first
    stage's memory bounds the count), or the smallest rank's pool (the GPU blocks row says how much less memory)."""
    blocks = next((r for r in rows if r.unit == "blocks" and r.agrees is not None), None)
    if blocks is None or blocks.difference == 0:
        return REPRODUCED
    n_log, n_led, d = int(blocks.log_value), int(blocks.ledger_value), int(blocks.difference)
    head = (f"the ledger reproduces the log's {_others(rows)} from the log's block count; from the log's KV memory "
            f"it gives {n_led:,} blocks, {d:+,} against the log's {n_log:,}")
    if pp > 1:
        return head + (f": with pipeline parallel {pp} the log prints the first stage's KV memory only, and vLLM keeps "
                       "the smallest stage's block count, so the ledger's figure is an upper bound (--verbose: the "
                       "GPU blocks row)")
    if not available_bytes or not bytes_per_block:
        return head + " (--verbose: the GPU blocks row)"
    shown = round(available_bytes / GiB, 2)
    lo_gib, hi_gib = n_log * bytes_per_block / GiB, (n_log + 1) * bytes_per_block / GiB
    if lo_gib < shown + 0.005 and hi_gib > shown - 0.005:  # some bytes giving n blocks print as the figure shown
        return head + (f": the log prints its KV memory rounded to 2 decimals, and the ledger takes {shown:.2f} GiB "
                       f"as exact (floor({shown:.2f} GiB / {bytes_per_block:,} B) = {n_led:,}); the log's {n_log:,} "
                       f"blocks take {lo_gib:.4f}–{hi_gib:.4f} GiB, which prints as {shown:.2f} GiB: the rounding, "
                       "not a miss")
    return head + (": below the count the printed memory allows, as vLLM allows where the pool is the smallest "
                   "rank's and the memory line one rank's (--verbose: the GPU blocks row says how much less)")
