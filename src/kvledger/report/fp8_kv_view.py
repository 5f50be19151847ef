"""Terminal view of ``kvledger fp8-kv``: capacity bf16 vs fp8, break-even context by batch, the step-time curve,
calibration and verdict."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvledger.analyses.judgments.fp8_verdict import start_up_line
from kvledger.report.step_cost_view import step_cost_lines, step_cost_source_line
from kvledger.report.tables import print_verdict, table

if TYPE_CHECKING:
    from kvledger.analyses.judgments.fp8_calibration import Fp8Calibration
    from kvledger.analyses.judgments.fp8_kv import Fp8Report

__all__ = ['render_fp8_kv']



def _break_even_cell(b) -> str:
    """The break-even cell of one batch row; only the branch for its kind is formatted (the others' fields are None)."""
    if b.kind == "always":
        return "always faster"
    if b.kind == "never":
        return f"never (≤ {b.max_context_tokens:,})"
    return f"{b.context_tokens:,} tokens"


def _print_calibration(cal: Fp8Calibration, console) -> None:
    """The calibration's measured-vs-fitted table and its fitted figures."""
    from kvledger.units import fmt_duration

    t = table(f"Calibration: {cal.source}", "context", "batch", "bf16 measured → fitted", "fp8 measured → fitted",
              "fp8 error")
    for row in cal.rows:
        t.add_row(f"{row['context_tokens']:,}", str(row["batch"]), f"{fmt_duration(row['bf16_measured_s'])} → "
                                                                   f"{fmt_duration(row['bf16_fitted_s'])}",
                  f"{fmt_duration(row['fp8_measured_s'])} → {fmt_duration(row['fp8_fitted_s'])}",
                      f"{row['fp8_error_pct']:+.2f}%")
    console.print(t)
    console.print(f"fitted: {fmt_duration(cal.overhead.per_layer_s)} per layer per step, "
                  f"{cal.overhead.ns_per_element * 1e6:.3g} ns per million K/V elements; "
                  f"effective bandwidth {cal.effective_bandwidth_bytes_per_s / 1e9:,.0f} GB/s "
                  f"({cal.bandwidth_fraction:.0%} of datasheet), "
                  f"fixed step time {fmt_duration(cal.step_fixed_s)}")


def render_fp8_kv(r: Fp8Report, cal: Fp8Calibration | None, console) -> None:
    from kvledger.accounting.vllm_rules import LATEST
    from kvledger.units import fmt_bytes, fmt_duration

    c = r.capacity
    eng = r.settings.get("engine", "vllm")
    ver = r.settings.get("engine_version") or (LATEST if eng == "vllm" else "")
    console.print(f"[bold]FP8 KV cache: {r.model} on {r.gpu}[/] — {f'{eng} {ver}'.strip()}, TP {r.settings['tp']}, "
                  f"batch {r.concurrency}")
    for note in (n for n in r.notes if n.startswith("warning:")):  # said first, and again among the notes
        console.print(note)
    start = start_up_line(r.headline)
    if start:
        console.print(f"start-up: {start}")
    t = table("Capacity (per GPU, vLLM memory plan)", "figure", "16-bit (auto)", "fp8", "source")
    t.add_row("bytes per KV element", f"{c.bf16['elem_bytes']:g} B", f"{c.fp8['elem_bytes']:g} B", "kv_cache_dtype "
        "(vLLM STR_DTYPE_TO_TORCH_DTYPE)")
    t.add_row("KV bytes per token", f"{c.bf16['bytes_per_token']:,.0f} B", f"{c.fp8['bytes_per_token']:,.0f} B",
              "the memory plan's KV terms (`kvledger plan --verbose`): 2 × layers × KV heads × head_dim × bytes for "
              "plain attention; latent, packed entries, indexer keys and state for MLA, sparse or hybrid models")
    t.add_row("page (bytes per block)", f"{c.bf16['bytes_per_block']:,} B", f"{c.fp8['bytes_per_block']:,} B",
              _page_source(c.bf16["block_size"], c.fp8["block_size"]))
    t.add_row("available KV memory", fmt_bytes(c.bf16["available_kv_bytes"]), fmt_bytes(c.fp8["available_kv_bytes"]),
              "the same memory plan for both")
    t.add_row("blocks", f"{c.bf16['num_gpu_blocks']:,}", f"{c.fp8['num_gpu_blocks']:,}", "floor(available / page)")
    t.add_row("GPU KV cache size", f"{c.bf16['pool_tokens']:,} tokens", f"{c.fp8['pool_tokens']:,} tokens",
              "blocks × block_size")
    for row in c.rows:
        t.add_row(f"max concurrency at {row['context_tokens']:,} tokens", f"{row['bf16_max_concurrency']:.2f}x",
                  f"{row['fp8_max_concurrency']:.2f}x", "blocks ÷ blocks per request (engine figure)")
    console.print(t)
    t = table("Break-even context by batch (fp8 decode step faster from here on)", "batch", "break-even", "closed form "
        "c*", "bf16 bound at break-even", "at 1-token context")
    for b in r.break_even_by_batch:
        be = _break_even_cell(b)
        cf = f"{b.closed_form_tokens:,.0f} tokens" if b.closed_form_tokens else "—"
        t.add_row(("[bold]" if b.batch == r.concurrency else "") + str(b.batch), be, cf, b.regime,
                  b.short_context_bound)
    console.print(t)
    for line in step_cost_lines(r.step_cost) if r.step_cost else ():  # as simulate prints its step cost
        console.print(line)
    t = table(f"Decode step vs context at batch {r.concurrency} (the step cost above + FP8 overhead; data for a plot: "
              f"--json → curve)",
              "context", "bf16 step", "fp8 step", "of which FP8 overhead", "fp8 gain", "KV read bf16 → fp8",
                  "bound bf16/fp8", "fits bf16/fp8")
    for p in r.curve:
        t.add_row(f"{p.context_tokens:,}", fmt_duration(p.bf16_step_s), fmt_duration(p.fp8_step_s),
                  fmt_duration(p.fp8_overhead_s),
                  f"{p.fp8_gain_pct:+.1f}%", f"{fmt_bytes(p.bf16_kv_bytes, both=False)} → "
                                             f"{fmt_bytes(p.fp8_kv_bytes, both=False)}",
                  f"{p.bf16_bound}/{p.fp8_bound}", f"{'yes' if p.fits_bf16 else 'no'}/{'yes' if p.fits_fp8 else 'no'}")
    console.print(t)
    if cal is not None:
        _print_calibration(cal, console)
    if r.step_cost:  # the step cost named above the tables: how it prices a step
        console.print(step_cost_source_line(r.step_cost))
    print_verdict(console, r.verdict, r.notes)


def _page_source(bf16_block: int, fp8_block: int) -> str:
    """The page row's source: each column's block size (an FP8 MLA backend takes larger blocks, e.g. 64 on Hopper)."""
    if bf16_block == fp8_block:
        return f"block_size {bf16_block} × bytes per token"
    return (f"block_size × bytes per token: {bf16_block} tokens per block at 16-bit, {fp8_block} at fp8 (the FP8 "
            "backend's block size, as `kvledger plan --kv-cache-dtype fp8` plans it)")
