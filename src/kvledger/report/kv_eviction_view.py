"""Terminal view of ``kvledger kv-eviction``: blocks freed by layout, the effect on concurrency, and which methods need
attention scores."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvledger.report.tables import print_verdict, table

if TYPE_CHECKING:
    from kvledger.analyses.judgments.kv_eviction_summary import EvictionReport

__all__ = ['render_kv_eviction']


def render_kv_eviction(r: EvictionReport, console) -> None:
    from kvledger.analyses.judgments.kv_eviction import LAYOUTS
    from kvledger.units import fmt_bytes

    x = r.result
    console.print(f"[bold]KV eviction in a paged cache: {r.model} on {r.gpu}[/] — {x.context_tokens:,} tokens, "
                  f"block_size {x.block_size}, {x.bytes_per_block:,} B per block ({r.heads_per_block} (layer, KV head) "
                  f"pairs share it)")
    t = table(f"Evicting {x.evicted_fraction:.0%} of the tokens ({x.evicted_tokens:,} evicted, {x.kept_tokens:,} "
              f"kept), by layout",
              "layout", "survivors", "empty blocks", "expected (closed form)", "freed per sequence", "freed share")
    for y in r.by_layout:
        exp = (
            "—"
            if y.expected_empty_blocks is None
            else f"{y.expected_empty_blocks:,.1f}" + (" (lower bound)" if y.layout == "clustered" else "")
        )
        t.add_row(("[bold]" if y.layout == x.layout else "") + y.layout, LAYOUTS[y.layout], f"{y.empty_blocks:,} of "
            f"{y.num_blocks:,}",
                  exp, fmt_bytes(y.freed_bytes, both=False), f"{y.freed_fraction:.1%}")
    console.print(t)
    t = table("The arithmetic", "figure", "value", "derivation")
    t.add_row("blocks held", f"{x.num_blocks:,}", f"⌈{x.context_tokens:,} / {x.block_size}⌉")
    t.add_row("empty blocks", f"{x.empty_blocks:,}",
              x.formula + (f" (this draw: seed {x.seed})" if x.seed is not None else ""))
    if x.binomial_empty_blocks is not None:
        t.add_row(
            "binomial approximation",
            f"{x.binomial_empty_blocks:,.1f}",
            f"blocks × r^B = {x.num_blocks:,} × {x.evicted_fraction:.3g}^{x.block_size}",
        )
    if x.per_head_expected_empty_blocks is not None:
        t.add_row("if each (layer, KV head) chose its own survivors", f"{x.per_head_expected_empty_blocks:.3g}",
                  f"full blocks × P(empty)^{r.heads_per_block}")
    t.add_row("freed", fmt_bytes(x.freed_bytes), f"{x.empty_blocks:,} × {x.bytes_per_block:,} B (page over all layers "
                                                 f"sharing a block)")
    t.add_row("with compaction", f"{x.compacted_blocks:,} blocks", f"⌈{x.kept_tokens:,} / {x.block_size}⌉; copies "
                                                                   f"{fmt_bytes(x.compaction_copy_bytes, both=False)}")
    if r.concurrency_before is not None:
        t.add_row(f"requests of {x.context_tokens:,} tokens in the pool", f"{r.concurrency_before:,} → "
                                                                          f"{r.concurrency_after:,}",
                  "usable blocks ÷ blocks held per request, before → after")
    console.print(t)
    t = table("Methods (each method's paper in the source column; accuracy not predicted)", "method", "keeps", "query",
              "needs attention scores", "paged layout", "source")
    for m in r.methods:
        t.add_row(m["method"], m["keeps"], m["query"], m["needs_scores"], m["paged_layout"], m["source"])
    console.print(t)
    print_verdict(console, r.verdict, r.notes)
