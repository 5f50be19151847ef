"""vLLM's KV budget and block pool for one GPU, version by version (docs/engine-model.md §1, §1.12).

available = ceil(total × gpu_memory_utilization) − weights − activation peak − non-torch
            − CUDA-graph estimate (0.20+)                        [gpu_worker.py::determine_available_memory]
  each term per GPU of each pipeline stage, by version (vllm_profile.py); with PP the stage with the
  fewest blocks binds (the engine keeps the minimum block count over workers)
num_gpu_blocks = floor(available / bytes_per_block)   [kv_cache_planning.py::get_kv_cache_config_from_groups]"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from kvledger.accounting import notes as N
from kvledger.accounting import vllm_profile as P
from kvledger.accounting import vllm_rules as R
from kvledger.accounting.kv_range import kv_ranges, printed_gib_block_range
from kvledger.accounting.kvcache import KVLedger, kv_ledger
from kvledger.accounting.kvlayout import KVLayout, vllm_layout, whole_counts
from kvledger.accounting.max_model_len import long_len_notes, resolve_max_model_len
from kvledger.accounting.memory import Deduction, MemoryPlan, floor_div
from kvledger.accounting.settings import PlanSettings
from kvledger.accounting.topology import nodes_within_dp
from kvledger.accounting.vllm_auto_len import auto_max_model_len
from kvledger.accounting.vllm_block_choice import dsv4_reservation_note, mamba_rule, vllm_block_size
from kvledger.accounting.vllm_check_demand import GLOBAL_GROUPS_CHECK as G
from kvledger.accounting.vllm_collectives import non_torch_term
from kvledger.accounting.vllm_flag_terms import executor_note
from kvledger.accounting.vllm_inflight import sliding_inflight_tokens
from kvledger.accounting.vllm_mxfp4_backend import mxfp4_note
from kvledger.accounting.vllm_online_fp8 import check_online_fp8_load
from kvledger.accounting.vllm_override_check import check_ignores_override
from kvledger.accounting.vllm_profile import PPStage
from kvledger.accounting.vllm_releases import prerelease_note, unknown_release_note
from kvledger.accounting.vllm_runner import RunnerChoice, model_runner, runner_note, v2_subtracts_cudagraphs
from kvledger.accounting.vllm_seqs_default import default_max_num_seqs
from kvledger.accounting.vllm_sparse_mla import sparse_mla_choice
from kvledger.accounting.vllm_startup import require_vllm_starts, vllm_startup_alone
from kvledger.accounting.vllm_terms import activation_item, cudagraph_item, weights_term
from kvledger.accounting.wddm import wddm_total
from kvledger.accounting.wddm_engines import vllm_startup_check, vllm_wddm_items
from kvledger.catalog.compressed_mla import has_compressed_mla
from kvledger.catalog.gpus import GpuSpec
from kvledger.catalog.loading import SERVED_DTYPE_BYTES
from kvledger.catalog.modelspec import ModelSpec
from kvledger.catalog.quant_rules import deprecated_method_note
from kvledger.errors import InputError
from kvledger.units import GiB

__all__ = ["VllmResult", "vllm_plan", "served_model", "resolve_max_model_len", "printed_gib_block_range"]


@dataclass(frozen=True)
class VllmResult:
    """The vLLM plan plus the layout and the sliding-window in-flight term used for block demand."""

    memory: MemoryPlan
    layout: KVLayout
    inflight_tokens: int
    version: tuple[int, int, int]
    stage_kv: KVLedger | None = None
    """With PP, the binding stage's KV ledger (its layers only, per GPU); None without PP."""


def served_model(model: ModelSpec, dtype: str) -> ModelSpec:
    """The model as served under vLLM's ``--dtype`` (activations, logits and "auto" KV in that dtype)."""
    if dtype in ("auto", "", None):
        return model
    name = {"half": "float16", "float": "float32"}.get(dtype, dtype)
    db = SERVED_DTYPE_BYTES[dtype]
    return model if (name, db) == (model.dtype, model.dtype_bytes) else replace(model, dtype=name, dtype_bytes=db)


def _runner(checkpoint: ModelSpec, gpu: GpuSpec, s: PlanSettings, ver) -> RunnerChoice:
    """The model runner these settings start (vllm_runner.py)."""
    return model_runner(checkpoint, ver, s.model_runner, gpu.gpu_id.startswith("amd_"), bool(s.quantization))


def _deductions(model: ModelSpec, gpu: GpuSpec, s: PlanSettings, ver, mnbt: int, seqs: int, stage: PPStage,
                checkpoint: ModelSpec) -> list[Deduction]:
    """The terms taken from the budget before the KV pool: vLLM's ``gpu_worker.determine_available_memory``."""
    vtxt = ".".join(map(str, ver))
    v2 = _runner(checkpoint, gpu, s, ver).v2
    v2_graphs, v2_src = v2_subtracts_cudagraphs(ver)
    rocm = gpu.gpu_id.startswith("amd_")
    if s.weights_bytes is not None:
        items = [Deduction("weights", s.weights_bytes, N.WEIGHTS_GIVEN)]
    else:
        items = [weights_term(checkpoint, gpu, s, stage, ver, rocm)]
    items.append(activation_item(model, gpu, s, ver, mnbt, seqs, stage, v2))
    if s.non_torch_bytes is not None:
        items.append(Deduction("non-torch memory", s.non_torch_bytes, N.NON_TORCH_GIVEN))
    else:
        t = non_torch_term(ver, s.tp, stage.pp, s.nnodes, gpu, s.disable_custom_all_reduce, bool(s.enforce_eager),
                           s.distributed_executor_backend, group_nnodes=nodes_within_dp(s))
        items.append(Deduction("non-torch memory", t.bytes, t.source, t.low, t.high, t.range_source))
    if not R.subtracts_cudagraphs(ver, rocm):
        items.append(Deduction("CUDA graphs", 0, N.cudagraphs_not_subtracted(vtxt, rocm)))
    elif s.cudagraph_bytes is not None:
        items.append(Deduction("CUDA graphs (estimate)", s.cudagraph_bytes, N.CUDAGRAPHS_GIVEN))
    elif v2 and not v2_graphs:
        items.append(Deduction("CUDA graphs", 0, v2_src))
    elif s.enforce_eager:
        items.append(Deduction("CUDA graphs (estimate)", 0,
                               "--enforce-eager: no CUDA graphs captured, nothing estimated"))
    else:
        items.append(cudagraph_item(model, gpu, s, ver, seqs, mnbt, v2_src if v2 else ""))
    return items + list(vllm_wddm_items(ver, gpu) if s.wddm else ())


@dataclass(frozen=True)
class _Stage:
    """One pipeline stage's budget (the whole model when pp = 1)."""

    stage: PPStage
    model: ModelSpec
    layout: KVLayout
    items: list[Deduction]
    available: int
    blocks: int
    kv: KVLedger


def _stage_budgets(model: ModelSpec, gpu: GpuSpec, s: PlanSettings, kv: KVLedger, ver, mnbt: int, seqs: int, B: int,
                   unify: bool, requested: int, checkpoint: ModelSpec, mamba: R.MambaCacheRule | None) -> list[_Stage]:
    out, align = [], mamba.checkpoint_alignment_tokens if mamba else None
    kw = dict(unify_hybrid=unify, checkpoint_alignment_tokens=align, ver=ver,
              state_pages_per_request=mamba.state_pages_per_request if mamba else 1,
              state_page_per_block=mamba.page_per_block if mamba else False)
    whole = vllm_layout(model, kv, B, **kw) if s.pp > 1 and G[0] <= ver < G[1] else None  # the check's, 0.14–0.16
    for st in P.pp_stages(model.num_layers, s.pp):
        sm = P.stage_model(model, st)
        skv = kv if s.pp == 1 else kv_ledger(sm, s.kv_cache_dtype, s.tp, mamba_ssm_cache_dtype=s.mamba_ssm_cache_dtype)
        layout = vllm_layout(sm, skv, B, **kw, group_counts=whole_counts(model, kv, B, s.pp, ver, unify, align))
        layout = replace(layout, global_layout=whole) if whole is not None and whole.groups else layout
        items = _deductions(sm, gpu, s, ver, mnbt, seqs, st, checkpoint)
        given = s.available_kv_memory_bytes
        avail = given if given is not None else int(requested - sum(i.bytes for i in items))
        if not layout.groups:  # no KV cache group: no pool; KVCacheConfig(num_blocks=1) keeps only the null block
            out.append(_Stage(st, sm, layout, items, 0, 1, skv))
            continue
        out.append(_Stage(st, sm, layout, items, avail, floor_div(avail, layout.bytes_per_block), skv))
    return out


def _stage_summary(b: _Stage, binds: bool) -> dict:
    d = {"rank": b.stage.rank, "layers": [b.stage.start_layer, b.stage.end_layer - 1], "num_layers": b.stage.num_layers,
         "is_first": b.stage.is_first, "is_last": b.stage.is_last, "available_kv_bytes": b.available,
         "bytes_per_block": b.layout.bytes_per_block, "num_gpu_blocks": b.blocks, "binds": binds}
    d.update({i.name.split(" (")[0].replace(" ", "_").replace("-", "_") + "_bytes": i.bytes for i in b.items})
    return d


@dataclass(frozen=True)
class _Budget:
    """What the pool is sized from: max_model_len L and the batch limits and block size (tokens, sequences), the device
    total with its low/high and the bytes gpu_memory_utilization requests (B), the Mamba cache rule (or None)."""

    L: int
    totals: tuple[int, int, int]
    mnbt: int
    seqs: int
    block_size: int
    dsv4: bool
    unify: bool
    util: float
    requested: int
    mamba: R.MambaCacheRule | None
    v2_runner: bool


def vllm_plan(model: ModelSpec, gpu: GpuSpec, s: PlanSettings, kv: KVLedger,
              checkpoint: ModelSpec | None = None) -> VllmResult:
    """Plan the KV pool as this vLLM version would on each of ``s.tp × s.pp`` GPUs (per GPU of the binding stage).

    Raises:
        InputError: an impossible combination (see resolve_max_model_len, block size 0, PP above the layer count).
    """
    ver = R.parse_version(s.engine_version or R.LATEST)
    notes: list[str] = []
    if ver > R.parse_version(R.LATEST):
        notes.append(N.vllm_newer_than_read(".".join(map(str, ver)), R.LATEST))
    notes += [n for n in [unknown_release_note(ver), prerelease_note(s.engine_version)] if n]
    if s.pp > model.num_layers:
        raise InputError(N.pp_above_layers(s.pp, model.name, model.num_layers))
    b = _budget(model, gpu, s, ver, checkpoint or model, notes)
    stages = _stage_budgets(model, gpu, s, kv, ver, b.mnbt, b.seqs, b.block_size, b.unify, b.requested,
                            checkpoint or model, b.mamba)
    check_online_fp8_load(checkpoint or model, gpu, s, ver, b.totals[0],  # exit 3 where the 16-bit load cannot fit
                          ((st.stage, sum(i.bytes for i in st.items if i.name == "non-torch memory")) for st in stages))
    bind = min(stages, key=lambda st: (st.blocks, -st.stage.rank))
    if bind.layout.block_size != b.block_size:
        notes[-2] += N.hybrid_block_size(bind.layout.block_size)
    return _pool(model, gpu, s, ver, b, stages, bind, notes)


def _budget(model: ModelSpec, gpu: GpuSpec, s: PlanSettings, ver, checkpoint: ModelSpec, notes: list[str]) -> _Budget:
    """The inputs of every stage's budget, by this version's defaults where ``s`` leaves them; appends their notes."""
    L, lsrc = resolve_max_model_len(model, s)
    notes += long_len_notes(model, s, L, lsrc)  # VLLM_ALLOW_LONG_MAX_MODEL_LEN=1: said, as vLLM warns
    sliding = any(getattr(layer, "window_tokens", 0) for layer in model.layers)
    totals = wddm_total(gpu, s.wddm)  # under --wddm the whole board CUDA reports there
    d_mnbt, d_seqs, why = R.default_batch_limits(ver, totals[0], gpu.name, L, sliding)
    d_seqs, lowered = default_max_num_seqs(ver, d_seqs, s.max_num_batched_tokens)  # ≥0.10.1: min(seqs, given tokens)
    mnbt, seqs = s.max_num_batched_tokens or d_mnbt, s.max_num_seqs or d_seqs
    if s.max_num_batched_tokens is None or s.max_num_seqs is None:
        notes.append(why + (lowered if s.max_num_seqs is None else ""))
    dsv4 = has_compressed_mla(model.layers)
    B, bsrc = vllm_block_size(model, s, ver, gpu.arch, dsv4, gpu.capability)
    notes.append(N.block_size_from(B, bsrc))
    sparse = sparse_mla_choice(model, ver, gpu.arch, s.kv_cache_dtype, s.tp)
    if sparse is not None:
        notes.append(sparse.note())
    unify = s.disable_hybrid_kv_cache_manager or R.era(ver) in ("v0", "v1-0.8")
    if s.gpu_memory_utilization:
        util, usrc = s.gpu_memory_utilization, "given"
    else:
        util, usrc = R.default_gpu_memory_utilization(ver)
    notes.append(N.gpu_memory_utilization_from(util, usrc))
    notes += [n for n in [deprecated_method_note(checkpoint.quant, ver), mxfp4_note(checkpoint, gpu.exact_arch, ver,
                                                                                   s.mxfp4_backend)] if n]
    if s.distributed_executor_backend:
        notes.append(executor_note(ver, s.distributed_executor_backend, s.pp))
    runner = _runner(checkpoint, gpu, s, ver)
    if ver >= (0, 22, 0) or s.model_runner != "auto":
        notes.append(runner_note(runner, ver))
    mamba = mamba_rule(model, s, ver, gpu.arch)
    notes += [mamba.source] if mamba is not None else []
    return _Budget(L, totals, mnbt, seqs, B, dsv4, unify, util, math.ceil(totals[0] * util), mamba, runner.v2)


def _pool(model: ModelSpec, gpu: GpuSpec, s: PlanSettings, ver, b: _Budget, stages: list[_Stage], bind: _Stage,
          notes: list[str]) -> VllmResult:
    """The pool of the binding stage ``bind``: its block count, usable blocks, tokens, printed lines and ranges."""
    layout, items, L = bind.layout, bind.items, b.L
    no_groups = not layout.groups  # the binding GPU keeps no KV cache group
    kv_free = all(layer is None for layer in model.layers)  # ... because the whole model keeps none of its own
    n = 1 if no_groups else s.num_gpu_blocks_override or bind.blocks
    v0 = R.era(ver) == "v0"
    F, fsrc = sliding_inflight_tokens(ver, b.mnbt, s.pp, b.v2_runner)
    L = auto_max_model_len(s, ver, layout, (n, max(0, bind.blocks)), F, L, notes)  # --max-model-len auto: vLLM's fit
    notes += _pool_notes(s, ver, bind, n, b.seqs, kv_free, (F, fsrc))
    Rl = layout.blocks_per_request(L, F)  # every group, as the printed concurrency (the check's: advice_len.check_need)
    if b.dsv4:
        notes.append(dsv4_reservation_note(layout, L, F))
    cpu_blocks = (4 * GiB) // layout.bytes_per_block if v0 and not no_groups else 0
    lines = R.printed_capacity_lines(ver, n, layout.block_size, len(layout.groups), L, Rl,
                                     cpu_blocks) if n > 0 and not no_groups else []
    summaries = tuple(_stage_summary(st, st is bind) for st in stages) if s.pp > 1 else ()
    total, total_lo, total_hi = b.totals
    rng = {} if no_groups else kv_ranges(
        total_lo, total_hi, b.util, items, layout.bytes_per_block,
        given_available=s.available_kv_memory_bytes, fixed_blocks=s.num_gpu_blocks_override,
        num_groups=len(layout.groups), block_size=layout.block_size, blocks_per_request=Rl)
    if no_groups:
        pool_tokens = 0
    elif b.dsv4 and Rl:
        pool_tokens = int(n / Rl * L)
    else:
        pool_tokens = (n // len(layout.groups)) * layout.block_size
    if s.wddm:
        startup = vllm_startup_check(ver, gpu, total, b.util, b.requested, s.tp, s.pp)
    else:  # the GPU to itself: refused (exit 3) where every end of the range asks more than is free
        startup = vllm_startup_alone(ver, gpu, total, b.util, b.requested, s.tp, s.pp)
        require_vllm_starts(startup)
    usable = 0 if no_groups else n if v0 else max(0, n - 1)
    ignored = s.num_gpu_blocks_override and not no_groups and check_ignores_override(ver)
    mem_check = max(0, bind.blocks) if ignored else None  # the start-up check's pool: the profiled memory's
    mem = MemoryPlan("vllm", ".".join(map(str, ver)), total, "gpu_memory_utilization", b.util, b.requested,
                     tuple(items), bind.available, s.available_kv_memory_bytes is not None, layout.block_size,
                     layout.bytes_per_block, n, usable, pool_tokens, tuple(lines), L, b.mnbt, b.seqs,
                     tuple(notes) + layout.notes, f"× gpu_memory_utilization {b.util} (ceil)", summaries, kv_free, rng,
                     startup, check_num_gpu_blocks=mem_check)
    return VllmResult(mem, layout, F, ver, bind.kv if s.pp > 1 else None)


def _pool_notes(s: PlanSettings, ver, bind: _Stage, n: int, seqs: int, kv_free: bool,
                inflight: tuple[int, str]) -> list[str]:
    """The notes on the pool that follow the budget: how the binding stage, block count and null block were set."""
    layout, notes = bind.layout, []
    given, no_groups = s.available_kv_memory_bytes is not None, not bind.layout.groups
    if ver > (0, 20, 0) and not given:
        notes.append(N.PROFILE_TERMS_FROM_0_19)
    if s.pp > 1:
        notes.append(N.pp_binding_stage(s.pp, bind.stage.rank))
    if s.num_gpu_blocks_override and not no_groups:
        notes.append(N.blocks_overridden(n))
    elif given and layout.groups:
        lo, hi = printed_gib_block_range(bind.available, layout.bytes_per_block)
        notes.append(N.printed_gib_range(bind.available / GiB, lo, hi))
    if no_groups and not kv_free:
        notes.append(N.stage_without_kv_group(bind.stage.rank))
    elif kv_free:
        notes.append(N.model_without_kv(seqs))
    elif R.era(ver) != "v0":
        notes.append(N.NULL_BLOCK)
    if any(g.kind in ("sliding_window", "chunked_local") for g in layout.groups):
        notes.append(N.sliding_inflight(*inflight))
    return notes
