"""vLLM's KV budget and block pool for one GPU, version by version (docs/engine-model.md §1, §1.12).

available = ceil(total × gpu_memory_utilization) − weights − activation peak − non-torch
            − CUDA-graph estimate (0.20+)                        [gpu_worker.py::determine_available_memory]
  each term per GPU of each pipeline stage, by version (vllm_profile.py); with PP the stage with the
  fewest blocks binds (the engine keeps the minimum block count over workers)
num_gpu_blocks = floor(available / bytes_per_block)               [kv_cache_planning.py::get_kv_cache_config_from_groups]
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from kvledger.accounting import vllm_profile as P
from kvledger.accounting import vllm_rules as R
from kvledger.accounting.kvcache import KVLedger, kv_ledger
from kvledger.accounting.kvlayout import KVLayout, vllm_layout
from kvledger.accounting.kvlayout_packed import DSV4_BLOCK_SIZE
from kvledger.accounting.memory import LineItem, MemoryPlan, floor_div
from kvledger.accounting.overheads import cudagraph_capture_sizes
from kvledger.accounting.settings import PlanSettings
from kvledger.accounting.vllm_profile import PPStage
from kvledger.catalog.compressed_mla import has_compressed_mla
from kvledger.catalog.gpus import GpuSpec
from kvledger.catalog.layers import MLAAttention, StateLayer
from kvledger.catalog.loading import SERVED_DTYPE_BYTES, loaded_weights
from kvledger.catalog.modelspec import ModelSpec
from kvledger.errors import InputError
from kvledger.units import GiB

__all__ = ["VllmResult", "vllm_plan", "served_model", "resolve_max_model_len", "printed_gib_block_range", "estimate_max_model_len"]


@dataclass(frozen=True)
class VllmResult:
    """The vLLM plan plus the layout and the sliding-window in-flight term used for block demand."""

    memory: MemoryPlan
    layout: KVLayout
    inflight_tokens: int
    version: tuple[int, int, int]
    stage_kv: KVLedger | None = None
    """With PP, the binding stage's KV ledger (its layers only, per GPU); None without PP."""


def resolve_max_model_len(model: ModelSpec, s: PlanSettings) -> tuple[int, str]:
    """max_model_len as vLLM resolves it: the user's, else the config-derived length.

    Raises:
        InputError: a user value above the derived maximum (vLLM refuses it unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1).
    """
    derived = model.derived_max_model_len
    if s.max_model_len is None:
        return derived, f"derived from the config (max_position_embeddings {model.max_position_embeddings:,}; YaRN rule)"
    if s.max_model_len > derived:
        raise InputError(f"--max-model-len {s.max_model_len:,} exceeds the {derived:,} tokens {model.name} supports "
                         "(vLLM refuses this unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1)")
    return s.max_model_len, "given"


def served_model(model: ModelSpec, dtype: str) -> ModelSpec:
    """The model as served under vLLM's ``--dtype`` (activations, logits and "auto" KV in that dtype)."""
    if dtype in ("auto", "", None):
        return model
    name = {"half": "float16", "float": "float32"}.get(dtype, dtype)
    db = SERVED_DTYPE_BYTES[dtype]
    return model if (name, db) == (model.dtype, model.dtype_bytes) else replace(model, dtype=name, dtype_bytes=db)


def _deductions(model: ModelSpec, gpu: GpuSpec, s: PlanSettings, ver, mnbt: int, seqs: int, stage: PPStage,
                checkpoint: ModelSpec) -> list[LineItem]:
    vtxt = ".".join(map(str, ver))
    if s.weights_bytes is not None:
        items = [LineItem("weights", s.weights_bytes, "given (your log's 'Model loading took')")]
    else:
        lw = loaded_weights(checkpoint, tp=s.tp, pp=stage.pp, pp_rank=stage.rank, dtype=None if s.dtype == "auto" else s.dtype,
                            quantization=s.quantization, gpu_arch=gpu.arch, engine_version=ver)
        items = [LineItem("weights", lw.bytes, f"computed as vLLM allocates them: {lw.how}")]
    if s.activation_peak_bytes is not None:
        items.append(LineItem("activation peak", s.activation_peak_bytes, "given (your log's torch peak increase)"))
    else:
        peak, src = P.activation_peak(model, ver, mnbt, seqs, s.tp, stage, P.sm_count(gpu.gpu_id, gpu.arch))
        items.append(LineItem("activation peak", peak, f"model, vLLM {vtxt} profile run: {src}"))
    if s.non_torch_bytes is not None:
        items.append(LineItem("non-torch memory", s.non_torch_bytes, "given"))
    else:
        nt, src = P.non_torch(ver, s.tp, stage.pp)
        items.append(LineItem("non-torch memory", nt, src))
    if R.subtracts_cudagraphs(ver):
        if s.cudagraph_bytes is not None:
            items.append(LineItem("CUDA graphs (estimate)", s.cudagraph_bytes, "given (your log's 'Estimated CUDA graph memory')"))
        else:
            cg, src = P.cudagraph_estimate(len(cudagraph_capture_sizes(seqs, mnbt)))
            items.append(LineItem("CUDA graphs (estimate)", cg, src + "; subtracted since vLLM 0.20 (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS defaults to 1 in envs.py)"))
    else:
        items.append(LineItem("CUDA graphs", 0, f"not subtracted by vLLM {vtxt} (captured after the KV pool is sized; 0.20+ subtracts an estimate)"))
    return items


@dataclass(frozen=True)
class _Stage:
    """One pipeline stage's budget (the whole model when pp = 1)."""

    stage: PPStage
    model: ModelSpec
    layout: KVLayout
    items: list[LineItem]
    available: int
    blocks: int
    kv: KVLedger


def _stage_budgets(model: ModelSpec, gpu: GpuSpec, s: PlanSettings, kv: KVLedger, ver, mnbt: int, seqs: int, B: int,
                   unify: bool, requested: int, checkpoint: ModelSpec, mamba: R.MambaCacheRule | None) -> list[_Stage]:
    out = []
    for st in P.pp_stages(model.num_layers, s.pp):
        sm = P.stage_model(model, st)
        skv = kv if s.pp == 1 else kv_ledger(sm, s.kv_cache_dtype, s.tp, mamba_ssm_cache_dtype=s.mamba_ssm_cache_dtype)
        layout = vllm_layout(sm, skv, B, unify_hybrid=unify,
                             state_pages_per_request=mamba.state_pages_per_request if mamba else 1,
                             checkpoint_alignment_tokens=mamba.checkpoint_alignment_tokens if mamba else None,
                             state_page_per_block=mamba.page_per_block if mamba else False)
        items = _deductions(sm, gpu, s, ver, mnbt, seqs, st, checkpoint)
        avail = s.available_kv_memory_bytes if s.available_kv_memory_bytes is not None else int(requested - sum(i.bytes for i in items))
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


def vllm_plan(model: ModelSpec, gpu: GpuSpec, s: PlanSettings, kv: KVLedger, checkpoint: ModelSpec | None = None) -> VllmResult:
    """Plan the KV pool as this vLLM version would on each of ``s.tp × s.pp`` GPUs (per GPU of the binding stage).

    Raises:
        InputError: an impossible combination (see resolve_max_model_len, block size 0, PP above the layer count).
    """
    ver = R.parse_version(s.engine_version or R.LATEST)
    vtxt = ".".join(map(str, ver))
    notes: list[str] = []
    if ver > R.parse_version(R.LATEST):
        notes.append(f"vLLM {vtxt} is newer than the newest release whose code was read ({R.LATEST}): its rules are applied")
    if s.pp > model.num_layers:
        raise InputError(f"--pp {s.pp} is more pipeline stages than {model.name} has layers ({model.num_layers})")
    L, _ = resolve_max_model_len(model, s)
    d_mnbt, d_seqs, why = R.default_batch_limits(ver, gpu.memory_bytes, gpu.name, L)
    mnbt, seqs = s.max_num_batched_tokens or d_mnbt, s.max_num_seqs or d_seqs
    if s.max_num_batched_tokens is None or s.max_num_seqs is None:
        notes.append(why)
    is_mla = any(isinstance(l, MLAAttention) for l in model.layers)
    dsv4 = has_compressed_mla(model.layers)
    if dsv4:
        B, bsrc = _dsv4_block_size(ver, s.block_size)
        if s.disable_hybrid_kv_cache_manager:
            raise InputError("--disable-hybrid-kv-cache-manager is not modelled for DeepSeek-V4: its caches (blocks of "
                             "256, 64, 8 and 4 tokens) are planned in vLLM 0.33's packed hybrid layout only")
    else:
        B, bsrc = (s.block_size, "given") if s.block_size else R.default_block_size(ver, is_mla, gpu.arch)
    notes.append(f"block_size {B}: {bsrc}")
    unify = s.disable_hybrid_kv_cache_manager or R.era(ver) in ("v0", "v1-0.8")
    util, usrc = (s.gpu_memory_utilization, "given") if s.gpu_memory_utilization else R.default_gpu_memory_utilization(ver)
    notes.append(f"gpu_memory_utilization {util}: {usrc}")
    requested = math.ceil(gpu.memory_bytes * util)
    mamba = _mamba_rule(model, s, ver, gpu.arch)
    if mamba is not None:
        notes.append(mamba.source)
    stages = _stage_budgets(model, gpu, s, kv, ver, mnbt, seqs, B, unify, requested, checkpoint or model, mamba)
    bind = min(stages, key=lambda b: (b.blocks, -b.stage.rank))
    layout, items, available = bind.layout, bind.items, bind.available
    if layout.block_size != B:
        notes[-2] += f"; the hybrid layout then sets the attention block to {layout.block_size} tokens (below)"
    if ver > (0, 20, 0) and s.available_kv_memory_bytes is None:
        notes.append("the profile terms are those measured on vLLM 0.19; 0.33 charges non-KV memory as total consumed "
                     "(weights, persistent buffers and non-torch growth since start-up) + the transient peak, and "
                     "buffers kept between weight loading and the profile are not modelled (no such start-up log in the data)")
    if s.pp > 1:
        notes.append(f"pipeline parallel {s.pp}: stage {bind.stage.rank} binds (fewest blocks; vLLM keeps the smallest "
                     "block count over workers); the ledger shows that stage's GPU, every stage is under 'stages'")
    given = s.available_kv_memory_bytes is not None
    no_groups = not layout.groups  # the binding GPU keeps no KV cache group
    kv_free = all(l is None for l in model.layers)  # ... because the whole model keeps none of its own
    n = 1 if no_groups else s.num_gpu_blocks_override or bind.blocks
    if s.num_gpu_blocks_override and not no_groups:
        notes.append(f"num_gpu_blocks_override = {n:,} replaces the computed block count")
    elif given and layout.groups:
        lo, hi = printed_gib_block_range(available, layout.bytes_per_block)
        notes.append(f"vLLM prints available memory to 2 decimals: any value printing as {available / GiB:.2f} GiB gives {lo:,}–{hi:,} blocks; "
                     "pass bytes for an exact count")
    v0 = R.era(ver) == "v0"
    usable = 0 if no_groups else n if v0 else max(0, n - 1)
    if no_groups and not kv_free:
        notes.append(f"pipeline stage {bind.stage.rank}'s layers all read other layers' K/V: that worker has no KV cache "
                     "group and vLLM gives it 1 block (num_blocks = 1 without groups), then keeps the smallest block count "
                     "over workers (kv_cache_planning.get_kv_cache_configs): no usable block; choose a --pp that leaves "
                     "every stage a layer with its own cache")
    elif kv_free:
        notes.append(f"no KV cache of its own: vLLM skips the memory profile, gives the KV cache 0 bytes and keeps one null "
                     f"block (v1/engine/core.py _initialize_kv_caches, kv_cache_utils.get_kv_cache_config_from_groups); "
                     f"it prints no KV cache size or maximum concurrency, and only max_num_seqs = {seqs:,} limits the "
                     "requests running at once")
    elif not v0:
        notes.append("block 0 is the null block (block_pool.py): usable blocks = num_gpu_blocks − 1")
    F, fsrc = R.sliding_inflight_tokens(ver, mnbt)
    if any(g.kind in ("sliding_window", "chunked_local") for g in layout.groups):
        notes.append(f"sliding-window block demand uses F = {F:,} tokens: {fsrc}")
    Rl = layout.blocks_per_request(L, F)
    if dsv4:
        notes.append(_dsv4_reservation(layout, L, F))
    cpu_blocks = (4 * GiB) // layout.bytes_per_block if v0 and not no_groups else 0
    lines = R.printed_capacity_lines(ver, n, layout.block_size, len(layout.groups), L, Rl, cpu_blocks) if n > 0 and not no_groups else []
    summaries = tuple(_stage_summary(b, b is bind) for b in stages) if s.pp > 1 else ()
    mem = MemoryPlan("vllm", vtxt, gpu.memory_bytes, "gpu_memory_utilization", util, requested, tuple(items), available, given,
                     layout.block_size, layout.bytes_per_block, n, usable, 0 if no_groups else int(n / Rl * L) if dsv4 and Rl
                     else (n // len(layout.groups)) * layout.block_size,
                     tuple(lines), L, mnbt, seqs, tuple(notes) + layout.notes,
                     f"× gpu_memory_utilization {util} (ceil)", summaries, kv_free)
    return VllmResult(mem, layout, F, ver, bind.kv if s.pp > 1 else None)


def _dsv4_block_size(ver, given: int | None) -> tuple[int, str]:
    """DeepSeek-V4's block size: served from vLLM 0.20, its sparse MLA backend takes blocks of 256 tokens only.

    Raises:
        InputError: a version before 0.20 or another ``--block-size``.
    """
    if ver < (0, 20, 0):
        raise InputError(f"vLLM {'.'.join(map(str, ver))} cannot serve DeepSeek-V4: DeepseekV4ForCausalLM is in vLLM's "
                         "model registry from 0.20 (0.19's has none); pass --engine-version 0.20 or later")
    if given and given != DSV4_BLOCK_SIZE:
        raise InputError(f"--block-size {given}: DeepSeek-V4's sparse MLA backend supports blocks of {DSV4_BLOCK_SIZE} "
                         "tokens only (vLLM 0.33 models/deepseek_v4/sparse_mla.py)")
    src = (f"DeepSeek-V4's sparse MLA backend supports only {DSV4_BLOCK_SIZE}-token blocks (vLLM 0.33 "
           "models/deepseek_v4/sparse_mla.py)")
    if ver < (0, 33, 0):
        src += f"; DeepSeek-V4's cache layout was read in 0.33 and is applied to {'.'.join(map(str, ver))}"
    return DSV4_BLOCK_SIZE, src


def _dsv4_reservation(layout: KVLayout, L: int, F: int) -> str:
    """Why the engine's per-request reservation of a DeepSeek-V4 model is far above the bytes a request holds."""
    parts = ", ".join(f"{g.blocks_per_request(L, F):,} for {'compressed entries' if g.kind == 'mla' else f'a window of {g.window_tokens} tokens'} "
                      f"in {g.block_size}-token blocks" for g in layout.groups)
    return (f"DeepSeek-V4 reservation per request at {L:,} tokens ({F:,} in flight): {parts} — every block id a whole "
            f"{layout.bytes_per_block:,}-B slab, so the small-block windows (compressor states) set the engine's maximum "
            "concurrency, far below what the bytes a request holds (the KV ledger) would allow "
            "(kv_cache_utils.get_max_concurrency_for_kv_cache_config)")


def _mamba_rule(model: ModelSpec, s: PlanSettings, ver, arch: str) -> R.MambaCacheRule | None:
    """The Mamba cache rule for a model with state layers (whole model, as vLLM decides it once), else None."""
    state = [l for l in model.layers if isinstance(l, StateLayer)]
    if not state:
        return None
    has_attention = any(l is not None and not isinstance(l, StateLayer) for l in model.layers)
    return R.mamba_cache_rule(ver, s.enable_prefix_caching, has_attention, {l.mixer for l in state}, arch,
                              architectures=model.architectures, mamba_chunk_tokens=model.mamba_chunk_tokens)


def printed_gib_block_range(available_bytes: int, bytes_per_block: int) -> tuple[int, int]:
    """Block counts consistent with an available-memory figure printed as GiB to 2 decimals (±0.005 GiB), (min, max)."""
    shown = round(available_bytes / GiB, 2)
    lo = max(0, math.ceil((shown - 0.005) * GiB))
    hi = math.ceil((shown + 0.005) * GiB) - 1
    return lo // bytes_per_block, hi // bytes_per_block


def estimate_max_model_len(layout: KVLayout, usable_blocks: int, inflight_tokens: int, upper: int) -> int:
    """Largest L ≤ upper whose per-request demand fits the usable blocks (vLLM ``_estimate_max_model_len_from_groups``), tokens."""
    lo, hi = 0, upper
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if layout.blocks_per_request(mid, inflight_tokens) <= usable_blocks:
            lo = mid
        else:
            hi = mid - 1
    return lo

