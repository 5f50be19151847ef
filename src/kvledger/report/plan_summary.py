"""The plan's summary: the answer in a few plain lines (KV per token, the pool, concurrency, roofline limits)."""

from __future__ import annotations

from rich.markup import escape

from kvledger.accounting.advice_mnbt import DP_BUDGET_NOTE
from kvledger.accounting.dp_attention import DP_ATTENTION_AT_DP_1, dp_attention_at_dp_1_brief
from kvledger.accounting.kv_range import range_text
from kvledger.accounting.memory import MemoryPlan
from kvledger.accounting.notes import SGLANG_FP8_KV
from kvledger.accounting.plan import ConcurrencyRow, Plan
from kvledger.accounting.platforms import NOT_MODELLED
from kvledger.accounting.roofline_breakdown import RooflineReport
from kvledger.accounting.vllm_gpu_support import NO_KERNELS
from kvledger.accounting.vllm_kv_auto import KV_AUTO_NOTE
from kvledger.accounting.vllm_releases import release_lines
from kvledger.catalog.family_base import WARNING_NOTE
from kvledger.catalog.hfread import CLASS_DEFAULTS_NOTE
from kvledger.report.plan_verdict import decode_capped, decode_clause, decode_folded
from kvledger.units import GiB, KiB, fmt_low

__all__ = ["summary_lines", "attention_by_context_text", "limit_names", "warning_lines",
           "ASSUMED_RELEASE", "vllm_flags_text"]


def warning_lines(p: Plan, *, verbose: bool = True) -> list[str]:
    """The warnings shown under the plan's title, as console markup: TP × PP past one node (the figures are of the
    nodes assumed; its facts in one line unless ``verbose``), then the model's own (a vision tower not counted, an
    architecture vLLM may not serve as read)."""
    nodes = [] if p.nodes is None else [p.nodes.text if verbose else p.nodes.brief]
    texts = nodes + [n.removeprefix(WARNING_NOTE) for n in (*p.model.notes, *p.memory.notes)
                     if n.startswith(WARNING_NOTE)]
    return [f"[bold yellow]WARNING:[/] {escape(t)}" for t in texts]


def _override_words(p: Plan) -> str:
    """Where the block count is ``--num-gpu-blocks-override``'s, not the budget's: the override named, with the blocks
    the budget itself holds ("" otherwise)."""
    m = p.memory
    if not p.settings.num_gpu_blocks_override or m.available_given or m.bytes_per_block <= 0:
        return ""
    return (f" set by --num-gpu-blocks-override (the budget holds {max(0, m.available_kv_bytes) // m.bytes_per_block:,}"
            ")")


def summary_lines(p: Plan, *, verbose: bool = True) -> list[str]:
    """The answer in a few lines: KV per token, the KV pool, concurrency at each context, the roofline's limits, the
    verdict; under PP the stages' line with ``verbose`` only (the KV line names the binding stage)."""
    m = p.memory
    out = _kv_lines(p)
    wd = next((d for d in m.deductions if d.name == "weights"), None)
    weights = f"weights {wd.bytes / GiB:,.2f} GiB{_ranged(wd.low_bytes, wd.high_bytes)}, " if wd is not None else ""
    rng = m.ranges.get("available_kv_bytes")
    if rng and m.available_kv_bytes <= 0:  # the shortfall's range, as positive numbers like its point
        rng = (max(0.0, -rng[1]), max(0.0, -rng[0]))
    rtxt = f" {range_text(*rng, fmt=',.2f')}" if rng and range_text(*rng, fmt=',.2f') else ""
    avail = (f"available KV {m.available_kv_bytes / GiB:,.2f} GiB{rtxt}" if m.available_kv_bytes > 0 else
             f"no memory left for the KV cache (short by {-m.available_kv_bytes / GiB:,.2f} GiB{rtxt})")
    if rng and rng[0] <= 0 < m.available_kv_bytes:
        avail += " — the low end does not start: the engine may refuse" if verbose else " — the low end may not start"
    if m.stages and (verbose or m.kv_free):  # no blocks to compare: said in the short plan too
        bind = next(st for st in m.stages if st["binds"])
        where = (f"PP{bind['rank']} (layers {bind['layers'][0]}–{bind['layers'][1]}"
                 f"{', LM head + sampler' if bind['is_last'] else ''})")
        out.append(f"pipeline: {len(m.stages)} stages × TP {p.settings.tp} GPUs; " + (
            f"no stage keeps a KV cache, so there are no blocks to compare; figures below are per GPU of stage {where}"
            if m.kv_free else f"the binding stage {where} has the fewest blocks and sizes the engine's pool; figures "
                              "below are per GPU of that stage"))
    budget = _budget(m, verbose)
    if p.layout is not None and not p.layout.groups and not m.kv_free:
        avail = "no KV cache group on the binding stage's GPU (its layers all read other layers' K/V)"
    if m.kv_free:
        avail = (f"no KV pool: vLLM gives a model without KV cache groups 0 bytes of cache; "
                 f"{m.headroom_bytes / GiB:,.2f} GiB of the budget is left after the deductions" if m.fits else
                 f"the deductions exceed the budget by {-m.headroom_bytes / GiB:,.2f} GiB")
        out.append(f"memory per GPU: {weights}{avail} ({budget})")
    else:
        source = "your engine figure" if m.available_given else budget
        out.append(f"memory per GPU: {weights}{avail} ({source})"
                   f" → {m.num_gpu_blocks:,} block{'' if m.num_gpu_blocks == 1 else 's'} of {m.block_size} "
                   f"token{'' if m.block_size == 1 else 's'}{_override_words(p)}"
                   + (f" ({m.ranges['num_gpu_blocks'][0]:,}–{m.ranges['num_gpu_blocks'][1]:,}{_at_len(p)})"
                      if m.ranges and m.ranges["num_gpu_blocks"][0] != m.ranges["num_gpu_blocks"][1] else ""))
    if m.startup is not None:  # vLLM under --wddm: does it start with the display driver's hold in use
        out.append(m.startup.message)
    if m.fits and m.kv_free:
        out.append(f"concurrency ({_per(p)}): only max_num_seqs = {m.max_num_seqs:,} limits it, "
                   f"at every context up to max_model_len {m.max_model_len:,} (no KV cache to fill; "
                   "the engine prints no maximum concurrency)")
    elif m.fits:
        folded = not verbose and decode_folded(p)  # short: the ≈ figures in one list, after the rows
        rows = "; ".join(_concurrency_cell(r, not folded) if r.within_max_model_len else
                         f"{r.context_tokens:,} tokens: above max_model_len, rejected" for r in p.concurrency)
        cap = [r for r in p.concurrency if r.within_max_model_len and r.max_requests > r.running_cap]
        capped = ""
        if cap and (verbose or not decode_capped(p)):  # short: the decode clause says max_num_seqs "still caps"
            where = ("at every context" if len(cap) == len(p.concurrency) else
                     f"at contexts up to {cap[-1].context_tokens:,} tokens")
            cap_name = f"{limit_names(m.engine)[1]} = {cap[0].running_cap:,}"  # SGLang's max_running_requests
            capped = (f" — what the KV holds; the engine runs at most {cap_name} at once, the limit {where}" if verbose
                      else f" — {cap_name} caps what runs {where.replace('at contexts up to', 'up to')}")
        out.append(f"concurrency ({_per(p)}): {rows}{capped}{decode_clause(p, verbose)}")
    return out + _dp_lines(p, verbose) + ([_roofline_line(p.roofline, verbose)] if p.roofline is not None else [])


def _at_len(p: Plan) -> str:
    """"; max concurrency at max_model_len lo–hi" for the block range, or "" where the concurrency line has a row at
    max_model_len, which prints the same range."""
    m = p.memory
    if any(r.context_tokens == m.max_model_len for r in p.concurrency):
        return ""
    lo, hi = m.ranges["max_concurrency"]
    return f"; max concurrency at {m.max_model_len:,} tokens {fmt_low(lo)}–{hi:,.2f}x"


def _per(p: Plan) -> str:
    """What one concurrency row counts: one replica, or one DP rank's pool."""
    return "per DP rank" if p.data_parallel is not None else "per replica"


def _dp_lines(p: Plan, verbose: bool = True) -> list[str]:
    """The DP ranks' totals and the rule they follow, or the DP-attention remedy of an MLA model at TP > 1 (its facts
    in one note unless ``verbose``)."""
    d = p.data_parallel
    if d is None:
        note = p.dp_remedy if verbose or p.dp_brief is None else p.dp_brief
        if note and _dp_flag_ignored(p):  # one note, not two: the flag SGLang ignored, then what --dp-size would hold
            note = f"SGLang ignores --enable-dp-attention (deprecated) without --dp-size; {note}"
        return [f"note: {note}"] if note else []
    budget = [f"note: {n}" for n in p.memory.notes if n.startswith(DP_BUDGET_NOTE)]
    rule = next((n for n in p.memory.notes if n.startswith(d.flags)), d.rule)
    kv = f"KV {d.ranks} × {d.kv_tokens_per_rank:,} = {d.kv_tokens_total:,} tokens in all"
    if not verbose:  # the rule's head and the totals in one line; the rule's details and each product: --verbose
        totals = (" / ".join(f"{r.total:,}" for r in d.requests) + " at "
                  + " / ".join(f"{r.context_tokens:,}" for r in d.requests) + " tokens") if d.requests else "—"
        return [f"data parallel {rule.split(': ', 1)[0]}: {d.ranks} DP ranks on {d.gpus} GPUs, attention TP "
                f"{d.attention_tp}, each its own scheduler and KV pool (figures per GPU are one rank's); {kv}; "
                f"requests held at once in all: {totals}", *budget]
    reqs = "; ".join(f"{r.context_tokens:,} tokens: {d.ranks} × {r.per_rank:,} = {r.total:,} requests"
                     for r in d.requests)
    return [f"data parallel ({d.flags}): {d.ranks} DP ranks on {d.gpus} GPUs, attention TP {d.attention_tp}; {kv} "
            f"(each rank its own pool; a request is routed to one rank); requests held at once in all (KV and "
            f"max_num_seqs): {reqs}", f"note: {rule}", *budget]


def _dp_flag_ignored(p: Plan) -> bool:
    """SGLang's --enable-dp-attention was given without --dp-size, which SGLang ignores (the plan's note says so)."""
    return any(n.startswith(DP_ATTENTION_AT_DP_1) for n in p.memory.notes)


def _kv_lines(p: Plan) -> list[str]:
    """The headline (KV per token, per GPU of the binding stage with PP) and the notes that qualify it."""
    m, kv = p.memory, p.kv
    shown = p.stage_kv if m.stages and p.stage_kv is not None else kv  # with PP: the binding stage's layers alone
    groups = "".join(f" — {t}" for t in ["; ".join(f"{g.num_layers} {g.kind}: {g.formula}" for g in shown.groups)] if t)
    auto = next((f" ({n})" for n in m.notes if n.startswith(KV_AUTO_NOTE)), "")  # what auto became, and why
    out = [f"KV per token: {kv.bytes_per_token:,.0f} B ({kv.bytes_per_token / KiB:,.2f} KiB) per GPU, KV dtype "
           f"{kv.kv_cache_dtype}{auto}{groups}"]
    out += [f"note: {n}" for n in release_lines(m.notes, m.engine, m.engine_version, keep=(NOT_MODELLED, NO_KERNELS))
            + [n for n in m.notes if n == SGLANG_FP8_KV]  # the flag SGLang takes, where a vLLM spelling was given
            + ([dp_attention_at_dp_1_brief(p.settings.engine_version)]  # else in the DP note
               if _dp_flag_ignored(p) and p.dp_remedy is None else [])]
    out += [f"note: {n}" for n in p.model.notes if n.startswith("model_type ") and ": read " in n]  # an unknown type
    out += [f"note: {n}" for n in p.model.notes if n.startswith("KV per ")]  # a note that qualifies the headline figure
    # a sizing field the file lacks (layers, heads, ...), taken from the class default: the figures above rest on it
    out += [f"note: {n}" for n in p.model.notes if n.startswith(CLASS_DEFAULTS_NOTE)]
    if m.kv_free:
        out[0] = (f"KV per token: 0 B per GPU: no layer keeps a KV cache or a state of its own (KV dtype "
                  f"{kv.kv_cache_dtype} does not matter)")
    if m.stages and not m.kv_free:
        bind = next(st for st in m.stages if st["binds"])
        lo, hi = bind["layers"]
        out[0] = (f"KV per token: {shown.bytes_per_token:,.0f} B ({shown.bytes_per_token / KiB:,.2f} KiB) per GPU of "
                  f"the binding pipeline stage PP{bind['rank']} (layers {lo}–{hi} only); all {p.model.num_layers} "
                  f"layers at TP {p.settings.tp}: {kv.bytes_per_token:,.0f} B, KV dtype {kv.kv_cache_dtype}{groups}")
    return out


def _budget(m: MemoryPlan, verbose: bool = True) -> str:
    """How the engine's budget is formed: the device total × its fraction less the terms (TensorRT-LLM: the fraction of
    the memory free after its dry run); SGLang's device total and what it held before the load, and the names of its
    terms past the weights, the reserve and a Mamba state pool, with ``verbose`` (the short plan counts them)."""
    names = [d.name for d in m.deductions if d.bytes]
    small = [n for n in names if n != "weights" and not n.startswith(("reserve", "Mamba"))]
    if m.engine == "sglang" and not verbose and len(small) > 1:  # short: its fixed overheads counted
        names = [n for n in names if n not in small]
        names.insert(int(names[:1] == ["weights"]), f"{len(small)} other terms")
    terms = ", ".join(names)
    if m.engine == "sglang":  # profile_max_num_token: free before load − weights … − (1 − f) × free before load
        held = m.gpu_total_bytes - m.requested_bytes
        total = (f" (device total {m.gpu_total_bytes / GiB:,.2f} − {held / GiB:,.2f} GiB held before it)" if verbose
                 else "")
        terms = terms.replace("(1 − mem_fraction_static)", f"(1 − mem_fraction_static {m.fraction:g})")
        return (f"{m.engine} {m.engine_version}: free before the weights load {m.requested_bytes / GiB:,.2f} GiB"
                f"{total} less " + (terms if verbose else terms.replace(" × free before load", " of it", 1)))
    budget = (f"{m.engine} {m.engine_version}: device total {m.gpu_total_bytes / GiB:,.2f} GiB "
              f"× {m.fraction_name} {m.fraction:g} less {terms}")
    if m.fraction_name == "free_gpu_memory_fraction":  # TensorRT-LLM applies it to the free memory, after the dry run
        after = ("the engine, its runtime buffers and its decoder load" if "TensorRT-engine" in m.engine_version
                 else "the dry run")  # the TensorRT-engine executor has no dry run (kvCacheManager.cpp)
        budget = (f"{m.engine} {m.engine_version}: device total {m.gpu_total_bytes / GiB:,.2f} GiB less {terms}; "
                  f"{m.fraction_name} {m.fraction:g} applies to the memory free after {after}")
    return budget


def _roofline_line(r: RooflineReport, verbose: bool = True) -> str:
    """The roofline's limits: ridge, the weight matmuls' crossover, decode attention's intensity by context (the short
    plan: one list of contexts and one of FLOP/B; why it varies with ``verbose``)."""
    head = (f"roofline: ridge {r.ridge_flops_per_byte:,.1f} FLOP/B; weight matmuls compute-bound above "
            f"{r.weight_matmul_crossover_tokens:,.0f} tokens per step")
    if not r.decode_attention_intensity:
        return head
    if not r.decode_attention_varies():
        return head + f"; decode attention {r.decode_attention_intensity:,.1f} FLOP/B, bandwidth-bound at any batch"
    if not verbose:
        by = sorted(r.decode_attention_by_context.items())
        return (head + f"; decode attention FLOP/B at {'/'.join(_k(c) for c, _ in by)} tokens: "
                f"{'/'.join(f'{v:,.1f}' for _, v in by)}, bandwidth-bound at any batch")
    why = f": {r.decode_attention_varies_because}" if r.decode_attention_varies_because else ""
    return (head + f"; decode attention {r.decode_attention_intensity:,.1f} FLOP/B at "
            f"{max(r.decode_attention_by_context):,} tokens of context ({attention_by_context_text(r)}{why}), "
            "bandwidth-bound at any batch")


def _k(tokens: int) -> str:
    """ "128K" for 131,072 tokens (a multiple of 1,024), else the count with its commas."""
    return f"{tokens // 1024:,}K" if tokens % 1024 == 0 else f"{tokens:,}"


def _ranged(low: float, high: float) -> str:
    """ " (65.50–66.00)" GiB for a term's range, "" when its ends print the same."""
    r = range_text(low, high, fmt=",.2f")
    return f" {r}" if r else ""


def _concurrency_cell(r: ConcurrencyRow, decoding: bool = True) -> str:
    """ "2,048 tokens: 7 requests (7.57x, range 3.40–9.10x)": the whole requests and the engine's × at the plan's point,
    and where the plan's block range moves the ×, its ends — one form whether or not the whole requests move with them
    (the fits line says how few whole requests the low end holds at each context asked: ``advice``)."""
    point = f"{r.context_tokens:,} tokens: {r.max_requests:,} request{'' if r.max_requests == 1 else 's'}"
    rng = r.max_concurrency_range
    dec = "" if r.decode_requests is None or not decoding else f", ≈{r.decode_requests:,} while decoding"
    if not rng or not range_text(*rng, scale=1, fmt=",.2f"):
        return f"{point} ({r.max_concurrency:,.2f}x){dec}"
    return f"{point} ({r.max_concurrency:,.2f}x, range {fmt_low(rng[0])}–{rng[1]:,.2f}x){dec}"  # low end rounded down


def attention_by_context_text(r: RooflineReport) -> str:
    """Decode attention intensity at each context, e.g. "12.3 at 4,096, 15.1 at 32,768" (FLOP/B)."""
    return ", ".join(f"{v:,.1f} at {c:,}" for c, v in sorted(r.decode_attention_by_context.items()))


def vllm_flags_text(s) -> str:
    """The engine flags given that change or may change a memory term, for the header (each term's source says how):
    vLLM's, and SGLang's expert-parallel ones."""
    given = [f"executor {s.distributed_executor_backend}" if s.distributed_executor_backend else "",
             "--enforce-eager" if s.enforce_eager else "",
             "--disable-custom-all-reduce" if s.disable_custom_all_reduce else "",
             f"sampler {s.sampler_backend}" if s.sampler_backend not in ("auto", None) else "",
             f"model runner {s.model_runner}" if s.model_runner != "auto" else "",
             "--enable-expert-parallel" if s.enable_expert_parallel else "",
             f"--ep-size {s.ep_size}" if getattr(s, "ep_size", None) else "",  # SGLang's own flags (sglang_ep.py)
             f"--moe-a2a-backend {s.moe_a2a_backend}" if getattr(s, "moe_a2a_backend", None) else ""]
    return "".join(f", {g}" for g in given if g)


ASSUMED_RELEASE = " (assumed: the newest modelled; --engine-version for yours)"
"""The plan header's word on a plan without --engine-version (``vllm_rules.LATEST``, SGLang's and TensorRT-LLM's newest
modelled release), under --verbose only: in the short output it wraps a title that already fills 3 lines to 4
(Llama-3.1-405B TP 8 × PP 2 on H100: 26 -> 27 lines at 80 columns, over the 26 tests/cli/test_newcomer.py allows)."""


def limit_names(engine: str) -> tuple[str, str]:
    """The engine's own names of the prefill token budget and the running-request cap, as its start-up line prints
    them: SGLang's chunked_prefill_size and max_running_requests (``managers/scheduler.py``), else vLLM's (the
    JSON keeps vLLM's names for every engine)."""
    return ("chunked_prefill_size", "max_running_requests") if engine == "sglang" else (
        "max_num_batched_tokens", "max_num_seqs")
