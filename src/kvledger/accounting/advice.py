"""When a plan does not fit: by how much, and what each fix would buy, with numbers; and the waterfall of terms.

The fixes are the ones the engines' own errors and docs name (vLLM's start-up error suggests raising gpu_memory_
utilization or lowering max_model_len; its tuning guide adds TP; FP8 KV halves the page): each re-planned, not guessed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from kvledger.accounting import advice_startup_len as SL
from kvledger.accounting.advice_cap import at_len, capped_at_max, context_words, few_words, seqs_options
from kvledger.accounting.advice_combo import TP_STEPS, fewer_gpu_options
from kvledger.accounting.advice_dp import dp_advice
from kvledger.accounting.advice_len import blocks_at, max_len_option
from kvledger.accounting.advice_mamba import no_prefix_caching_option
from kvledger.accounting.advice_mnbt import max_num_batched_tokens_fix
from kvledger.accounting.advice_override_oom import override_out_of_memory, override_over_budget_note
from kvledger.accounting.advice_seqs import max_num_seqs_fix
from kvledger.accounting.advice_sglang import fp8_kv_flag, mem_fraction_option
from kvledger.accounting.advice_sglang_len import sglang_reduced_words
from kvledger.accounting.advice_trtllm_len import SERVED_AT_LOWER_LEN, trtllm_reduced_words
from kvledger.accounting.advice_types import Advice, Option
from kvledger.accounting.advice_waterfall import waterfall
from kvledger.accounting.kv_range import concurrency_caveat, no_fit_caveat, whole_requests_range
from kvledger.accounting.node_size import beyond_a_node, nodes_flag
from kvledger.accounting.window_capacity import at_max_words
from kvledger.catalog.gpus import cli_name, gpu_catalog
from kvledger.errors import InputError
from kvledger.units import GiB

if TYPE_CHECKING:
    from kvledger.accounting.plan import Plan

__all__ = ["Option", "Advice", "advise", "waterfall"]


def _at_len(p: Plan) -> tuple[float, int]:
    r = p.row_at(p.memory.max_model_len)  # none where vLLM's own check refuses the re-plan (0.14–0.16 under PP)
    return (r.max_concurrency, r.max_requests) if r and not SL.check_refuses(p) else (0.0, 0)


def _retry(build: Callable, p: Plan) -> Callable[..., Plan | None]:
    return lambda **u: _try(build, p, **u)


def _try(build: Callable, p: Plan, gpu=None, **update) -> Plan | None:
    given = {"nnodes": p.nodes.given} if p.nodes else {}  # a re-plan assumes the nodes its own ranks need
    given |= {"ep_size": update["tp"]} if "tp" in update and p.settings.ep_size == p.settings.tp else {}  # EP = TP
    s = p.settings.model_copy(update={"contexts": (p.memory.max_model_len,), **given, **update})
    try:
        return build(p.model, gpu or p.gpu, s, with_roofline=False, with_advice=False)
    except InputError:
        return None


def _options(p: Plan, build: Callable, est_len: int | None) -> list[Option]:
    opts, tp_alone = [], None  # tp_alone: the smallest --tp that alone fits, if any
    for tp in TP_STEPS:
        if tp <= p.settings.tp:
            continue
        q = _try(build, p, tp=tp)
        if q and _at_len(q)[1] >= 1:
            (c, n), ep = _at_len(q), f" --ep-size {tp}" * (q.settings.ep_size == tp)  # SGLang's EP = TP: _try
            opts.append(Option(f"--tp {tp}{ep}{nodes_flag(q, p)}", c, n, f"{q.memory.available_kv_bytes / GiB:.2f}"
                               " GiB KV per GPU" + beyond_a_node(tp, p.gpu), q.memory.max_model_len))
            tp_alone = tp
            break
    opts += fewer_gpu_options(p, lambda **u: _try(build, p, **u), _at_len, tp_alone, _FP8_WEIGHTS_WHY, _fp8_kv_why(p))
    if not p.settings.kv_cache_dtype.startswith("fp8"):
        q = _try(build, p, kv_cache_dtype="fp8")
        if q and _at_len(q)[1] >= 1:
            c, n = _at_len(q)
            opts.append(Option(fp8_kv_flag(p), c, n, _fp8_kv_why(p, q), q.memory.max_model_len))
    if p.settings.quantization is None:  # vLLM only: _try gets None from the other engines' refusal
        q = _try(build, p, quantization="fp8")
        if q and _at_len(q)[1] >= 1:
            c, n = _at_len(q)
            opts.append(Option("-q fp8", c, n, f"{_FP8_WEIGHTS_WHY}; {q.memory.available_kv_bytes / GiB:.2f} GiB KV "
                               "per GPU", q.memory.max_model_len))
    if est_len:
        opts.append(max_len_option(p, est_len, SL.fix_len_low(p, est_len)))
    seqs = [Option(*fix) for fix in max_num_seqs_fix(p, build)] + no_prefix_caching_option(p, _retry(build, p), 0)
    seqs += max_num_batched_tokens_fix(p, build)  # vLLM DP + EP: the profile's MoE rows are DP × the token budget
    fraction = _utilization_option(p, build) + mem_fraction_option(p, lambda **u: _try(build, p, **u), _at_len)
    return opts + fraction + seqs + _bigger_gpus(p, build)


_FP8_WEIGHTS_WHY = "vLLM --quantization fp8: weights quantized on load, about half their bytes freed for KV"


def _fp8_kv_why(p: Plan, q: Plan | None = None) -> str:
    """What FP8 KV does to the pool, in the plan's engine's words, following the re-planned numbers ``q`` where given.
    vLLM: attention pages halve (kv_cache_interface.py) — blocks double where attention sets the page; with Mamba or
    linear-attention state, whose page stays, the block count stays and each block holds twice the tokens (the
    attention block widened to the state page: platforms/interface.py); MLA on Hopper moves to FLASHMLA's 64-token
    blocks (vllm_mla_fp8)."""
    if p.settings.engine != "vllm":
        return "KV bytes per token halve (1 B per element instead of 2), so the pool holds twice the tokens"
    state = p.layout is not None and any(g.kind == "state" for g in p.layout.groups)
    a, b = p.memory, (q or p).memory
    if not (a.kv_free or b.kv_free) and b.block_size > a.block_size:
        why = ("attention pages halve but the state page stays" if state else
               "bytes per token halve, but the FP8 KV backend takes larger blocks (platforms/cuda.py)")
        return (f"{why}: {a.num_gpu_blocks:,} blocks of {a.block_size:,} tokens → {b.num_gpu_blocks:,} of "
                f"{b.block_size:,} (kv_cache_interface.py)")
    if state and (q is None or a.kv_free or b.kv_free):
        return ("attention pages halve; the state page stays, so tokens per block double, the blocks about the same "
                "(kv_cache_interface.py)")
    return "page size halves, blocks double (kv_cache_interface.py)"


LOW_CONCURRENCY = 8
"""Below this many concurrent max_model_len requests a plan fits but serves few users at once: the fixes that raise it
(more TP, FP8 KV, FP8 weights, a hybrid's --no-enable-prefix-caching) are listed as when nothing fits."""


def _more_concurrency(p: Plan, build: Callable, n: int, seqs: int) -> list[Option]:
    """The changes that raise the whole requests run at max_model_len above ``n`` (min(KV-bound, ``seqs``, the
    max_num_seqs)), re-planned: judged by what runs at once while decoding where the re-plan has windowed layers,
    else by the start-up figure; a KV fix whose requests pass ``seqs`` comes with the --max-num-seqs that lets them
    run (``advice_cap.seqs_options`` first: that flag alone, where it binds)."""
    tries: list[tuple[str, dict[str, Any], str]] = []
    tp = next((t for t in TP_STEPS if t > p.settings.tp), None)
    if tp is not None:
        pp, ep = p.settings.pp, f" --ep-size {tp}" * (p.settings.ep_size == p.settings.tp)  # SGLang's EP = TP: _try
        gpus = f" ({tp * pp}, from {p.settings.tp * pp}: TP {tp} × PP {pp})" if pp > 1 else ""  # a PP plan's GPUs
        tries.append((f"--tp {tp}{ep}", {"tp": tp}, f"weights and KV split over more GPUs{gpus}"))
    if not p.settings.kv_cache_dtype.startswith("fp8"):
        tries.append((fp8_kv_flag(p), {"kv_cache_dtype": "fp8"}, _fp8_kv_why(p)))
    if p.settings.quantization is None:
        tries.append(("-q fp8", {"quantization": "fp8"}, _FP8_WEIGHTS_WHY))
    opts = seqs_options(_retry(build, p), n, _at_len(p)[1], seqs)
    for action, update, why in tries:
        q = _try(build, p, **update)
        if q and (k := at_len(q)[1]) > seqs:  # more than the scheduler runs: with the max_num_seqs that runs them
            q, action = _try(build, p, **update, max_num_seqs=k), f"{action} --max-num-seqs {k:,}"
        dec = r.decode_requests if q and (r := q.row_at(q.memory.max_model_len)) else None
        if q and min(at_len(q)[1], q.memory.max_num_seqs) > n:
            c, k = _at_len(q)
            why = _fp8_kv_why(p, q) if "kv_cache_dtype" in update else why
            opts.append(Option(action + nodes_flag(q, p), c, k, f"{why}; {q.memory.available_kv_bytes / GiB:.2f} GiB "
                               "KV per GPU", q.memory.max_model_len, dec))
    return opts + no_prefix_caching_option(p, _retry(build, p), n)


def _utilization_option(p: Plan, build: Callable) -> list[Option]:
    """The smallest --gpu-memory-utilization (to 0.01, at most 1) that holds one max_model_len request, as vLLM's own
    start-up error suggests raising it: (deductions + that request's blocks + the null block) ÷ device total, re-planned
    up to 0.02 higher if the terms move with it; none when even 1.0 is not enough or the engine is not vLLM."""
    m = p.memory
    if m.fraction_name != "gpu_memory_utilization" or m.kv_free or m.available_given:
        return []
    need = (blocks_at(p, m.max_model_len) + 1) * m.bytes_per_block + sum(d.bytes for d in m.deductions)
    first = math.ceil(need / m.gpu_total_bytes * 100 - 1e-9) / 100
    for u in (round(first + k / 100, 2) for k in range(3)):
        if u <= m.fraction or u > 1.0:
            continue
        q = _try(build, p, gpu_memory_utilization=u)
        if q and _at_len(q)[1] >= 1:
            c, n = _at_len(q)
            return [Option(f"--gpu-memory-utilization {u:g}", c, n, f"the engine may then use "
                           f"{q.memory.requested_bytes / GiB:.2f} GiB, leaving {q.memory.available_kv_bytes / GiB:.2f} "
                           "GiB for the KV cache (vLLM's start-up error suggests raising it)", q.memory.max_model_len)]
    return []


BIGGER_MEMORY_RATIO = 1.05
"""A GPU counts as bigger with at least 5% more device memory: an A100-80GB (79.25 GiB) is not bigger than an H100
(79.19 GiB), and what fits there fits through vLLM's other defaults on it, not through memory. The same 5% step
groups the bigger GPUs into memory sizes (H100 NVL 93.14, RTX PRO 6000 94.97 and H20 95.14 GiB are one size)."""
GPU_SUGGESTIONS = 3
SUPERCHIP_PREFIXES = ("nvidia_gh", "nvidia_gb")
"""Grace superchips (GH200, GB200, GB300): a CPU+GPU module, another server rather than a card swap; suggested only
when the plan's GPU is one."""


def _bigger_gpus(p: Plan, build: Callable) -> list[Option]:
    """The GPUs of the planned GPU's vendor with more memory on which the plan fits, ranked memory first: the smallest
    memory size that fits, then the next two sizes up; within a size the highest HBM bandwidth. Each says what its
    memory buys. The same vendor because the engine runs on one platform (vLLM's CUDA build on NVIDIA, its ROCm build
    on AMD: ``platforms/``), with that platform's kernels, images and fleet: a bigger part of the same vendor is the
    change that keeps the rest of the deployment (an AMD MI250X plan gets MI300X/MI325X/MI355X; a GPU file's or an
    unknown vendor's plan gets NVIDIA parts, as before)."""
    superchip = p.gpu.gpu_id.startswith(SUPERCHIP_PREFIXES)
    vendors = {g.gpu_id.split("_", 1)[0] for g in gpu_catalog().values()}
    vendor = p.gpu.gpu_id.split("_", 1)[0] if p.gpu.gpu_id.split("_", 1)[0] in vendors else "nvidia"
    fitting: list[tuple[Any, Any]] = []
    for g in sorted(gpu_catalog().values(), key=lambda g: g.memory_bytes):
        if (g.memory_bytes >= p.gpu.memory_bytes * BIGGER_MEMORY_RATIO and g.gpu_id.split("_", 1)[0] == vendor
                and (superchip or not g.gpu_id.startswith(SUPERCHIP_PREFIXES))):
            q = _try(build, p, gpu=g)
            if q and _at_len(q)[1] >= 1:
                fitting.append((g, q))
    sizes: list[list[tuple[Any, Any]]] = []
    for g, q in fitting:
        if sizes and g.memory_bytes < sizes[-1][0][0].memory_bytes * BIGGER_MEMORY_RATIO:
            sizes[-1].append((g, q))
        else:
            sizes.append([(g, q)])
    opts: list[Option] = []
    for size in sizes[:GPU_SUGGESTIONS]:
        g, q = max(size, key=lambda gq: gq[0].hbm_bandwidth_bytes_per_s)
        c, n = _at_len(q)
        opts.append(Option(f"--gpu {cli_name(g.gpu_id)}{nodes_flag(q, p)}", c, n,
                           f"{g.name}: {g.memory_bytes / GiB:.2f} GiB device memory, "
                           f"{(g.memory_bytes - p.gpu.memory_bytes) / GiB:.2f} GiB more than the {p.gpu.name}, leaves "
                           f"{q.memory.available_kv_bytes / GiB:.2f} GiB for the KV cache", q.memory.max_model_len))
    return opts


def advise(p: Plan, build: Callable) -> Advice:
    """The verdict for a plan and, when it does not fit, the fixes re-planned with numbers (a DP plan's in its ranks'
    words: ``advice_dp``)."""
    return dp_advice(p, _advise(p, build))


def _advise(p: Plan, build: Callable) -> Advice:
    m = p.memory
    row = p.row_at(m.max_model_len)
    need_blocks = row.blocks_per_request if row else 0
    if m.kv_free and m.fits:
        return Advice("fits", f"fits with no KV cache of its own: every layer reads another model's cache, so only "
                      f"max_num_seqs = {m.max_num_seqs:,} limits the requests running at once; "
                      f"{m.headroom_bytes / GiB:.2f} GiB of the budget is left after the deductions")
    if p.layout is not None and not p.layout.groups and not m.kv_free:
        return Advice("no_kv_pool", f"does not fit: the binding pipeline stage keeps no KV cache group (its layers all "
                      "read other layers' K/V), so vLLM gives that worker 1 block and the engine keeps the smallest "
                      f"count over workers: no usable block at --pp {p.settings.pp}; choose a --pp whose every stage "
                      "holds a layer with its own cache")
    if m.available_kv_bytes > 0 and m.usable_blocks <= 0 and p.settings.num_gpu_blocks_override:
        return Advice("override_leaves_no_block", f"does not fit: --num-gpu-blocks-override {m.num_gpu_blocks:,} "
                      f"leaves no usable block: vLLM's block pool takes block 0 as its null block "
                      f"(vllm/v1/core/block_pool.py, BlockPool: null_block = free_block_queue.popleft()), so requests "
                      f"get the other blocks; the override must be ≥ 2, and one {m.max_model_len:,}-token request "
                      f"needs {need_blocks + 1:,} ({need_blocks:,} blocks + the null block); or drop it to use the "
                      f"{m.available_kv_bytes / GiB:.2f} GiB the memory plan leaves for the KV cache")
    if m.available_kv_bytes <= 0 or m.usable_blocks <= 0:
        used, may = sum(d.bytes for d in m.deductions), no_fit_caveat(m.ranges)
        short = -(m.headroom_bytes if m.kv_free else m.available_kv_bytes) + (need_blocks * m.bytes_per_block)
        msg = (f"does not fit: the engine may use {m.requested_bytes / GiB:.2f} GiB "
               f"({m.requested_label or m.fraction_name}) but "
               f"{' + '.join(f'{d.name} {d.bytes / GiB:.2f}' for d in m.deductions if d.bytes)} = {used / GiB:.2f} GiB "
               f"before any KV; "
               f"short by {-m.available_kv_bytes / GiB:.2f} GiB, {short / GiB:.2f} GiB with one "
               f"{m.max_model_len:,}-token request{'.' + may if may else ''}")
        return Advice("weights_do_not_fit", msg, short, None, tuple(_options(p, build, None)))
    if oom := override_out_of_memory(p):  # vLLM allocates the override's blocks whatever the memory holds
        return oom
    if m.state_refused:  # SGLang's Mamba state slots serve no request: the note says why and what raises them
        why = next(n for n in m.notes if n.startswith("SGLang would refuse to start"))
        return Advice("state_does_not_fit", "does not fit: " + why, 0.0, None, tuple(_options(p, build, None)))
    if row and (edge := SL.override_check(p, need_blocks)):  # vLLM V1 < 0.21: the check ignores the override
        return edge
    if row and (row.max_requests < 1 or SL.check_refuses(p)):  # the check's count: vLLM 0.14–0.16 under PP
        if edge := SL.starts_never_scheduled(p, need_blocks):  # before vLLM 0.29: starts, the request never runs
            return edge
        lower = (trtllm_reduced_words(p, need_blocks) if m.engine == "trtllm" else  # both start, serving shorter
                 sglang_reduced_words(p, need_blocks) if m.engine == "sglang" else None)  # (advice_*_len)
        if lower is not None:
            return Advice(SERVED_AT_LOWER_LEN, lower[0], lower[1], lower[2], tuple(_options(p, build, lower[2])))
        msg, short, est, est_low = SL.does_not_fit_words(p, need_blocks)
        opts = tuple(_options(p, build, SL.fix_len(p)))  # the --max-model-len fix: runs (and passes the check)
        return Advice("max_model_len_does_not_fit", msg, short, est, opts, est_low)
    fit = _fits(p, build)
    over = override_over_budget_note(p)  # the override's blocks reach past the budget, within the device
    return replace(fit, message=f"{fit.message}; {over}") if over else fit


def _fits(p: Plan, build: Callable) -> Advice:
    """The verdict of a plan that fits: concurrency at max_model_len and at the contexts asked, the max_num_seqs cap,
    and fixes that raise a low concurrency."""
    m = p.memory
    n = _at_len(p)[1]
    asked = [r for r in p.concurrency if r.context_tokens != m.max_model_len and r.within_max_model_len
             and r.context_tokens in p.settings.contexts] if p.settings.contexts else []
    at_max, n_run = at_max_words(p, concurrency_caveat(m.ranges, n), _retry(build, p))
    at_max = capped_at_max(at_max, p.row_at(m.max_model_len), m.max_model_len)  # what runs first, the KV's second
    runs = min(n_run, seqs := m.max_num_seqs)  # the scheduler runs at most max_num_seqs whatever the KV holds
    small = runs < LOW_CONCURRENCY  # windowed: what runs while decoding; a hybrid's prefix-caching fix in any case
    low = _more_concurrency(p, build, runs, seqs) if small else no_prefix_caching_option(p, _retry(build, p), n)
    few = few_words(runs, n_run, seqs, LOW_CONCURRENCY) * (small and bool(low))
    if not asked:
        return Advice("fits", f"fits: {at_max}{few}", options=tuple(low))
    few_at = [_as_few(r, m.num_gpu_blocks - m.usable_blocks) for r in asked]
    first = next((i for i, n in enumerate(few_at) if n is not None), None)  # says "at the range's low end" once
    where = " at the range's low end"
    each = ", ".join(context_words(r, "" if n is None else f" (as few as {n:,}{where if i == first else ''})")
                     for i, (r, n) in enumerate(zip(asked, few_at)))
    return Advice("fits", f"fits: {each}; at max_model_len, {at_max}{few}", options=tuple(low))


def _as_few(r: Any, reserved: int) -> int | None:
    """The whole requests an asked context holds at the low end of the plan's range when fewer than at its point
    (``kv_range.whole_requests_range``: the engine's × there, less the null block), else None."""
    ends = whole_requests_range(r.max_concurrency_range, r.blocks_per_request, reserved)
    return ends[0] if ends and ends[0] < r.max_requests else None
