"""vLLM 0.33's packed KV layout for layers of mixed page sizes, as it lays out DeepSeek-V4.

Mirrors ``vllm/v1/core/kv_cache_planning.py`` of vLLM 0.33: ``_get_packed_kv_cache_groups`` (buckets of one
cache type, split into groups by repeats of the layer pattern chosen by ``_approximate_gcd``) and
``_get_kv_cache_bytes_per_block`` (block-outermost: one block id owns a slab as wide as the widest group's pages).
The caches each DeepSeek-V4 layer registers come from ``catalog/compressed_mla.py``; every page is padded to
576 B (the fp8_ds_mla layout's alignment, ``_apply_alignment_padding``).
"""

from __future__ import annotations

from kvledger.accounting.kvlayout_types import AllocGroup, KVLayout
from kvledger.catalog.compressed_mla import FP8_DS_MLA_ENTRY_BYTES, CompressedMLAAttention
from kvledger.catalog.modelspec import ModelSpec
from kvledger.units import cdiv

__all__ = ["dsv4_layout", "approximate_gcd", "DSV4_BLOCK_SIZE", "DSV4_SWA_BLOCK_SIZE"]

DSV4_BLOCK_SIZE = 256
"""The only kernel block size DeepSeek-V4's sparse MLA backend supports (vLLM 0.33
``models/deepseek_v4/sparse_mla.py``)."""
DSV4_SWA_BLOCK_SIZE = 64
"""``DeepseekV4SWACache``'s block size (vLLM 0.33 ``v1/attention/backends/mla/sparse_swa.py``), tokens."""
_ALIGN = 576
_COMPRESSOR_BLOCK = {4: 4, 128: 8}
"""Compressor state blocks: 4 tokens at ratio 4, 8 at ratio 128 (``CompressorStateCache.__init__``)."""


def _pad(page: int) -> int:
    return cdiv(page, _ALIGN) * _ALIGN


def _layer_caches(layer: CompressedMLAAttention, block_size: int) -> list[tuple[tuple, int]]:
    """The caches one layer registers, in vLLM's order: (bucket key, padded page bytes).

    Bucket keys: ("full", block) for compressed entries and indexer keys (MLAAttentionSpec: one type whatever the
    ratio); ("sliding_window", window, block) for the raw window and the compressor states (SlidingWindowMLASpec:
    one type per window and block size, ``UniformTypeKVCacheSpecs.is_uniform_type``)."""
    r = layer.compress_ratio
    out = []
    if r > 1:
        out.append((("full", block_size), _pad(block_size // r * FP8_DS_MLA_ENTRY_BYTES)))
    out.append((("sliding_window", layer.swa_window_tokens, DSV4_SWA_BLOCK_SIZE),
                _pad(DSV4_SWA_BLOCK_SIZE * FP8_DS_MLA_ENTRY_BYTES)))
    if r > 1:
        b = _COMPRESSOR_BLOCK[r]
        out.append((("sliding_window", layer.compressor_coff * r, b),
                    _pad(b * layer.compressor_state_bytes_per_token())))
    if r == 4:
        out.append((("full", block_size), _pad(block_size // 4 * layer.index_entry_bytes)))
        out.append((("sliding_window", 8, 4), _pad(4 * layer.index_compressor_state_bytes_per_token())))
    return out


def approximate_gcd(values: list[int], lower_bound: int) -> int:
    """The repeat count in [lower_bound, max(values)] that pads the bucket sizes least; ties go to the larger one
    (vLLM 0.33 ``_approximate_gcd``)."""
    lo, hi = max(1, lower_bound), max(values)
    if lo > hi:
        return lo
    best, best_pad = lo, None
    for d in range(lo, hi + 1):
        pad = sum((d - x % d) % d for x in values)
        if best_pad is None or pad < best_pad or (pad == best_pad and d > best):
            best, best_pad = d, pad
    return best


def dsv4_layout(model: ModelSpec, block_size: int) -> KVLayout:
    """Group a DeepSeek-V4 stage's caches and size one block as vLLM 0.33 does."""
    buckets: dict[tuple, dict[int, int]] = {}
    for layer in model.layers:
        if layer is None:
            continue
        for key, page in _layer_caches(layer, block_size):
            pages = buckets.setdefault(key, {})
            pages[page] = pages.get(page, 0) + 1
    if len(buckets) == 1 and len(next(iter(buckets.values()))) == 1:
        # window-only layers: one page size, one cache type: vLLM's uniform path puts every layer in one group
        (key, pages), = buckets.items()
        (page, n_layers), = pages.items()
        group = AllocGroup("sliding_window", n_layers, n_layers, key[2], n_layers * page, key[1])
        return KVLayout((group,), n_layers * page, block_size, 0,
                        ("window-only layers: one KV cache group of every layer (kv_cache_planning "
                         "_get_kv_cache_groups_uniform_type); each group's page_bytes (--json memory.layout.groups) is "
                         "its whole slab of the block",))
    balanced = {k: len(set(p.values())) == 1 for k, p in buckets.items()}
    most = {k: max(p.values()) for k, p in buckets.items()}  # get_max_layers_per_page_size
    min_repeats = max((most[k] for k in buckets if balanced[k] and len(buckets[k]) > 1), default=0)
    repeats = approximate_gcd([most[k] for k in buckets if balanced[k]], min_repeats) if min_repeats else None

    def groups_for(k: tuple) -> int:
        return cdiv(most[k], repeats) if balanced[k] and repeats is not None else 1

    def widest(k: tuple, n: int) -> int:
        return sum(cdiv(cnt, n) * page for page, cnt in buckets[k].items())

    def is_state(k: tuple) -> bool:  # no repeat pattern: sliding-window buckets may split down to one layer a group
        return repeats is None and k[0] == "sliding_window"

    anchor = max(widest(k, sum(buckets[k].values()) if is_state(k) else groups_for(k)) for k in buckets)
    groups: list[AllocGroup] = []
    for k, pages in buckets.items():
        n_layers = sum(pages.values())
        n = groups_for(k)
        if is_state(k):
            n = max(n, cdiv(n_layers, max(anchor // max(pages), 1)))
        per_group = [0] * n
        group_bytes = [0] * n
        for page, cnt in pages.items():  # layers dealt round-robin over the groups, pattern repeat by repeat
            for j in range(cnt):
                per_group[j % n] += 1
                group_bytes[j % n] += page
        window, bs = (k[1], k[2]) if k[0] == "sliding_window" else (0, k[1])
        kind = "sliding_window" if k[0] == "sliding_window" else "mla"
        for m, b in zip(per_group, group_bytes):
            if m:
                groups.append(AllocGroup(kind, m, m, bs, b, window))
    bytes_per_block = max(g.page_bytes for g in groups)
    notes = (f"vLLM 0.33 packed layout (kv_cache_planning._get_packed_kv_cache_groups): {len(groups)} groups from "
             f"{len(buckets)} cache types" + (f", split by {repeats} repeats of the layer pattern" if repeats else "")
             + f"; one block is {bytes_per_block:,} B (the widest group's pages, each padded to {_ALIGN} B); "
               f"compressed "
             f"entries and indexer keys in blocks of {block_size} tokens, raw windows of {DSV4_SWA_BLOCK_SIZE}, "
             f"compressor "
             "states of 4 (ratio 4) or 8 (ratio 128); each group's page_bytes (--json memory.layout.groups) is its "
             "whole slab of the block",)
    return KVLayout(tuple(groups), bytes_per_block, block_size, 0, notes)
