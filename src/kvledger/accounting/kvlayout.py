"""vLLM's paged KV layout: pages per layer, KV cache groups sharing one block pool, bytes per block, blocks per request.

Mirrors ``vllm/v1/core/kv_cache_planning.py`` (``get_kv_cache_groups``,
``_get_kv_cache_groups_uniform_page_size``, ``unify_kv_cache_spec_page_size``,
``_get_kv_cache_bytes_per_block``) and each spec's ``max_memory_usage_bytes`` in
``vllm/v1/kv_cache_interface.py`` (docs/engine-model.md §1.4–§1.6).
"""

from __future__ import annotations

import math

from kvledger.accounting.kvcache import KVLedger
from kvledger.accounting.kvlayout_packed import dsv4_layout
from kvledger.accounting.kvlayout_types import AllocGroup, KVLayout
from kvledger.catalog.compressed_mla import has_compressed_mla
from kvledger.catalog.layers import StateLayer
from kvledger.catalog.modelspec import ModelSpec
from kvledger.units import cdiv

__all__ = ["AllocGroup", "KVLayout", "vllm_layout", "estimate_max_model_len", "group_size_ratio", "whole_counts",
           "GLOBAL_GROUPS_FROM"]


def group_size_ratio(ver: tuple[int, int, int] | None) -> float | None:
    """The layer-count ratio below which vLLM ``ver`` makes the largest attention type's layer count the group size
    (padding the others up to it) instead of the smallest's, read in ``v1/core/kv_cache_utils.py :
    _get_kv_cache_groups_uniform_page_size``: None up to 0.11 (0.11.0 and 0.11.2: ``group_size = min(...)`` always),
    1.25 in 0.12.0–0.17.0 (``max_num_layers < min_num_layers * 1.25``), 1.5 from 0.18.0; None for no version: the
    newest rule, 1.5."""
    if ver is None or ver >= (0, 18, 0):
        return 1.5
    return 1.25 if ver >= (0, 12, 0) else None


GLOBAL_GROUPS_FROM = (0, 11, 0)
"""First release that groups the whole model's layers, whatever the pipeline stage (``get_kv_cache_configs`` merges
every worker's specs before ``get_kv_cache_groups``; read in 0.11.0, 0.12.0, 0.14.0, 0.18.0); 0.10.1 and 0.10.2 group
each worker's own (``get_kv_cache_config`` per worker)."""


def whole_counts(model: ModelSpec, kv: KVLedger, block_size: int, pp: int, ver: tuple[int, int, int] | None,
                 unify_hybrid: bool = False, checkpoint_alignment_tokens: int | None = None) -> tuple[int, ...] | None:
    """Layers per KV cache spec of the whole ``model`` (the counts ``vllm_layout``'s group size reads), count each,
    where a pipeline stage's layout reads them (pp > 1 from ``GLOBAL_GROUPS_FROM``); None otherwise."""
    if pp == 1 or ver is None or ver < GLOBAL_GROUPS_FROM:
        return None
    rows = _layer_pages(model, kv, block_size, unify_hybrid, checkpoint_alignment_tokens)[0]
    return tuple(rows.count(r) for r in dict.fromkeys(rows))


def _layer_pages(model: ModelSpec, kv: KVLedger, block_size: int, unify_hybrid: bool,
                 checkpoint_alignment_tokens: int | None = None) -> tuple[list[tuple], int, list[str]]:
    """Per layer: (kind, window, page_bytes, is_state); returns the attention block size used.

    ``checkpoint_alignment_tokens``: in vLLM 0.33's "align" Mamba mode the hybrid block size is a multiple of
    lcm(block_size, checkpoint grid) (``vllm/platforms/interface.py : Platform._align_hybrid_block_size``); in
    0.19–0.27's "all" mode a multiple of the Mamba chunk (``HybridAttentionMambaModelConfig``).
    """
    notes: list[str] = []
    per_tok = {g.spec: g.bytes_per_token_per_layer for g in kv.groups}
    state_page = {g.spec: g.state_bytes_per_seq / g.num_layers for g in kv.groups if isinstance(g.spec, StateLayer)}
    B = block_size
    if state_page and all(isinstance(s, StateLayer) for s in per_tok):
        # a pure state-space model (Mamba): each page is one layer's state (vLLM MambaSpec.page_size_bytes)
        page = int(max(state_page.values()))
        return [("state", 0, page) for layer in model.layers if layer is not None], B, notes
    if state_page:
        attn_tok = max(per_tok[s] for s in per_tok if not isinstance(s, StateLayer))
        need = max(state_page.values())
        grid_tokens = math.lcm(block_size, checkpoint_alignment_tokens) if checkpoint_alignment_tokens else block_size
        aligned = grid_tokens * cdiv(int(need), int(grid_tokens * attn_tok))
        if aligned > B:
            grid = (f"alignment lcm({block_size}, {checkpoint_alignment_tokens}-token Mamba chunk or checkpoint grid) "
                    f"= {grid_tokens}"
                    if grid_tokens != block_size else f"alignment {block_size} assumed")
            notes.append(f"hybrid state layers: attention block size raised to {aligned} tokens so one attention page "
                         f"({aligned} × {attn_tok:,.0f} B) holds a {need:,.0f}-B state page (kv_cache_utils "
                         f"_align_hybrid_block_size; {grid})")
            B = aligned
    rows = []
    kinds = {layer.kind for layer in model.layers if layer is not None and not isinstance(layer, StateLayer)}
    # vLLM's unify_hybrid_kv_cache_specs (kv_cache_planning._promote_local_kv_cache_specs) promotes windowed layers
    # only when full-attention and windowed layers are mixed: an all-sliding model is uniform and stays as it is
    windowed = bool(kinds & {"sliding_window", "chunked_local"})
    if unify_hybrid and windowed and not kinds & {"full", "mla"}:
        notes.append("--disable-hybrid-kv-cache-manager has no effect here: every attention layer is windowed, so the "
                     "spec is uniform and vLLM keeps it (kv_cache_planning._promote_local_kv_cache_specs)")
    unify_hybrid = unify_hybrid and windowed and bool(kinds & {"full", "mla"})
    for layer in model.layers:
        if layer is None:
            continue
        if isinstance(layer, StateLayer):
            rows.append(("state", 0, None))
            continue
        kind = layer.kind if not unify_hybrid or layer.kind == "mla" else "full"
        window = getattr(layer, "window_tokens", 0) or getattr(layer, "chunk_tokens", 0)
        rows.append((kind, window if kind != "full" else 0, int(per_tok[layer] * B)))
    if unify_hybrid and any(layer is not None and layer.kind in ("sliding_window",
                                                                 "chunked_local") for layer in model.layers):
        notes.append("hybrid KV cache manager disabled (or vLLM < 0.9): sliding/chunked layers allocated as full "
                     "attention")
    attn_page = max((p for _, _, p in rows if p is not None), default=0)
    rows = [(k, w, p if p is not None else attn_page) for k, w, p in rows]
    return rows, B, notes


def vllm_layout(model: ModelSpec, kv: KVLedger, block_size: int, *, unify_hybrid: bool = False,
                state_pages_per_request: int = 1, checkpoint_alignment_tokens: int | None = None,
                state_page_per_block: bool = False, ver: tuple[int, int, int] | None = None,
                group_counts: tuple[int, ...] | None = None) -> KVLayout:
    """Group the layers as vLLM does and size one block.

    Args:
        model, kv: the parsed model and its KV ledger (per GPU, at the chosen dtype and TP).
        block_size: tokens per block before any hybrid alignment, tokens.
        unify_hybrid: treat sliding/chunked layers as full (``--disable-hybrid-kv-cache-manager``, vLLM < 0.9).
        state_pages_per_request: pages each state group may claim per request (1 for ``mamba_cache_mode``
            "none"; ``vllm_rules.mamba_cache_rule`` for "align"), pages.
        checkpoint_alignment_tokens: the grid the hybrid block size honours (align-mode prefill checkpoints,
            "all"-mode Mamba chunk), tokens.
        state_page_per_block: "all" Mamba mode: state groups claim a page per block (``vllm_rules.MambaCacheRule``).
        ver: the vLLM release, whose ``group_size_ratio`` sets the group size (None: the newest rule).
        group_counts: the layer counts that ratio is tested on: the whole model's for a pipeline stage from
            ``GLOBAL_GROUPS_FROM`` (``whole_counts``), this model's own when None. Where the whole model takes its
            largest count each type is one group, so the stage's group size is its own largest count.
    """
    if has_compressed_mla(model.layers):  # DeepSeek-V4: vLLM 0.33's packed layout
        return dsv4_layout(model, block_size)
    rows, B, notes = _layer_pages(model, kv, block_size, unify_hybrid, checkpoint_alignment_tokens)
    # no layer keeps a cache: vLLM builds no KV cache group (kv_cache_utils.get_kv_cache_groups returns [])
    if not rows:
        return KVLayout((), 0, B, 0, ("no layer keeps a KV cache or state of its own: no KV cache group, no block pool "
                                      "(kv_cache_utils.is_kv_cache_type_attention_free)",))
    buckets: dict[tuple, int] = {}
    for r in rows:
        buckets[r] = buckets.get(r, 0) + 1
    max_page = max(p for (_, _, p) in buckets)
    bs = _block_sizes(buckets, B, max_page, notes)
    counts = sorted(buckets.values())
    # vLLM: group_size = min_num_layers, raised to max_num_layers where max < min × ratio (0.12 on; group_size_ratio)
    test, ratio = sorted(group_counts) if group_counts else counts, group_size_ratio(ver)
    one_per_type = test[-1] == test[0] or (ratio is not None and test[-1] < ratio * test[0])  # group size = largest
    group_size = counts[-1] if one_per_type else counts[0]
    groups: list[AllocGroup] = []
    padding = 0
    for (kind, window, _), n in buckets.items():
        k = cdiv(n, group_size)
        padding += k * group_size - n
        for j in range(k):
            real = min(group_size, n - j * group_size)
            groups.append(AllocGroup(kind, real, group_size, bs[(kind, window, _)], max_page, window,
                                     state_pages_per_request if kind == "state" else 1,
                                         kind == "state" and state_page_per_block))
    if padding:
        notes.append(f"{padding} padding layer slots: buckets of {dict((k[0], v) for k, v in buckets.items())} split "
                     f"into groups of {group_size}")
    attn_bs = min((g.block_size for g in groups if g.kind != "state"), default=B)
    return KVLayout(tuple(groups), group_size * max_page, attn_bs, padding, tuple(notes))


def _block_sizes(buckets: dict[tuple, int], B: int, max_page: int, notes: list[str]) -> dict[tuple, int]:
    """Each bucket's block size, tokens: an attention bucket whose page is smaller than the largest raised until the
    pages are equal (``unify_kv_cache_spec_page_size``), or left at ``B`` and padded where its page does not divide the
    largest; state buckets keep ``B``. Appends what it did to ``notes``."""
    bs: dict[tuple, int] = {}
    for key in buckets:
        kind, _, page = key
        if kind != "state" and page != max_page:
            if max_page % page:
                notes.append(f"page {page} B does not divide {max_page} B: padded (unify_kv_cache_spec_page_size)")
                bs[key] = B
            else:
                bs[key] = B * (max_page // page)
                notes.append(f"{kind} layers' block size raised to {bs[key]} tokens to equalise pages")
        else:
            bs[key] = B
    return bs


def estimate_max_model_len(layout: KVLayout, usable_blocks: int, inflight_tokens: int, upper: int) -> int:
    """Largest L ≤ upper whose per-request demand fits the usable blocks (vLLM
    ``_estimate_max_model_len_from_groups``), tokens."""
    lo, hi = 0, upper
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if layout.blocks_per_request(mid, inflight_tokens) <= usable_blocks:
            lo = mid
        else:
            hi = mid - 1
    return lo
