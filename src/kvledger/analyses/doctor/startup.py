"""The log's start-up figures against ``kvledger plan`` for the same settings, term by term.

Memory terms (device total, utilization, weights, activation peak, non-torch memory, CUDA graphs) are
compared with the ledger's *model* of each term (``model_plan``): their differences add up to the
difference in available KV memory, and the residual is what the log does not itemise plus its 2-decimal
rounding. The capacity figures (blocks, printed tokens, concurrency) are then checked exactly: blocks from
the log's own available memory (``floor(available / bytes_per_block)``, kv_cache_planning.py), tokens and
concurrency from the log's own block count under the version's print rule (docs/engine-model.md §1.7).
"""

from __future__ import annotations

import re

from kvledger.accounting.plan import Plan
from kvledger.accounting.plan_vllm import printed_gib_block_range
from kvledger.accounting.vllm_rank_print import check_printed_pool
from kvledger.accounting.vllm_rules import era, parse_version, subtracts_cudagraphs
from kvledger.analyses.doctor.blocks_words import capacity_words
from kvledger.analyses.doctor.context import DoctorContext, printed_figures
from kvledger.analyses.doctor.log_consistency import residual_words
from kvledger.analyses.doctor.startup_verdicts import computed_requested, memory_only, memory_verdicts, skipped_why
from kvledger.analyses.doctor.types import ComparisonRow, StartupComparison
from kvledger.units import GiB

__all__ = ["compare_startup", "MEMORY_TERMS"]

# (row term, StartupFacts field, ledger deduction name, key of a pipeline stage's figure in Memory.stages)
MEMORY_TERMS = [
    ("weights", "weights_bytes", "weights", "weights_bytes"),
    ("activation peak", "activation_peak_bytes", "activation peak", "activation_peak_bytes"),
    ("non-torch memory", "non_torch_bytes", "non-torch memory", "non_torch_memory_bytes"),
]


_row = ComparisonRow.compared  # the row with its difference and its agrees flag (types.py)


def _deduction(p: Plan | None, name: str):
    item = next((d for d in p.memory.deductions if d.name.startswith(name)), None) if p else None
    return item


def _gib(b: float | None) -> str:
    return "n/a" if b is None else f"{b / GiB:.2f} GiB"


def _stage_of(ctx: DoctorContext, fname: str) -> dict | None:
    """With pipeline parallelism, the ledger's stage whose worker printed the log's figure (a ``Worker_PP<k>`` tag)."""
    a = ctx.model_plan
    m = re.match(r"Worker_PP(\d+)", ctx.log.startup.field_workers.get(fname, ""))
    if a is None or not a.memory.stages or m is None or int(m.group(1)) >= len(a.memory.stages):
        return None
    return a.memory.stages[int(m.group(1))]


def _ledger_term(ctx: DoctorContext, fname: str, key: str, d, need: str) -> tuple[float | None, str]:
    """The ledger's figure for a memory term: the log's own pipeline stage's when it names one, else the binding
    stage's."""
    stage = _stage_of(ctx, fname)
    if stage is not None and key in stage:
        return stage[key], (f"ledger: pipeline stage {stage['rank']}'s figure (line {ctx.log.startup.lines.get(fname)} "
                            f"comes from "
                            f"{ctx.log.startup.field_workers[fname].split()[0]}; kvledger plan --pp "
                            f"{ctx.settings['pp']} lists every stage)")
    return (d.bytes if d else None), (f"ledger: {d.source}" if d else "ledger: n/a" + need)


def _memory_rows(ctx: DoctorContext) -> list[ComparisonRow]:
    st, a = ctx.log.startup, ctx.model_plan
    m = a.memory if a else None
    missing = [x for x, ok in (("--model", ctx.model is not None), ("--gpu", ctx.gpu is not None)) if not ok]
    need = "" if a else f" (no ledger figure: pass {' and '.join(missing) or 'settings the ledger accepts; see notes'})"
    v0 = ctx.log.generation == "v0"
    rows = [_row("device total", "B", st.total_gpu_memory_bytes, st.lines.get("total_gpu_memory_bytes"),
                 m.gpu_total_bytes if m else None,
                 f"ledger: {ctx.gpu_source}" + need),
            _row("gpu_memory_utilization", "fraction", st.gpu_memory_utilization,
                 st.lines.get("gpu_memory_utilization"),
                 m.fraction if m else None, f"ledger: {ctx.sources['gpu_memory_utilization']}" + need),
            _row("requested = total × utilization", "B", st.requested_memory_bytes,
                 st.lines.get("requested_memory_bytes"),
                 m.requested_bytes if m else None, ("device total × gpu_memory_utilization (V0 "
                                                    "worker.py::determine_num_available_blocks)"
                 if v0 else "ceil(device total × gpu_memory_utilization) (v1/worker/utils.py::request_memory)")
                 + computed_requested(st))]
    for term, fname, dname, key in MEMORY_TERMS:
        rows.append(_row(term, "B", getattr(st, fname), st.lines.get(fname), *_ledger_term(ctx, fname, key,
            _deduction(a, dname), need)))
    rows.append(_cudagraph_row(ctx, _deduction(a, "CUDA graphs"), need))
    non_kv = st.non_kv_total_bytes
    if non_kv is None and st.requested_memory_bytes and st.available_kv_bytes is not None:
        non_kv = st.requested_memory_bytes - st.available_kv_bytes
    non_kv_field = "non_kv_total_bytes" if st.non_kv_total_bytes is not None else "available_kv_bytes"
    stage = _stage_of(ctx, non_kv_field)
    ledger_non_kv = (
        (m.requested_bytes - stage["available_kv_bytes"])
        if stage and m
        else (sum(x.bytes for x in m.deductions) if m else None)
    )
    rows.append(_row("non-KV total", "B", non_kv, st.lines.get(non_kv_field), ledger_non_kv,
                     "sum of the terms above (ledger" + (f", pipeline stage {stage['rank']}" if stage else "")
                     + "); the log's own total or requested − available"))
    rows.append(_available_row(ctx, rows, need))
    return rows


def _cudagraph_row(ctx: DoctorContext, d, need: str) -> ComparisonRow:
    """The CUDA-graph term of the budget as the log shows it: the estimate, or 0 B where the log says the estimate
    was not subtracted, or where only the capture's own memory is printed and this version sizes the pool before
    capturing (before 0.20: the capture's "took X GiB" is not a budget term)."""
    st = ctx.log.startup
    est = st.cudagraph_estimate_bytes is not None
    cg_log = st.cudagraph_estimate_bytes if est else st.cudagraph_actual_bytes
    cg_line = st.lines.get("cudagraph_estimate_bytes" if est else "cudagraph_actual_bytes")
    text = f"ledger: {d.source}" if d else "ledger: n/a" + need
    ver = ctx.settings.get("engine_version")
    if st.cudagraph_estimate_applied is False and est:
        # the budget is requested − non-KV − the estimate only when VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS is on
        # (gpu_worker.py::determine_available_memory); the log says it was off: 0 B was subtracted
        text += (f"; log: its estimate {_gib(st.cudagraph_estimate_bytes)} (line {cg_line}) was not subtracted: line "
                 f"{st.lines['cudagraph_estimate_applied']} says VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS is off")
        cg_log, cg_line = 0, st.lines["cudagraph_estimate_applied"]
    elif not est and cg_log is not None and ver and not subtracts_cudagraphs(
            parse_version(ver), ctx.gpu is not None and ctx.gpu.gpu_id.startswith("amd_")):  # ROCm's own gate
        # e.g. vLLM 0.10.2 (gpu_worker.py::compile_or_warm_up_model) captures after the KV pool is sized
        text += (f"; log: the capture took {_gib(cg_log)} (line {cg_line}) after vLLM {ver} had sized the KV pool: "
                 "not a budget term")
        cg_log = 0
    return _row("CUDA graphs", "B", cg_log, cg_line, d.bytes if d else None, text)


def _available_row(ctx: DoctorContext, rows: list[ComparisonRow], need: str) -> ComparisonRow:
    st, a = ctx.log.startup, ctx.model_plan
    stage = _stage_of(ctx, "available_kv_bytes")
    ledger = stage["available_kv_bytes"] if stage else (a.memory.available_kv_bytes if a else None)
    parts, explained, printed = [], 0.0, 1  # printed: the log's figures in the sum (its available KV memory first)
    req = next(r for r in rows if r.term.startswith("requested"))
    if req.difference is not None:
        parts.append(f"requested {req.difference / GiB:+.2f}")
        explained, printed = explained + req.difference, printed + 1
    for r in rows:
        if r.unit == "B" and r.term in ("weights", "activation peak", "non-torch memory",
                                        "CUDA graphs") and r.difference is not None:
            parts.append(f"{r.term} {-r.difference / GiB:+.2f}")
            explained, printed = explained - r.difference, printed + 1
    text = "requested − every term above" if ledger is not None else need.strip(" ()")
    if ledger is not None and st.available_kv_bytes is not None:
        resid = (ledger - st.available_kv_bytes) - explained
        text = (
            f"ledger − log = {(ledger - st.available_kv_bytes) / GiB:+.2f} GiB = "
            + ("; ".join(parts) or "no itemised terms")
            + f" GiB; {residual_words(resid, printed)}"
        )
    return _row("available KV memory", "B", st.available_kv_bytes, st.lines.get("available_kv_bytes"), ledger, text)


def blocks_row(ctx: DoctorContext) -> ComparisonRow | None:
    st, b, a = ctx.log.startup, ctx.log_memory_plan, ctx.model_plan
    lo, hi, how = ctx.log_blocks
    line = st.lines.get("num_gpu_blocks") or st.lines.get("num_gpu_blocks_override") or st.lines.get("kv_cache_tokens")
    if b is None:
        if lo is None and a is None:
            return None
        ledger = a.memory.num_gpu_blocks if a else None
        text = (f"ledger from its memory model (the log prints no KV budget): {_gib(a.memory.available_kv_bytes)} / "
                f"{a.memory.bytes_per_block:,} B per block; log: {how}") if a else f"log: {how}"
        return _row("GPU blocks", "blocks", lo, line, ledger, text, check=False)
    if ctx.settings.get("pp", 1) > 1:
        return _pp_blocks_row(ctx, lo, line, how)
    ledger, bpb = b.memory.num_gpu_blocks, b.memory.bytes_per_block
    rlo, rhi = printed_gib_block_range(st.available_kv_bytes, bpb)
    text = f"ledger: floor({_gib(st.available_kv_bytes)} / {bpb:,} B per block) = {ledger:,}; log: {how}"
    in_range = False
    if lo is not None and ledger != lo:
        verdict, in_range = _range_verdict(ctx, lo, bpb, rlo, rhi)
        text += (f"; vLLM prints the available memory to 2 decimals, so {st.available_kv_bytes / GiB:.2f} GiB allows "
                 f"{rlo:,}–{rhi:,} blocks: the log's {lo:,} " + verdict)
    return _row("GPU blocks", "blocks", lo, line, ledger, text, in_range=in_range)


def _range_verdict(ctx: DoctorContext, lo: int, bpb: int, rlo: int, rhi: int) -> tuple[str, bool]:
    """The log's block count against the printed memory's range, and whether the engine could have printed it. Below
    it on several GPUs it is still the engine's when the pool is the smallest rank's and the memory line one rank's
    (``vllm_rank_print``): inside 1–rhi, as with pipeline stages; otherwise the settings do not match the log."""
    if rlo <= lo <= rhi:
        return "is inside that range", True
    ver = ctx.settings.get("engine_version")
    chk = check_printed_pool(parse_version(ver), int(ctx.settings.get("tp") or 1),
                             round(ctx.log.startup.available_kv_bytes / GiB, 2), lo, bpb, rlo, rhi) if ver else None
    if chk is None or chk.verdict != "smallest rank":
        return "is OUTSIDE that range — the model, KV dtype or TP do not match the log", False
    return (f"is below it but inside 1–{rhi:,}, as vLLM allows: {chk.why}; so the smallest rank had "
            f"{chk.spread_low / GiB:.3f}–{chk.spread_high / GiB:.3f} GiB less available memory than the one "
            "printed"), True


def _pp_blocks_row(ctx: DoctorContext, lo: int | None, line: int | None, how: str) -> ComparisonRow:
    """With pipeline parallelism the printed available memory is the first stage's only: vLLM logs it with
    ``info_once(scope="local")`` (gpu_worker.py::determine_available_memory; vllm/logger.py prints "local" lines from
    the node's first rank), and keeps the smallest block count over the stages
    (kv_cache_utils.py::get_kv_cache_configs).
    The other stages' budgets are not printed, so the first stage's figure only bounds the block count from above."""
    st, b = ctx.log.startup, ctx.log_memory_plan
    first = b.memory.stages[0]
    bpb = first["bytes_per_block"]
    _, rhi = printed_gib_block_range(st.available_kv_bytes, bpb)
    text = (f"pipeline parallel {ctx.settings['pp']}: the log prints the first stage's available KV memory only "
            f"(gpu_worker.py logs it from the first rank), and vLLM keeps the smallest block count over the stages "
            f"(kv_cache_utils.py::get_kv_cache_configs), so the ledger bounds it: at most "
            f"floor({_gib(st.available_kv_bytes)} / "
            f"{bpb:,} B per block of stage 0's {first['num_layers']} layers) = {first['num_gpu_blocks']:,} "
            f"(up to {rhi:,} within the 2-decimal print); log: {how}")
    inside = lo is not None and 1 <= lo <= rhi
    if lo is not None:
        text += (f"; the log's {lo:,} is {'inside' if inside else 'OUTSIDE'} 1–{rhi:,}"
                 + ("" if inside else " — the model, KV dtype or PP split do not match the log"))
    return _row("GPU blocks", "blocks", lo, line, first["num_gpu_blocks"], text, in_range=inside)


def _capacity_rows(ctx: DoctorContext) -> list[ComparisonRow]:
    st, x = ctx.log.startup, ctx.log_blocks_plan
    rows = [r for r in [blocks_row(ctx)] if r is not None]
    if x is None:
        why = "no ledger figure: " + ("pass --model" if ctx.model is None else "the ledger could not plan these "
                                                                               "settings (see notes)")
        if st.kv_cache_tokens is not None:
            rows.append(_row("KV cache size (printed)", "tokens", st.kv_cache_tokens, st.lines.get("kv_cache_tokens"),
                             None, why))
        if st.max_concurrency is not None:
            rows.append(_row(f"max concurrency at {st.concurrency_context_tokens:,} tokens", "x", st.max_concurrency,
                             st.lines.get("max_concurrency"), None, why))
        return rows
    figs, m = printed_figures(x.memory.printed_lines), x.memory
    e = era(parse_version(m.engine_version))
    L = m.max_model_len
    row = x.row_at(L)
    rows.append(_row("bytes per block", "B", None, None, m.bytes_per_block,
                     f"{m.block_size} tokens × per-token KV bytes of the layers sharing a block ({ctx.model_source})"))
    if st.kv_cache_tokens is not None:
        rows.append(_row("KV cache size (printed)", "tokens", st.kv_cache_tokens, st.lines.get("kv_cache_tokens"),
                         figs.get("kv_cache_tokens"),
                         f"vLLM {m.engine_version} prints "
                         f"{'int(n / R(L) × L)' if e == 'v1-0.24' else '(n // groups) × block_size'} "
                         f"with the log's n = {m.num_gpu_blocks:,}"))
    if st.max_concurrency is not None:
        formula = (f"n × block_size / L = {m.num_gpu_blocks:,} × {m.block_size} / {L:,}" if e in ("v0", "v1-0.8")
                   else f"n / R(L) = {m.num_gpu_blocks:,} / {row.blocks_per_request:,} blocks per {L:,}-token request")
        rows.append(_row(f"max concurrency at {L:,} tokens", "x", st.max_concurrency, st.lines.get("max_concurrency"),
                         figs.get("max_concurrency"), formula + " (printed to 2 decimals)"))
    if st.error_kv_capacity_tokens is not None:
        rows.append(_row("KV capacity (V0 start-up check)", "tokens", st.error_kv_capacity_tokens,
                         st.lines.get("error_kv_capacity_tokens"),
                         m.num_gpu_blocks * m.block_size, f"n × block_size = {m.num_gpu_blocks:,} × {m.block_size}; "
                                                          f"one "
                         f"{L:,}-token request {'fits' if row and row.max_requests >= 1 else 'does not fit'} (the "
                         f"ledger agrees with the log's error)"))
    return rows


def _settings(ctx: DoctorContext) -> dict[str, dict]:
    out = {"model": {"value": ctx.model.name if ctx.model else None, "source": ctx.model_source},
           "gpu": {"value": ctx.gpu.name if ctx.gpu else None, "source": ctx.gpu_source}}
    for k, v in ctx.settings.items():
        if k != "engine" and not (k in ("num_gpu_blocks_override", "max_cudagraph_capture_size") and v is None):
            out[k] = {"value": v, "source": ctx.sources.get(k, "")}
    plan = ctx.log_memory_plan or ctx.model_plan or ctx.log_blocks_plan
    if plan is not None:
        m = plan.memory
        for k, v in (("gpu_memory_utilization", m.fraction), ("max_model_len", m.max_model_len),
                     ("max_num_batched_tokens", m.max_num_batched_tokens),
                     ("max_num_seqs", m.max_num_seqs), ("block_size", m.block_size)):
            if out[k]["value"] is None:
                out[k] = {"value": v, "source": out[k]["source"] + f" → {v:,}" if isinstance(v,
                    int) else out[k]["source"] + f" → {v}"}
    return out


def compare_startup(ctx: DoctorContext) -> StartupComparison | None:
    """The comparison, or None when the log prints no start-up memory or capacity figure."""
    st = ctx.log.startup
    keys = ("available_kv_bytes", "num_gpu_blocks", "kv_cache_tokens", "max_concurrency", "weights_bytes",
            "total_gpu_memory_bytes")
    if all(getattr(st, k) is None for k in keys):
        return None
    rows = _memory_rows(ctx) + _capacity_rows(ctx)
    checked = [r.agrees for r in rows if r.agrees is not None]  # decided per row by _row, not read from its text
    consistent = all(checked) if checked else None
    rows = [r for r in rows if r.log_value is not None or r.ledger_value is not None]
    notes = list(ctx.notes) + list(st.notes)
    if ctx.model is None:
        notes.append("no model: " + ctx.model_source)
    only = memory_only(rows) if consistent is None else None
    plan = ctx.log_memory_plan
    said = capacity_words(rows, st.available_kv_bytes, plan.memory.bytes_per_block if plan else None,
                          int(ctx.settings.get("pp") or 1)) if consistent else None
    return StartupComparison(_settings(ctx), tuple(rows), consistent, tuple(notes),
                             skipped_why(ctx) if consistent is None and only is None else None, only,
                             *memory_verdicts(rows, ctx, _memory_rows), reproduced=said)
