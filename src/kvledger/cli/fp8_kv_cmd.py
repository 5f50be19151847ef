"""``kvledger fp8-kv``: when FP8 KV cache pays (capacity, decode break-even, the step-time curve) and when to leave it off."""

from __future__ import annotations

from typing import Optional

import typer

from kvledger import strict_json

from kvledger.cli.analysis_opts import (AVAIL_OPT, BLOCK_OPT, BW_OPT, FLOPS_OPT, GPU_OPT, JSON_OPT, MAX_LEN_OPT, MODEL_ARG,
                                        TP_OPT, UTIL_OPT, VERSION_OPT, load_target, parse_token_list, table)

__all__ = ["register"]


def _overhead(per_element_ns, per_layer_us, calibration, calibration_model, calibration_gpu, model, gpu):
    """The FP8 overhead to use and, if fitted here, its calibration."""
    from kvledger.analyses.fp8_calibration import DEFAULT_FP8_OVERHEAD, Fp8Overhead, fit_fp8_overhead, read_fp8_measurements
    from kvledger.catalog.gpus import resolve_gpu
    from kvledger.catalog.models import load_model

    cal = None
    ov = DEFAULT_FP8_OVERHEAD
    if calibration:
        cm = load_model(calibration_model) if calibration_model else model
        cg = resolve_gpu(calibration_gpu) if calibration_gpu else gpu
        cal = fit_fp8_overhead(read_fp8_measurements(calibration), cm, cg, source=f"{calibration} ({cm.name} on {cg.name})")
        ov = cal.overhead
    if per_element_ns is not None or per_layer_us is not None:
        ov = Fp8Overhead(ov.per_layer_s if per_layer_us is None else per_layer_us * 1e-6,
                         ov.ns_per_element if per_element_ns is None else per_element_ns,
                         "given on the command line" + (f" (other term: {ov.source})" if (per_element_ns is None) != (per_layer_us is None) else ""))
    return ov, cal


def _break_even_cell(b) -> str:
    """The break-even cell of one batch row; only the branch for its kind is formatted (the others' fields are None)."""
    if b.kind == "always":
        return "always faster"
    if b.kind == "never":
        return f"never (≤ {b.max_context_tokens:,})"
    return f"{b.context_tokens:,} tokens"


def _render(r, cal, console) -> None:
    from kvledger.units import fmt_bytes, fmt_duration

    c = r.capacity
    console.print(f"[bold]FP8 KV cache: {r.model} on {r.gpu}[/] — TP {r.settings['tp']}, batch {r.concurrency}")
    t = table("Capacity (per GPU, vLLM memory plan)", "figure", "bf16 / auto", "fp8", "source")
    t.add_row("bytes per KV element", f"{c.bf16['elem_bytes']:g} B", f"{c.fp8['elem_bytes']:g} B", "kv_cache_dtype (vLLM STR_DTYPE_TO_TORCH_DTYPE)")
    t.add_row("KV bytes per token", f"{c.bf16['bytes_per_token']:,.0f} B", f"{c.fp8['bytes_per_token']:,.0f} B", "2 × layers × KV heads × head_dim × bytes")
    t.add_row("page (bytes per block)", f"{c.bf16['bytes_per_block']:,} B", f"{c.fp8['bytes_per_block']:,} B", f"block_size {c.bf16['block_size']} × bytes per token")
    t.add_row("available KV memory", fmt_bytes(c.bf16["available_kv_bytes"]), fmt_bytes(c.fp8["available_kv_bytes"]), "the same memory plan for both")
    t.add_row("blocks", f"{c.bf16['num_gpu_blocks']:,}", f"{c.fp8['num_gpu_blocks']:,}", "floor(available / page)")
    t.add_row("GPU KV cache size", f"{c.bf16['pool_tokens']:,} tokens", f"{c.fp8['pool_tokens']:,} tokens", "blocks × block_size")
    for row in c.rows:
        t.add_row(f"max concurrency at {row['context_tokens']:,} tokens", f"{row['bf16_max_concurrency']:.2f}x",
                  f"{row['fp8_max_concurrency']:.2f}x", "blocks ÷ blocks per request (engine figure)")
    console.print(t)
    t = table("Break-even context by batch (fp8 decode step faster from here on)", "batch", "break-even", "closed form c*", "bf16 bound at break-even", "at 1-token context")
    for b in r.break_even_by_batch:
        be = _break_even_cell(b)
        cf = f"{b.closed_form_tokens:,.0f} tokens" if b.closed_form_tokens else "—"
        t.add_row(("[bold]" if b.batch == r.concurrency else "") + str(b.batch), be, cf, b.regime, b.short_context_bound)
    console.print(t)
    t = table(f"Decode step vs context at batch {r.concurrency} (roofline + FP8 overhead; data for a plot: --json → curve)",
              "context", "bf16 step", "fp8 step", "of which FP8 overhead", "fp8 gain", "KV read bf16 → fp8", "bound bf16/fp8", "fits bf16/fp8")
    for p in r.curve:
        t.add_row(f"{p.context_tokens:,}", fmt_duration(p.bf16_step_s), fmt_duration(p.fp8_step_s), fmt_duration(p.fp8_overhead_s),
                  f"{p.fp8_gain_pct:+.1f}%", f"{fmt_bytes(p.bf16_kv_bytes, both=False)} → {fmt_bytes(p.fp8_kv_bytes, both=False)}",
                  f"{p.bf16_bound}/{p.fp8_bound}", f"{'yes' if p.fits_bf16 else 'no'}/{'yes' if p.fits_fp8 else 'no'}")
    console.print(t)
    if cal is not None:
        t = table(f"Calibration: {cal.source}", "context", "batch", "bf16 measured → fitted", "fp8 measured → fitted", "fp8 error")
        for row in cal.rows:
            t.add_row(f"{row['context_tokens']:,}", str(row["batch"]), f"{fmt_duration(row['bf16_measured_s'])} → {fmt_duration(row['bf16_fitted_s'])}",
                      f"{fmt_duration(row['fp8_measured_s'])} → {fmt_duration(row['fp8_fitted_s'])}", f"{row['fp8_error_pct']:+.2f}%")
        console.print(t)
        console.print(f"fitted: {fmt_duration(cal.overhead.per_layer_s)} per layer per step, {cal.overhead.ns_per_element:.3g} ns per K/V element; "
                      f"effective bandwidth {cal.effective_bandwidth_bytes_per_s / 1e9:,.0f} GB/s ({cal.bandwidth_fraction:.0%} of datasheet), "
                      f"fixed step time {fmt_duration(cal.step_fixed_s)}")
    console.print("[bold]Verdict[/]")
    for v in r.verdict:
        console.print(f"• {v}")
    for n in r.notes:
        console.print(f"· {n}", style="dim")


def fp8_kv(
    model: str = MODEL_ARG, gpu: str = GPU_OPT,
    concurrency: Optional[int] = typer.Option(None, "--concurrency", help="Sequences decoding together (the batch), count; default: the requests of the first --context the bf16 pool holds at once (at most max_num_seqs)."),
    contexts: Optional[list[str]] = typer.Option(None, "--contexts", "--context", help="Your context per request first (capacity is answered there; default 8K), then more for the curve (8K,32K); default curve 512 doubling to max_model_len."),
    overhead_ns_per_element: Optional[float] = typer.Option(None, "--overhead-ns-per-element", help="FP8 time per K/V element read or written, ns (default 5.3e-5, fitted to the vLLM docs' L4 table)."),
    overhead_us_per_layer: Optional[float] = typer.Option(None, "--overhead-us-per-layer", help="FP8 fixed time per layer per step, µs (default 6.5)."),
    calibration: Optional[str] = typer.Option(None, "--calibration", help="CSV of your bf16-vs-fp8 decode runs (context_tokens,batch,bf16_tok_per_s,fp8_tok_per_s) to fit the overhead."),
    calibration_model: Optional[str] = typer.Option(None, "--calibration-model", help="Model the calibration CSV was measured on (default: MODEL)."),
    calibration_gpu: Optional[str] = typer.Option(None, "--calibration-gpu", help="GPU the calibration CSV was measured on (default: --gpu)."),
    tp: int = TP_OPT, max_model_len: Optional[str] = MAX_LEN_OPT, gpu_memory_utilization: Optional[float] = UTIL_OPT,
    available_kv_memory: Optional[str] = AVAIL_OPT, block_size: Optional[int] = BLOCK_OPT,
    engine_version: Optional[str] = VERSION_OPT, bandwidth_fraction: Optional[float] = BW_OPT, flops_fraction: float = FLOPS_OPT,
    as_json: bool = JSON_OPT,
) -> None:
    """FP8 KV cache: capacity doubling, the decode break-even context, the bf16-vs-fp8 step curve, and when to leave it off."""
    from rich.console import Console

    from kvledger.analyses.fp8_kv import analyse_fp8_kv

    spec, g, settings = load_target(model, gpu, tp=tp, max_model_len=max_model_len, gpu_memory_utilization=gpu_memory_utilization,
                                    available_kv_memory=available_kv_memory, block_size=block_size, engine_version=engine_version,
                                    bandwidth_fraction=0.8 if bandwidth_fraction is None else bandwidth_fraction,
                                    flops_fraction=flops_fraction)
    ov, cal = _overhead(overhead_ns_per_element, overhead_us_per_layer, calibration, calibration_model, calibration_gpu, spec, g)
    if cal is not None and cal.gpu == g.name and bandwidth_fraction is None:
        # measured on this very GPU: its fitted effective bandwidth and fixed step time replace the roofline defaults
        settings = settings.model_copy(update={"achievable_bandwidth_fraction": min(1.0, cal.bandwidth_fraction),
                                               "cpu_overhead_s": max(0.0, cal.step_fixed_s)})
    r = analyse_fp8_kv(spec, g, settings, concurrency=concurrency, contexts=parse_token_list(contexts, "--contexts"), overhead=ov)
    if as_json:
        d = r.to_dict()
        d["calibration"] = cal.to_dict() if cal else None
        typer.echo(strict_json.dumps(d, indent=2))
    else:
        _render(r, cal, Console())


def register(app: typer.Typer) -> None:
    """Add ``fp8-kv`` to the app."""
    app.command("fp8-kv")(fp8_kv)
