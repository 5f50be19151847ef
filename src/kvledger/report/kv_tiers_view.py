"""Terminal view of the KV tiers of ``kvledger plan`` (--kv-offloading-size, --enable-hierarchical-cache): capacity,
bandwidth and the load-vs-recompute break-even per tier."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvledger.report.tables import table

if TYPE_CHECKING:
    from kvledger.accounting.kv_tiers import TierPlan

__all__ = ["render_kv_tiers"]


def _be_cell(b) -> str:
    if b.kind == "always":
        n = b.break_even_tokens or 1
        skipped = ": HiCache skips shorter loads" if b.rule == "overlapped" and n > 1 else ""
        return f"always (from {n:,} token{'s' if n != 1 else ''}{skipped})"
    if b.kind == "never":
        return f"never (≤ {b.max_tokens:,})"
    return f"{b.break_even_tokens:,} tokens"


def render_kv_tiers(tp: TierPlan, console) -> None:
    from kvledger.units import fmt_bytes

    ranks = max((x.num_ranks for x in tp.tiers), default=1)
    total = (f"capacity, all {ranks} GPUs",) if ranks > 1 else ()
    t = table(f"KV tiers per GPU ({tp.bytes_per_token:,.0f} B of KV per token)", "tier", "capacity per GPU", *total,
              "tokens per GPU", "stored units (tokens each)", "read into HBM", "capacity rule", "bandwidth source")
    for x in tp.tiers:
        units = f"{x.capacity_tokens // x.unit_tokens:,} {x.unit_name}s ({x.unit_tokens:,})"
        t.add_row(x.name, fmt_bytes(x.capacity_bytes), *((fmt_bytes(x.total_capacity_bytes),) if total else ()),
                  f"{x.capacity_tokens:,}", units,
                  "— (the KV's own tier)" if x.name == "hbm" else f"{x.read_bytes_per_s / 1e9:,.1f} GB/s",
                  x.capacity_rule, "—" if x.name == "hbm" else x.bandwidth_source)
    console.print(t)
    top = f"@{tp.break_even[0].max_tokens:,}" if tp.break_even else "@max"  # the scan's end: max_model_len − suffix
    t = table(f"Load a cached prefix or recompute it (TTFT of a request with that prefix; prefill priced by "
              f"{tp.priced_by}; {top} tokens: the longest prefix, max_model_len − suffix)", "tier", "rule",
              "break-even prefix", "load path @1K", "recompute @1K", f"load path {top}", f"recompute {top}")
    for b in tp.break_even:
        t.add_row(b.tier, b.rule, _be_cell(b), f"{b.load_s_per_1k * 1e3:.2f} ms",
                  f"{b.recompute_s_per_1k * 1e3:.2f} ms",
                  f"{b.load_s_at_max * 1e3:,.1f} ms", f"{b.recompute_s_at_max * 1e3:,.1f} ms")
    console.print(t)
    for n in tp.notes:
        console.print(f"  • {n}")
