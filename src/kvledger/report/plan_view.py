"""Rich tables for the KV-cache ledger: every figure with its unit, formula and source."""

from __future__ import annotations

from rich.console import Console

from kvledger.accounting.kv_range import range_text
from kvledger.accounting.plan import ConcurrencyRow, Plan
from kvledger.accounting.window_capacity import manager_words, window_words
from kvledger.catalog.compressed_mla import FP8_DS_MLA_ENTRY_BYTES, CompressedMLAAttention
from kvledger.catalog.layer_words import layer_kinds_text
from kvledger.catalog.models import stated_params
from kvledger.report.plan_pipeline import decode_title, pipeline_rows
from kvledger.report.plan_summary import (
    ASSUMED_RELEASE,
    attention_by_context_text,
    limit_names,
    summary_lines,
    vllm_flags_text,
    warning_lines,
)
from kvledger.report.plan_verdict import verdict_text
from kvledger.report.tables import LedgerTable as Table
from kvledger.units import GB, GiB, KiB, MiB, fmt_bytes, fmt_duration, fmt_low

__all__ = ["render_plan"]


def _t(title: str, *cols: str) -> Table:
    t = Table(title=title, title_justify="left", title_style="bold", show_lines=False, expand=False)
    for c in cols:
        t.add_column(c, overflow="fold")
    return t


def _model(p: Plan) -> Table:
    m, t = p.model, _t("Model", "figure", "value", "source / formula")
    st = stated_params(m.catalog_id) if m.catalog_id else None
    diff = f" (publisher {st.total / 1e9:,.2f}B: {100 * (m.num_params / st.total - 1):+.2f}%)" if st else ""
    t.add_row("parameters", f"{m.num_params:,}", f"counted tensor by tensor from the config{diff}")
    if m.is_moe:
        t.add_row("active parameters", f"{m.num_active_params:,}",
                  f"top-{m.experts_per_token} of {m.num_experts} experts per layer, embeddings included")
    wb = m.weight_bytes()
    plan_w = next((d for d in p.memory.deductions if d.name == "weights"), None)
    also = ("" if plan_w is None or plan_w.bytes == wb else
            f"; the memory plan's weights term ({plan_w.bytes / GiB:,.2f} GiB) is per GPU, as vLLM allocates them"
            + (", with its RoPE cos/sin buffer" if "RoPE" in plan_w.source else ""))
    t.add_row("weights (checkpoint tensors, whole model)", fmt_bytes(wb), f"{m.quant.description}; {m.dtype}{also}")
    t.add_row("layers", layer_kinds_text(m), m.source)
    for n in m.notes:
        t.add_row("note", "", n)
    return t


def _kv(p: Plan) -> Table:
    kv = p.kv
    packed = [g for g in kv.groups if isinstance(g.spec, CompressedMLAAttention)]
    dtype = (f"KV dtype {kv.kv_cache_dtype}: fp8_ds_mla entries of {FP8_DS_MLA_ENTRY_BYTES} B" if packed else
             f"KV dtype {kv.kv_cache_dtype} = {kv.elem_bytes:g} B/element")
    t = _t(f"KV bytes per token ({dtype}, per GPU at TP {kv.tp})", "layers", "per token", "formula")
    for g in kv.groups:
        val = fmt_bytes(g.state_bytes_per_seq) + " per sequence" if g.kind == "state" else fmt_bytes(g.bytes_per_token)
        label = f"{g.num_layers} {g.kind}"
        if g in packed:  # DeepSeek-V4's layer kinds differ by compress ratio only
            label += " (window only)" if g.spec.compress_ratio <= 1 else f" (compress ratio {g.spec.compress_ratio})"
        t.add_row(label, val, g.formula)
    if not kv.groups:
        t.add_row("no layer keeps a cache", "0 B", "every layer reads another model's K/V (see the model's notes)")
    t.add_row("[bold]all KV layers[/]", f"[bold]{kv.bytes_per_token:,.0f} B ({kv.bytes_per_token / KiB:,.2f} KiB)[/]",
              f"whole model at TP 1: {kv.bytes_per_token_model:,.0f} B/token")
    if (bind := next((st for st in p.memory.stages if st["binds"]), None)) and (sk := p.stage_kv) is not None:
        t.add_row(f"[bold]binding stage PP{bind['rank']} (layers {bind['layers'][0]}–{bind['layers'][1]})[/]",
                  f"[bold]{sk.bytes_per_token:,.0f} B ({sk.bytes_per_token / KiB:,.2f} KiB)[/]",  # PP: its layers only
                  "what one GPU of that stage holds per token: " + "; ".join(g.formula for g in sk.groups))
    return t


def _memory(p: Plan) -> Table:
    m, bind = p.memory, next((s["rank"] for s in p.memory.stages if s["binds"]), None)
    where = f"per GPU of the binding stage PP{bind}" if m.stages else "per GPU"
    t = _t(f"Memory plan: {m.engine} {m.engine_version}, {where}", "term", "GiB", "GB", "source")
    total_source = p.gpu.memory_source
    if p.settings.wddm and m.gpu_total_bytes != p.gpu.memory_bytes:  # --wddm: the whole board
        total_source = (f"the whole board as nvidia-smi shows it ({m.gpu_total_bytes / MiB:,.0f} MiB), which CUDA "
                        f"reports under the Windows display driver (--wddm); CUDA's total under Linux "
                        f"{p.gpu.memory_bytes / GiB:,.2f} GiB: {p.gpu.memory_source}")
    t.add_row("device total", f"{m.gpu_total_bytes / GiB:,.2f}", f"{m.gpu_total_bytes / GB:,.2f}", total_source)
    if m.requested_bytes != m.gpu_total_bytes:
        t.add_row(m.requested_label or f"× {m.fraction_name} {m.fraction}", f"{m.requested_bytes / GiB:,.2f}",
                  f"{m.requested_bytes / GB:,.2f}",
                  m.requested_source or f"{m.fraction_name} {m.fraction}: engine rule ({m.engine})")
    for d in m.deductions:
        r = range_text(d.low_bytes, d.high_bytes, fmt=",.2f")
        rs = f"; range {r} GiB" + (f": {d.range_source}" if d.range_source else "") if r else ""
        label = f"− {d.name}" + (" (+ RoPE buffer)" if d.name == "weights" and "RoPE" in d.source else "")
        t.add_row(label, f"{d.bytes / GiB:,.2f}", f"{d.bytes / GB:,.2f}", d.source + rs)
    src = "what remains"
    if m.available_given:  # taken as given: the terms above are the ledger's, not subtracted from it
        left = m.requested_bytes - sum(d.bytes for d in m.deductions)
        src = (f"given (--available-kv-memory): your engine's printed figure, taken as is; the terms above are the "
               f"ledger's own, which would leave {left / GiB:,.2f} GiB, and do not set it")
    if m.kv_free:
        src = (f"none allocated: no KV cache group, so vLLM skips the profile and gives the cache 0 B "
               f"({m.headroom_bytes / GiB:,.2f} GiB of the budget left after the deductions)")
    rng = m.ranges.get("available_kv_bytes")
    if rng and range_text(*rng, fmt=",.2f"):
        src += f"; range {range_text(*rng, fmt=',.2f')} GiB from the terms' and the device total's ranges"
    t.add_row("[bold]available KV memory (given)[/]" if m.available_given else "[bold]= available KV memory[/]",
              f"[bold]{m.available_kv_bytes / GiB:,.2f}[/]", f"{m.available_kv_bytes / GB:,.2f}", src)
    unit = "page" if m.engine == "sglang" else "block"
    t.add_row(f"bytes per {unit}: {m.bytes_per_block:,} B", "", "",  # a count, not GiB or GB: in the term
              f"{m.block_size} tokens × per-token bytes over the layers sharing a {unit}")
    b_lo, b_hi = m.ranges.get("num_gpu_blocks", (m.num_gpu_blocks, m.num_gpu_blocks))
    brange = f"; range {b_lo:,}–{b_hi:,} from the available KV range" if b_lo != b_hi else ""
    t.add_row(f"{unit}s: {m.num_gpu_blocks:,}", "", "", "the null block only; usable 0" if m.kv_free else
              f"floor(available / {m.bytes_per_block:,} B); usable {m.usable_blocks:,}{brange}")
    return t


def _stages(p: Plan) -> Table | None:
    """One row per pipeline stage (per GPU of that stage), the binding one marked."""
    if not p.memory.stages:
        return None
    t = _t(f"Pipeline stages (per GPU; TP {p.settings.tp} GPUs per stage)", "stage", "layers", "weights GiB",
           "activation GiB", "non-torch GiB", "available KV GiB", "blocks", "")
    for st in p.memory.stages:
        what = ("embedding, " if st["is_first"] else "") + ("LM head + sampler, " if st["is_last"] else "")
        t.add_row(f"PP{st['rank']}", f"{what}{st['layers'][0]}–{st['layers'][1]}",
                  f"{st.get('weights_bytes', 0) / GiB:,.2f}",
                  f"{st.get('activation_peak_bytes', 0) / GiB:,.2f}",
                  f"{st.get('non_torch_memory_bytes', 0) / GiB:,.2f}",
                  f"{st['available_kv_bytes'] / GiB:,.2f}", f"{st['num_gpu_blocks']:,}",
                  "[bold]binds[/] (fewest blocks: the engine's pool)" if st["binds"] else "")
    return t


def _concurrency(p: Plan) -> Table:
    unit, ns = ("tokens", "max_running_requests") if p.memory.engine == "sglang" else ("blocks", "max_num_seqs")
    dec = any(r.decode_requests is not None for r in p.concurrency)
    t = _t("Maximum concurrency (per replica)", "context", f"{unit} / request", "KV state / request",
           "start-up demand / request" if dec else "pool budget / request", "engine figure", "whole requests (KV)",
           f"running (≤ {ns} {_seqs_text(p)})", *(["while decoding (blocks, ×, whole)"] if dec else []))
    for r in p.concurrency:
        flag = "" if r.within_max_model_len else " [red](> max_model_len)[/]"
        capped = " [yellow](capped)[/]" if r.max_requests > r.running_cap else ""
        whole = (f"{r.max_requests:,}" if r.max_requests else "[red]0 — not one fits[/]" if r.within_max_model_len
                 else f"[red]0 — rejected[/] (the pool would hold {r.pool_requests or 0:,})")
        t.add_row(f"{r.context_tokens:,}{flag}", f"{r.blocks_per_request:,}",
                  fmt_bytes(r.bytes_per_request, both=False),
                  fmt_bytes(r.pool_bytes_per_request, both=False),
                  "none printed (no KV)" if p.memory.kv_free else f"{r.max_concurrency:,.2f}x{_conc_range(r)}", whole,
                  f"{r.max_running:,}{capped}", *([_decode_cell(r)] if dec else []))
    counted, freed = manager_words(p.layout) if dec and p.layout is not None else ("", "")
    t.caption = ("KV state: the tokens' KV and state at that context; " + (
        f"start-up demand: what vLLM's start-up check counts per request (blocks × bytes per block: "
        f"{counted.replace(' counted', '')}; hybrid pages pad) — the engine does not reserve it; while decoding: "
        f"full-attention blocks plus what the windowed layers keep ({window_words(p.layout)}; {freed})"
        if dec and p.layout is not None else "pool budget: the engine's per-request demand (blocks × bytes per block; "
        "hybrid pages pad)"))
    return t


def _decode_cell(r: ConcurrencyRow) -> str:
    if r.decode_requests is None or r.decode_concurrency is None:
        return "—"
    return f"{r.decode_blocks_per_request:,} blocks, {r.decode_concurrency:,.2f}x, {r.decode_requests:,}"


def _conc_range(r: ConcurrencyRow) -> str:
    """ " (3.42–3.46x)" from the row's block range, or "" when its ends print the same."""
    rng = r.max_concurrency_range
    if not rng or not range_text(*rng, scale=1, fmt=",.2f"):
        return ""
    return f" ({fmt_low(rng[0])}–{rng[1]:,.2f}x)"  # the low end rounded down, as the summary prints it


def _waterfall(p: Plan) -> Table | None:
    if not p.waterfall:
        return None
    ctx = p.waterfall[0]["context_tokens"]
    t = _t(f"Which terms make the difference (concurrency at {ctx:,} tokens)", "step", "KV GiB", "concurrency")
    for w in p.waterfall:
        t.add_row(w["step"], f"{w['available_kv_bytes'] / GiB:,.2f}", f"{w['max_concurrency']:,.2f}")
    return t


def _roofline(p: Plan) -> list[Table]:
    r = p.roofline
    if r is None:
        return []
    t = _t(f"Roofline ({r.compute_dtype} matmuls; achievable {r.flops_fraction:.0%} FLOP/s, {r.bandwidth_fraction:.0%} "
           f"bandwidth)", "figure", "value", "formula")
    src = "given" if p.gpu.gpu_id == "custom" or p.gpu.memory_source.startswith("given") else \
        f"gpus.csv row {p.gpu.gpu_id}"
    t.add_row("ridge point", f"{r.ridge_flops_per_byte:,.1f} FLOP/B", f"{r.peak_flops_per_s / 1e12:,.1f} TFLOP/s "
              f"dense ÷ {r.hbm_bandwidth_bytes_per_s / 1e12:,.2f} TB/s ({src})")
    t.add_row("weight matmuls compute-bound above", f"{r.weight_matmul_crossover_tokens:,.0f} tokens/step",
              "2·params·tokens / peak = weight bytes / bandwidth")
    if r.decode_attention_intensity:
        t.add_row("decode attention intensity", f"{r.decode_attention_intensity:,.1f} FLOP/B",
                  "independent of batch: bandwidth-bound at any batch"
                  + (f"; by context (batch 1): {attention_by_context_text(r)}" if r.decode_attention_varies() else ""))
    pf = r.prefill
    t.add_row(f"prefill chunk {pf['chunk_tokens']:,} tokens", f"{fmt_duration(pf['step_s'])} ({pf['bound']}-bound)",
              f"{pf['flops'] / 1e12:,.1f} TFLOP, {pf['bytes'] / GB:,.2f} GB, intensity {pf['intensity']:,.0f} "
              f"FLOP/B" + (f", + TP all-reduces {fmt_duration(pf['allreduce_s'])}" if pf.get("allreduce_s") else "")
              + f"; lower bound {fmt_duration(pf['step_s_lower_bound'])}")
    for ctx, b in r.decode_compute_bound_batch.items():
        t.add_row(f"decode at {ctx:,} tokens turns compute-bound", "never" if b is None else f"batch {b:,}",
                  "KV bytes grow with batch as fast as FLOPs" if b is None
                  else "whole step: FLOPs/peak ≥ bytes/bandwidth")
    for row in pipeline_rows(r):  # under --pp: a step is a pass through the stages, with their sends
        t.add_row(*row)
    n = p.settings.tp * p.settings.pp  # the replica's GPUs: every one of them runs each decode step
    d = _t(decode_title(p), "context", "batch", "step", "tok/s/seq", "tok/s (replica)", "tok/s/GPU", "bound",
           "KV share of bytes")
    for row in r.decode:  # a row beyond the KV pool (not one request of that context fits) is marked, not hidden
        d.add_row(f"{row.context_tokens:,}", f"{row.batch:,}" + ("" if row.fits else " [red](no room in KV)[/]"),
                  fmt_duration(row.step_s), f"{row.tok_per_s_per_seq:,.1f}", f"{row.tok_per_s:,.0f}",
                  f"{row.tok_per_s / n:,.0f}", row.bound, f"{row.kv_bytes_share:.0%}")
    return [t, d]


def _seqs_text(p: Plan, verbose: bool = True) -> str:
    """max_num_seqs as a number, or what it is when SGLang had no KV tokens to size max_running_requests from (its rule
    gives 0 there: min(…, #tokens // 2)); who sizes it with ``verbose`` only (the short plan's title)."""
    m = p.memory
    if m.max_num_seqs == 0 and m.engine == "sglang" and m.pool_tokens <= 0:
        return f"— ({'SGLang sizes max_running_requests' if verbose else 'sized'} from the KV pool, which is empty)"
    return f"{m.max_num_seqs:,}"


def render_plan(p: Plan, console: Console, *, verbose: bool = False) -> None:
    """Print the summary (a few lines) and, with ``verbose``, the whole ledger: model, KV bytes, memory plan,
    concurrency, waterfall, roofline, every note."""
    s, (bt, ns) = p.settings, limit_names(p.memory.engine)  # SGLang: chunked_prefill_size, max_running_requests
    pp = f", PP {s.pp}" if s.pp > 1 else ""
    assumed = ASSUMED_RELEASE if verbose and s.engine_version is None else ""  # no --engine-version (plan_summary)
    console.print(f"[bold]KV-cache ledger[/]: {p.model.name} on {p.gpu.name} — {p.memory.engine} "
                  f"{p.memory.engine_version}{assumed}, TP {s.tp}{pp}{vllm_flags_text(s)}, "
                  f"max_model_len {p.memory.max_model_len:,}{' (auto)' * bool(s.auto_max_model_len)}, "
                  f"{bt} {p.memory.max_num_batched_tokens:,}, "
                  f"{ns} {_seqs_text(p, verbose)}" + (f", cuda_graph_max_bs {p.memory.cuda_graph_max_bs}"
                                             if p.memory.engine == "sglang" and p.memory.cuda_graph_max_bs else ""))
    for line in warning_lines(p, verbose=verbose):  # nodes past one (node_size.py), a model part not counted
        console.print(line, highlight=False)
    for line in summary_lines(p, verbose=verbose):
        console.print(f"  {line}", markup=False, highlight=False)
    if not verbose:
        _verdict(p, console, verbose=False)
        console.print("[dim]the full ledger (every term with its source): --verbose; for scripts: --json[/]")
        return
    for tbl in (_model(p), _kv(p)):
        console.print(tbl)
    for n in p.kv.notes:
        console.print(f"[yellow]note:[/] {n}")
    console.print(_memory(p))
    stages = _stages(p)
    if stages is not None:
        console.print(stages)
    if p.memory.printed_lines:
        console.print("[bold]The engine would print:[/]")
        for line in p.memory.printed_lines:
            console.print(f"  {line}", markup=False, highlight=False)
    if p.memory.fits:
        console.print(_concurrency(p))
    wf = _waterfall(p)
    if wf is not None:
        console.print(wf)
    for tbl in _roofline(p):
        console.print(tbl)
    _verdict(p, console)
    notes = list(p.memory.notes) + (list(p.roofline.notes) if p.roofline else [])
    for n in notes:
        console.print(f"[dim]· {n}[/]")


def _verdict(p: Plan, console: Console, *, verbose: bool = True) -> None:
    """The verdict and its fixes, each with why it works where ``verbose`` (the short plan: the fix and its figure,
    and under DP the GPUs it takes and its requests over the ranks, ``advice_dp``)."""
    if p.advice:
        color = ("green" if p.fits or p.memory.kv_free else "yellow") if p.advice.verdict == "fits" else "red"
        color = "yellow" if p.advice.verdict == "served_at_lower_len" else color  # TRT-LLM, SGLang: a lower length
        console.print(f"[bold {color}]{verdict_text(p, verbose)}[/]")
        for o in p.advice.options:
            reqs = (f"{o.max_requests:,} concurrent {o.context_tokens or p.memory.max_model_len:,}-token "
                    f"request{'' if o.max_requests == 1 else 's'}")
            said = (f"{reqs} ({o.max_concurrency:,.2f}x)" if o.decode_requests is None else
                    f"≈{o.decode_requests:,} at once while decoding ({reqs} at vLLM's start-up check, "
                    f"{o.max_concurrency:,.2f}x)")
            more = o.detail if verbose else o.ranks  # the figure is one rank's: said even in the short plan
            console.print(f"  → {o.action}: {said}" + (f"; {more}" if more else ""))
        if p.advice.verdict == "weights_do_not_fit":
            fix = ("re-run with a fix above" if p.advice.options else "no single change tried (a higher TP, FP8 KV, a "
                   "higher --gpu-memory-utilization, a GPU with more memory) makes it fit")
            console.print(f"[dim]· roofline and concurrency by term omitted: the model does not fit; {fix}[/]")
