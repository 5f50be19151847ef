"""SGLang's token pools and TensorRT-LLM's block pools for one GPU, each engine's own split for hybrid models.

SGLang (0.5.23; older releases' defaults in sglang_rules.py): available = pre_load_free × mem_fraction_static − weights;
#tokens = floor(available / cell_size),
page size 1 (``mem_cache/kv_cache_configurator.py::_profile_available_bytes``, ``_compute_cell_size``). Sliding-window
layers get their own pool of swa_full_tokens_ratio (0.8) × the full pool's tokens
(``model_executor/pool_configurator.py::HybridSWAPoolConfigurator``); Mamba/linear-attention state gets
mamba_full_memory_ratio / (1 + ratio) (0.9 / 1.9) of the budget in whole per-request slots before the KV pool
(``kv_cache_configurator.py::_handle_max_mamba_cache``). See engine_pools.py.
TensorRT-LLM's PyTorch backend (1.0 on): kv_mem = (total − peak after the dry run) × free_gpu_memory_fraction; one
window: max_tokens = floor(kv_mem / bytes per token), blocks = max_tokens // tokens_per_block (32)
(``resource_manager.py::
KVCacheManager.calculate_max_num_blocks``); several attention windows: one pool per window, memory shared in
proportion to bytes-per-token × window, blocks = ceil(max_tokens / tokens_per_block)
(``kvCacheManager.cpp::BaseKVCacheManager::calculateMaxNumBlocks``, ``BlockManager::calculateWindowSizeToShare``).
Its TensorRT-engine executor (``--engine-version`` before 1.0): kv_mem = free memory after the engine loads ×
free_gpu_memory_fraction, blocks always ceil (C++), tokens_per_block as the engine was built (64 assumed).
"""

from __future__ import annotations

from kvledger.accounting import notes as N
from kvledger.accounting.dp_attention import attention_tp, per_rank_settings, sglang_rank_weights
from kvledger.accounting.engine_pools import recorded_sglang_pool, sglang_pools, trtllm_window_pools
from kvledger.accounting.kvcache import KVLedger
from kvledger.accounting.max_model_len import long_len_notes, resolve_max_model_len
from kvledger.accounting.memory import Deduction, MemoryPlan
from kvledger.accounting.overheads import NON_TORCH_BYTES
from kvledger.accounting.settings import PlanSettings
from kvledger.accounting.sglang_ep import sglang_ep_size
from kvledger.accounting.sglang_graphs import sglang_graph_note, sglang_resolved_defaults, sglang_scheduler_line
from kvledger.accounting.sglang_mamba import sglang_mamba_ratio
from kvledger.accounting.sglang_prefill_graphs import sglang_prefill_note
from kvledger.accounting.sglang_prefill_off import prefill_off_for_model
from kvledger.accounting.sglang_rules import (
    SGLANG_LATEST,
    SGLANG_LOAD_EXTRA_GIB,
    SGLANG_PRELOAD_GIB,
    parse_sglang_version,
    sglang_preload_bytes,
    sglang_preload_high_bytes,
    sglang_version_text,
)
from kvledger.accounting.sglang_shared_fusion import sglang_load_items
from kvledger.accounting.transferred_ranges import weights_range
from kvledger.accounting.trtllm_terms import trtllm_items, trtllm_ranges
from kvledger.accounting.trtllm_version import trtllm_before, trtllm_release
from kvledger.accounting.wddm import wddm_held_term, wddm_total
from kvledger.catalog.compressed_mla import has_compressed_mla
from kvledger.catalog.gpus import GpuSpec
from kvledger.catalog.layers import MLAAttention
from kvledger.catalog.modelspec import ModelSpec
from kvledger.catalog.quant_tp_sglang import check_sglang_quant_tp
from kvledger.errors import InputError
from kvledger.units import GiB, MiB

SGLANG_POOL_SLOT_UNTIL = (0, 4, 9)
"""First SGLang release whose request pool holds ``max_num_reqs`` (``model_runner.py :: init_memory_pool``: ``size=
max_num_reqs + 1`` in 0.4.0, 0.4.0.post1, 0.4.1, 0.4.3 and 0.4.6, ``size=max_num_reqs`` in 0.4.9; 0.4.7–0.4.8 not
read)."""

# pool splits: engine_pools.py
__all__ = ["sglang_plan", "trtllm_plan", "trtllm_blocks_round_up", "trtllm_bytes_per_token", "trtllm_runtime"]


def _is_mla(model: ModelSpec) -> bool:
    """Whether the model's attention is MLA (SGLang's ``use_mla_backend``)."""
    return any(isinstance(layer, MLAAttention) for layer in model.layers)


def _hybrid_note(kv: KVLedger, engine: str) -> list[str]:
    kinds = {g.kind for g in kv.groups}
    notes = []
    if "chunked_local" in kinds:
        notes.append("chunked-local layers are sized here as full attention (no separate pool modelled for them)")
    if "state" in kinds and engine == "trtllm":
        notes.append("TensorRT-LLM's Mamba/linear-attention state pool is not modelled; only attention KV is counted")
    return notes


def sglang_plan(model: ModelSpec, gpu: GpuSpec, s: PlanSettings, kv: KVLedger) -> MemoryPlan:
    """SGLang's KV token pool per GPU (page size 1 unless --block-size sets the page)."""
    _require_per_token_kv(model, kv, "SGLang")
    ver = parse_sglang_version(s.engine_version) if s.engine_version else SGLANG_LATEST
    check_sglang_quant_tp(model, s.tp, ver, gpu.arch, sglang_ep_size(model, s))  # quant_tp_sglang.py: SGLang's refusals
    L, lsrc = resolve_max_model_len(model, s)
    d, graphs = sglang_resolved_defaults(ver, gpu.nvidia_smi_mib or gpu.memory_bytes / MiB, s, _is_mla(model),
                                         model.name, prefill_off_for_model(ver, model, gpu, s))  # sglang_graphs.py
    s_rank, cps = per_rank_settings(s), d.chunked_prefill_size // (s.tp // attention_tp(s))  # one DP rank's limits
    mfs, msrc = (s.mem_fraction_static, "given") if s.mem_fraction_static else (d.mem_fraction_static, d.source)
    w, how = sglang_rank_weights(model, s)  # dp_attention.py: whole attention per DP rank, or 1/TP
    # a given weights figure is SGLang's own "mem usage", which already holds the load's overhead
    x_lo, x, x_hi_load = (0.0, 0.0, 0.0) if s.weights_bytes is not None else (g * GiB for g in SGLANG_LOAD_EXTRA_GIB)
    load_items = sglang_load_items(model, gpu, s, ver)  # RoPE buffer, segment tails, shared-expert and MLA copies
    w_all = w + sum(i.bytes for i in load_items)  # what "mem usage" holds besides the measured overhead
    held = sglang_preload_bytes(s.tp, gpu.nvlink_all_to_all)
    total, total_lo, total_hi = wddm_total(gpu, s.wddm)  # --wddm: the whole board, less the driver's hold below
    hold = wddm_held_term(gpu) if s.wddm else None
    h_pt, h_lo, h_hi = (hold.bytes, hold.low_bytes, hold.high_bytes) if hold else (0, 0, 0)
    pre_free = total - held - h_pt
    reserve = pre_free * (1 - mfs)
    x_hi = max(sglang_preload_high_bytes(s.tp, s.pp), held)  # the pre-load memory's upper end: KV falls by ΔX × f
    r_lo, r_hi = held - NON_TORCH_BYTES + h_pt - h_lo, x_hi - held + h_hi - h_pt
    w_lo, w_hi, w_why = (w, w, "") if s.weights_bytes is not None else weights_range(model, w, gpu.arch, "SGLang")
    items = (Deduction("weights", w, "given" if s.weights_bytes is not None else f"computed: {how}", w_lo, w_hi, w_why),
             *load_items,
             Deduction(N.SGLANG_LOAD_EXTRA, x, N.SGLANG_LOAD_EXTRA_SOURCE, x_lo, x_hi_load),
             Deduction(N.SGLANG_RESERVE, reserve, N.sglang_reserve_source(1 - mfs, total / GiB, (held + h_pt) / GiB,
                                                                         held > SGLANG_PRELOAD_GIB[False] * GiB),
                       reserve - r_lo * mfs, reserve + r_hi * mfs,
                       N.sglang_preload_range(x_hi / GiB, mfs)))
    given = s.available_kv_memory_bytes is not None
    avail = s.available_kv_memory_bytes if given else int(pre_free - reserve - w_all - x)
    page = s.block_size or 1
    pools = recorded_sglang_pool(sglang_pools(kv, avail, page), s.max_total_tokens, page)  # a run's own, if given
    rng = {} if given else _sglang_ranges(kv, page, L, [int((t - h) * mfs - w_all - dw - e) for t, h, dw, e in (
        (total_lo, x_hi + h_hi, w_hi - w, x_hi_load), (total_hi, NON_TORCH_BYTES + h_lo, w_lo - w, x_lo))])
    tokens, cell = pools.full_tokens, pools.cell_bytes
    if pools.state_bytes:
        items = items + (Deduction(N.sglang_mamba_pool(pools.state_slots), pools.state_bytes,
                                   N.SGLANG_MAMBA_POOL_SOURCE),)
    lines, mrr, mamba_note = _printed_and_requests(model, s_rank, pools, L, ver, s_rank.max_num_batched_tokens or cps)
    older = sglang_version_text(ver) if ver < SGLANG_LATEST else None
    notes = (N.sglang_settings(mfs, msrc, cps, mrr, bool(mamba_note), older, ver < SGLANG_POOL_SLOT_UNTIL,
                               s.max_num_batched_tokens is not None)
             + [sglang_graph_note(ver, graphs, mrr), sglang_prefill_note(ver, graphs.prefill)] + mamba_note
             + pools.notes + _hybrid_note(kv, "sglang") + ([N.sglang_wddm(h_pt / GiB, mfs)] if s.wddm else [])
             + ([N.SGLANG_FP8_KV] if s.kv_cache_dtype == "fp8" else []))
    notes = ([N.sglang_newer_than_read(sglang_version_text(ver), sglang_version_text(SGLANG_LATEST))]
             if ver > SGLANG_LATEST else []) + notes + long_len_notes(model, s, L, lsrc)
    src = N.sglang_requested_source(total / GiB, held / GiB, h_pt / GiB, held > SGLANG_PRELOAD_GIB[False] * GiB)
    return MemoryPlan("sglang", f"{sglang_version_text(ver)} rules", total, "mem_fraction_static", mfs,
                      int(pre_free), items, int(avail - pools.state_bytes), given, page, int(cell * page),
                      tokens // page, tokens // page, tokens, lines,
                      L, s_rank.max_num_batched_tokens or cps, mrr, tuple(notes),
                      N.SGLANG_REQUESTED_WDDM if s.wddm else N.SGLANG_REQUESTED, ranges=rng, requested_source=src,
                      cuda_graph_max_bs=graphs.max_bs if graphs.enabled else None)


def _printed_and_requests(model: ModelSpec, s: PlanSettings, pools, L: int, ver: tuple[int, ...] = SGLANG_LATEST,
                          cps: int = 0) -> tuple[tuple[str, ...], int, list[str]]:
    """(the lines SGLang prints for its pools and its scheduler's start-up line with prefill chunk ``cps``, its
    max_running_requests, the note when the Mamba pool caps it).
    Before 0.4.9 (``SGLANG_POOL_SLOT_UNTIL``) the request pool holds one more than its clamp and a given
    --max-running-requests is not cut to half the tokens (``managers/tp_worker.py``: min(#tokens // 2 or the given,
    the pool's size))."""
    tokens = pools.full_tokens
    is_mla = _is_mla(model)
    size = tokens * pools.full_cell_bytes / GiB
    line = (f"KV Cache is allocated. #tokens: {tokens}, KV size: {size:.2f} GB" if is_mla
            else f"KV Cache is allocated. #tokens: {tokens}, K size: {size / 2:.2f} GB, V size: {size / 2:.2f} GB")
    lines = ((f"Use sliding window memory pool. full_layer_tokens={tokens}, swa_layer_tokens={pools.swa_tokens}",
              ) if pools.swa_tokens
             else ()) + ((line,) if tokens else ())
    slot = 1 if ver < SGLANG_POOL_SLOT_UNTIL else 0
    mrr = min(min(max(int(tokens / L * 512), 2048), 4096) + slot, tokens // 2) if s.max_num_seqs is None else (
        s.max_num_seqs if slot else min(s.max_num_seqs, tokens // 2))
    mamba_note = []
    if pools.state_bytes:
        ratio, why = sglang_mamba_ratio(model.architectures)
        cap = pools.state_slots // ratio
        if cap <= 0:  # SGLang refuses to start: a non-fit (advice.py's verdict, exit 3), as a pool of no block is
            mamba_note = [N.sglang_no_mamba_request(pools.state_slots, ratio, why)]
        elif cap < mrr:
            mamba_note = [N.sglang_mamba_cap(cap, pools.state_slots, ratio, why)]
        mrr = min(mrr, cap)
    return lines + ((sglang_scheduler_line(tokens, cps, mrr, L),) if tokens else ()), mrr, mamba_note


def _sglang_ranges(kv: KVLedger, page: int, max_model_len: int, ends: list[int]) -> dict[str, tuple[float, float]]:
    """Low/high of available KV (less any state pool), pages, tokens and concurrency at max_model_len, each end through
    SGLang's own pool split (``sglang_pools``) from the budget at that end (pre-load memory and device total)."""
    pools = [sglang_pools(kv, a, page) for a in ends]
    per_req = -(-max_model_len // page)
    pages = [p.full_tokens // page for p in pools]
    return {"available_kv_bytes": tuple(float(a - p.state_bytes) for a, p in zip(ends, pools)),
            "num_gpu_blocks": tuple(pages), "pool_tokens": tuple(p.full_tokens for p in pools),
            "max_concurrency": tuple(n / per_req for n in pages)}


def _require_per_token_kv(model: ModelSpec, kv: KVLedger, engine: str) -> None:
    """A pure state-space model has no per-token KV: these engines' separate state pools are not modelled (clear error);
    nor are their layouts of DeepSeek-V4's compressed caches."""
    if has_compressed_mla(model.layers):
        raise InputError(f"{model.name} is a DeepSeek-V4 model: {engine}'s layout of its compressed caches (window, "
                         "compressed entries, indexer keys, compressor state) is not modelled here; plan it with "
                         "--engine vllm")
    if not kv.bytes_per_token:

        if all(layer is None for layer in model.layers):  # a draft model whose every layer reads its target's cache
            raise InputError(f"{model.name} keeps no KV cache or state of its own (every layer reads another model's "
                             f"K/V): {engine}'s rules for such a model are not modelled here; plan it with --engine "
                             f"vllm "
                             "(no KV pool, max_num_seqs the only limit), or plan the target model for the KV memory")

        raise InputError(f"{model.name} keeps no per-token KV (every layer is a state-space mixer): {engine}'s "
                         f"separate "
                         "state pool is not modelled here; plan it with --engine vllm")


def trtllm_bytes_per_token(model: ModelSpec, tp: int, elem_bytes: float) -> float:
    """``get_cache_size_per_token``: layers × 2 × (head_dim × KV heads // tp) × bytes; MLA latent not divided by TP,
    B/token."""
    total = 0.0
    for layer in model.layers:
        if layer is None or layer.kind == "state":
            continue
        if isinstance(layer, MLAAttention):
            total += (layer.kv_lora_rank + layer.qk_rope_head_dim) * elem_bytes
        else:
            total += 2 * ((layer.head_dim * layer.num_kv_heads) // tp) * elem_bytes
    return total


def trtllm_runtime(version: str | None, backend: str | None = None) -> tuple[str, str]:
    """(runtime, label) for TensorRT-LLM ``--engine-version``: the PyTorch backend from 1.0 (and by default), the
    TensorRT-engine C++ executor before (the 0.x releases serve trtllm-build engines); ``backend`` ("pytorch" or
    "tensorrt") names it where a release ships both (0.17–0.21).

    Raises:
        InputError: text that is not a version.
    """
    if version is None:  # the runtime's own name, as with a version ("tensorrt backend" named no runtime)
        return backend or "pytorch", f"{_RUNTIME_NAMES[backend or 'pytorch']} rules (newest read)"
    release = trtllm_release(version)  # the whole text one release, or refused ("1.2.1,0.21.0": trtllm_version.py)
    if backend is None:
        backend = "pytorch" if release[:2] >= (1, 0) else "tensorrt"
    return backend, f"{version} ({_RUNTIME_NAMES[backend]} rules)"


_RUNTIME_NAMES = {"pytorch": "PyTorch backend", "tensorrt": "TensorRT-engine executor"}
#: the newest TensorRT-LLM release a start-up log checks (benchmarks/data/trtllm_public_startups.csv TR01/TR02)
TRTLLM_NEWEST_CHECKED = (1, 2, 1)


def trtllm_blocks_round_up(runtime: str, version: str | None) -> bool:
    """Whether one window's block count rounds up. The TensorRT-engine executor always does (C++
    ``calculateMaxNumBlocks``); the PyTorch backend's Python ``KVCacheManager.calculate_max_num_blocks`` had
    ``math.ceil(max_tokens / tokens_per_block)`` in the 0.x copies read (NVIDIA/TensorRT-LLM#6294 at 0.20.0: max_tokens
    860,308 → 26,885 blocks of 32 = 860,320 tokens) and ``int(max_tokens // tokens_per_block)`` on main (commit
    001541b), applied from 1.0 here: the release that changed it is not pinned (1.2.1's public log,
    benchmarks/data/trtllm_public_startups.csv TR01, fits both)."""
    if runtime != "pytorch":
        return True
    return trtllm_before(version, (1, 0))


def trtllm_plan(model: ModelSpec, gpu: GpuSpec, s: PlanSettings, kv: KVLedger) -> MemoryPlan:
    """TensorRT-LLM KV pool per GPU: PyTorch backend (tokens_per_block 32, fraction 0.9 of free memory after the
    dry run) or, for a version before 1.0, the TensorRT-engine executor (blocks round up; 64 tokens per block)."""
    _require_per_token_kv(model, kv, "TensorRT-LLM")
    runtime, label = trtllm_runtime(s.engine_version, s.trtllm_backend)
    round_up = trtllm_blocks_round_up(runtime, s.engine_version)
    L, lsrc = resolve_max_model_len(model, s)
    frac = s.free_gpu_memory_fraction or 0.9
    max_num_tokens = s.max_num_batched_tokens or 8192
    items = trtllm_items(model, s, runtime, max_num_tokens, L, gpu)
    total, total_lo, total_hi = wddm_total(gpu, s.wddm)
    free_after = total - sum(i.bytes for i in items)
    # nothing free (the model does not fit): no reserve is kept, and the KV memory is the shortfall (negative)
    reserve = max(free_after, 0) * (1 - frac)
    free_ends = (total_lo - sum(i.high_bytes for i in items), total_hi - sum(i.low_bytes for i in items))
    given = s.available_kv_memory_bytes is not None
    avail = s.available_kv_memory_bytes if given else int(free_after - reserve)
    tpb = s.block_size or (32 if runtime == "pytorch" else 64)
    rng = trtllm_ranges(model, s.tp, kv.elem_bytes, L, tpb, runtime, round_up, frac, total_lo, total_hi, items,
                        s.available_kv_memory_bytes)
    items = items + (Deduction(N.trtllm_reserve(max(free_after, 0) / GiB, runtime), reserve,
                               N.trtllm_reserve_source(runtime), *(max(f, 0) * (1 - frac) for f in free_ends),
                               N.TRTLLM_RESERVE_RANGE),)
    windows = trtllm_window_pools(model, s.tp, kv.elem_bytes, L, avail, tpb, runtime, round_up)
    per_tok = sum(w.bytes_per_token for w in windows)
    full = windows[-1]  # one window, or the full-attention (largest-window) pool of several
    max_tokens, blocks = full.max_tokens, full.blocks
    tpb_src = N.trtllm_tokens_per_block_source(bool(s.block_size), runtime)
    notes = (N.trtllm_settings(frac, bool(s.free_gpu_memory_fraction), runtime, tpb, tpb_src, per_tok)
             + [N.trtllm_block_rule(runtime, windows, round_up)] + _hybrid_note(kv, "trtllm"))
    notes += long_len_notes(model, s, L, lsrc)
    if s.engine_version and trtllm_release(s.engine_version) > TRTLLM_NEWEST_CHECKED:
        notes.insert(0, N.trtllm_newer_than_checked(s.engine_version, ".".join(map(str, TRTLLM_NEWEST_CHECKED)),
                                                    _RUNTIME_NAMES[runtime]))
    return MemoryPlan("trtllm", label, total, "free_gpu_memory_fraction", frac, total, items,
                      avail, given, tpb, int(windows[-1].bytes_per_token * tpb), blocks, blocks, max_tokens,
                          (f"max_tokens={max_tokens}, blocks={blocks}",),
                      L, max_num_tokens, s.max_num_seqs or 2048, tuple(notes),
                      N.TRTLLM_REQUESTED if runtime == "pytorch" else N.TRTLLM_REQUESTED_ENGINE, ranges=rng)
