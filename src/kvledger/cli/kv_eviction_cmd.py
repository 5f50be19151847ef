"""``kvledger kv-eviction``: how much memory token eviction actually frees in a paged KV cache, by where the survivors sit."""

from __future__ import annotations

from typing import Optional

import typer

from kvledger import strict_json

from kvledger.cli.analysis_opts import (AVAIL_OPT, GPU_OPT, JSON_OPT, MAX_LEN_OPT, MODEL_ARG, TP_OPT, UTIL_OPT, VERSION_OPT,
                                        load_target, table)

__all__ = ["register"]


def _render(r, console) -> None:
    from kvledger.analyses.kv_eviction import LAYOUTS
    from kvledger.units import fmt_bytes

    x = r.result
    console.print(f"[bold]KV eviction in a paged cache: {r.model} on {r.gpu}[/] — {x.context_tokens:,} tokens, "
                  f"block_size {x.block_size}, {x.bytes_per_block:,} B per block ({r.heads_per_block} (layer, KV head) pairs share it)")
    t = table(f"Evicting {x.evicted_fraction:.0%} of the tokens ({x.evicted_tokens:,} evicted, {x.kept_tokens:,} kept), by layout",
              "layout", "survivors", "empty blocks", "expected (closed form)", "freed per sequence", "freed share")
    for y in r.by_layout:
        exp = "—" if y.expected_empty_blocks is None else f"{y.expected_empty_blocks:,.1f}" + (" (lower bound)" if y.layout == "clustered" else "")
        t.add_row(("[bold]" if y.layout == x.layout else "") + y.layout, LAYOUTS[y.layout], f"{y.empty_blocks:,} of {y.num_blocks:,}",
                  exp, fmt_bytes(y.freed_bytes, both=False), f"{y.freed_fraction:.1%}")
    console.print(t)
    t = table("The arithmetic", "figure", "value", "derivation")
    t.add_row("blocks held", f"{x.num_blocks:,}", f"⌈{x.context_tokens:,} / {x.block_size}⌉")
    t.add_row("empty blocks", f"{x.empty_blocks:,}", x.formula + (f" (this draw: seed {x.seed})" if x.seed is not None else ""))
    if x.binomial_empty_blocks is not None:
        t.add_row("binomial approximation", f"{x.binomial_empty_blocks:,.1f}", f"blocks × r^B = {x.num_blocks:,} × {x.evicted_fraction:.3g}^{x.block_size}")
    if x.per_head_expected_empty_blocks is not None:
        t.add_row("if each (layer, KV head) chose its own survivors", f"{x.per_head_expected_empty_blocks:.3g}",
                  f"full blocks × P(empty)^{r.heads_per_block}")
    t.add_row("freed", fmt_bytes(x.freed_bytes), f"{x.empty_blocks:,} × {x.bytes_per_block:,} B (page over all layers sharing a block)")
    t.add_row("with compaction", f"{x.compacted_blocks:,} blocks", f"⌈{x.kept_tokens:,} / {x.block_size}⌉; copies {fmt_bytes(x.compaction_copy_bytes, both=False)}")
    if r.concurrency_before is not None:
        t.add_row(f"requests of {x.context_tokens:,} tokens in the pool", f"{r.concurrency_before:,} → {r.concurrency_after:,}",
                  "usable blocks ÷ blocks held per request, before → after")
    console.print(t)
    t = table("Methods (each method's paper in the source column; accuracy not predicted)", "method", "keeps", "query", "needs attention scores", "paged layout", "source")
    for m in r.methods:
        t.add_row(m["method"], m["keeps"], m["query"], m["needs_scores"], m["paged_layout"], m["source"])
    console.print(t)
    console.print("[bold]Verdict[/]")
    for v in r.verdict:
        console.print(f"• {v}")
    for n in r.notes:
        console.print(f"· {n}", style="dim")


def kv_eviction(
    model: str = MODEL_ARG, gpu: str = GPU_OPT,
    evict: Optional[float] = typer.Option(None, "--evict", help="Share of the sequence's tokens evicted, 0–1 (e.g. 0.9)."),
    layout: str = typer.Option("scattered", "--layout", help="scattered, worst, sink-window or clustered."),
    sink_tokens: int = typer.Option(4, "--sink-tokens", help="sink-window: tokens kept at the start (StreamingLLM uses 4)."),
    window: Optional[str] = typer.Option(None, "--window", help="sink-window: recent tokens kept (default: what --evict leaves)."),
    run_tokens: int = typer.Option(64, "--run-tokens", help="clustered: survivors per run, tokens."),
    context: Optional[str] = typer.Option(None, "--context", help="Sequence length, tokens (default 32K or max_model_len)."),
    block_size: Optional[int] = typer.Option(None, "--block-size", help="Tokens per KV block (default 16)."),
    seed: int = typer.Option(0, "--seed", help="Seed for the random survivor positions."),
    tp: int = TP_OPT, max_model_len: Optional[str] = MAX_LEN_OPT, gpu_memory_utilization: Optional[float] = UTIL_OPT,
    available_kv_memory: Optional[str] = AVAIL_OPT, engine_version: Optional[str] = VERSION_OPT, as_json: bool = JSON_OPT,
) -> None:
    """KV eviction under a paged layout: empty blocks, memory actually freed, and which methods need attention scores."""
    from rich.console import Console

    from kvledger.analyses.kv_eviction_report import analyse_kv_eviction
    from kvledger.units import parse_tokens

    spec, g, settings = load_target(model, gpu, tp=tp, max_model_len=max_model_len, gpu_memory_utilization=gpu_memory_utilization,
                                    available_kv_memory=available_kv_memory, block_size=block_size, engine_version=engine_version)
    r = analyse_kv_eviction(spec, g, settings, layout=layout.lower(), evict_fraction=evict,
                            context_tokens=parse_tokens(context, what="--context") if context else None,
                            sink_tokens=sink_tokens, window_tokens=parse_tokens(window, what="--window") if window else None,
                            run_tokens=run_tokens, seed=seed)
    if as_json:
        typer.echo(strict_json.dumps(r.to_dict(), indent=2))
    else:
        _render(r, Console())


def register(app: typer.Typer) -> None:
    """Add ``kv-eviction`` to the app."""
    app.command("kv-eviction")(kv_eviction)
