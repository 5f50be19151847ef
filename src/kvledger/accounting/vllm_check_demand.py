"""The blocks vLLM's start-up check counts for one max_model_len request, by release: every KV cache group's, or in
0.14–0.18 the first group's alone.

Read in ``vllm/v1/core/kv_cache_utils.py``:

* 0.14.0 – 0.18.0, ``_max_memory_usage_bytes_from_groups``: ``group_size × page_size × cdiv(any_spec.
  max_memory_usage_bytes, page_size)`` with ``any_spec = kv_cache_groups[0].kv_cache_spec``: one group's blocks
  (a single ``UniformTypeKVCacheSpecs`` group sums its layers, one group all the same). ``get_kv_cache_configs``
  checks max_model_len with it (``_check_enough_kv_cache_memory``), and ``--max-model-len auto``
  (``_auto_fit_max_model_len``) and the error's estimate (``_estimate_max_model_len_from_groups``) search with it.
* 0.19.0 on: ``blocks_needed = sum(cdiv(group.kv_cache_spec.max_memory_usage_bytes, page_size) for group in
  kv_cache_groups)``, every group.
* 0.13.0 and before (read in 0.11.0, 0.12.0, 0.13.0): ``check_enough_kv_cache_memory`` per worker, before the
  layers are grouped: ``max_memory_usage_bytes`` summed over that worker's layer specs, so each real layer's blocks
  and no padding slot. Where a layout pads a group (Gemma 3 27B's 52 sliding layers in groups of 10: 8 empty slots),
  the check counts Σ real layers × page × blocks, fewer bytes than the pool hands one request (rounded up to whole
  blocks of the layout here, so at most one block stricter than vLLM's byte comparison).

Under pipeline parallelism (``get_kv_cache_configs``): 0.14.0–0.16.0 (read in 0.14.0, 0.14.1, 0.15.0, 0.15.1,
0.16.0) check ``_max_memory_usage_bytes_from_groups(global_kv_cache_groups)`` (the whole model's groups: group_size
the whole model's layers per group) against ``min(available_memory)``, one worker's, so a stage holding 1/pp of the
layers is asked for every layer's KV (``KVLayout.global_layout``; the binding stage's blocks stand for the smallest
memory: the same stage where the stages' blocks are the same size). 0.17.0 on (read in 0.17.0, 0.17.1, 0.18.0)
project the groups onto each worker's layers (``_project_kv_cache_groups_to_worker``) and check each worker's own.

vLLM orders the groups by the first layer of each spec (``_get_kv_cache_groups_uniform_page_size``'s
``same_type_layers`` dict, insertion order), as ``kvlayout.vllm_layout`` does: gpt-oss and Gemma open with a sliding
layer, Qwen3-Next, Jamba and Nemotron-H with a Mamba / linear-attention one, Llama 4 with a chunked-local one, so in
0.14–0.18 their check counts a window's (or a state's) blocks, not max_model_len's. The printed "Maximum concurrency"
(``get_max_concurrency_for_kv_cache_config``) sums every group in every release read (0.14.0, 0.18.0, 0.19.0).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kvledger.accounting.kvlayout_types import KVLayout

from kvledger.units import cdiv

__all__ = ["FIRST_GROUP_CHECK", "GLOBAL_GROUPS_CHECK", "PER_LAYER_CHECK_BEFORE", "first_group_only", "global_check",
           "per_layer_check", "check_demand_blocks", "check_estimate_len", "first_group_words", "check_count_words"]

FIRST_GROUP_CHECK = ((0, 14, 0), (0, 19, 0))
"""[first, end) of the vLLM releases whose start-up check counts the first KV cache group's blocks alone."""


GLOBAL_GROUPS_CHECK = ((0, 14, 0), (0, 17, 0))
"""[first, end) of the vLLM releases whose start-up check counts the whole model's KV cache groups against one pipeline
stage's memory (module docstring)."""

PER_LAYER_CHECK_BEFORE = (0, 14, 0)
"""The releases before this one check the sum of every real layer's spec, no padding slot (module docstring)."""


def global_check(ver: tuple[int, int, int] | None, layout: KVLayout | None) -> bool:
    """Whether vLLM ``ver``'s check reads the whole model's groups instead of ``layout``'s (a stage under PP,
    0.14.0–0.16.0)."""
    return (ver is not None and getattr(layout, "global_layout", None) is not None
            and GLOBAL_GROUPS_CHECK[0] <= tuple(ver) < GLOBAL_GROUPS_CHECK[1])


def per_layer_check(ver: tuple[int, int, int] | None, layout: KVLayout | None) -> bool:
    """Whether vLLM ``ver``'s check counts fewer layer slots than ``layout`` has: before 0.14 with padding slots."""
    return ver is not None and getattr(layout, "padding_layers", 0) > 0 and tuple(ver) < PER_LAYER_CHECK_BEFORE


def _per_layer_blocks(layout: KVLayout, max_model_len: int, inflight_tokens: int) -> int:
    """Σ over groups of real layers × page × the group's blocks, in the layout's blocks (rounded up), blocks."""
    need = sum(g.num_layers * g.page_bytes * g.blocks_per_request(max_model_len, inflight_tokens)
               for g in layout.groups)
    return cdiv(need, layout.bytes_per_block)


def first_group_only(ver: tuple[int, int, int] | None, layout: KVLayout | None) -> bool:
    """Whether vLLM ``ver``'s check counts fewer groups than ``layout`` has (module docstring): 0.14–0.18 with two or
    more groups."""
    return (ver is not None and layout is not None and len(layout.groups) > 1
            and FIRST_GROUP_CHECK[0] <= tuple(ver) < FIRST_GROUP_CHECK[1])


def check_demand_blocks(layout: KVLayout, max_model_len: int, inflight_tokens: int,
                        ver: tuple[int, int, int] | None) -> int:
    """Blocks vLLM ``ver``'s start-up check counts for one ``max_model_len`` request: the first group's in 0.14–0.18,
    the whole model's groups' bytes in this stage's blocks (rounded up) under PP in 0.14–0.16, the real layers' alone
    before 0.14, every group's otherwise (``KVLayout.blocks_per_request``), blocks."""
    if per_layer_check(ver, layout):
        return _per_layer_blocks(layout, max_model_len, inflight_tokens)
    if global_check(ver, layout):
        whole = layout.global_layout
        need = check_demand_blocks(whole, max_model_len, inflight_tokens, ver) * whole.bytes_per_block
        return cdiv(need, layout.bytes_per_block)
    if first_group_only(ver, layout):
        return layout.groups[0].blocks_per_request(max_model_len, inflight_tokens)
    return layout.blocks_per_request(max_model_len, inflight_tokens)


def check_estimate_len(layout: KVLayout, blocks: int, inflight_tokens: int, upper: int,
                       ver: tuple[int, int, int] | None) -> int:
    """Largest L ≤ ``upper`` the check of ``ver`` passes with ``blocks`` blocks, tokens: vLLM's
    ``_estimate_max_model_len_from_groups``, a binary search over 1 … upper with ``check_demand_blocks``; 0 when not one
    token passes."""
    lo, hi = 0, upper
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if check_demand_blocks(layout, mid, inflight_tokens, ver) <= blocks:
            lo = mid
        else:
            hi = mid - 1
    return lo


def first_group_words(layout: KVLayout, release: str) -> str:
    """ "vLLM 0.17.0's start-up check counts only the first KV cache group (the sliding-window layers' …)": why the
    check's demand is one group's, for a message."""
    g = layout.groups[0]
    what = {"sliding_window": "sliding-window", "chunked_local": "chunked-local", "state": "Mamba state",
            "full": "full-attention", "mla": "MLA"}.get(g.kind, g.kind)
    return (f"vLLM {release}'s start-up check counts only the first of the {len(layout.groups)} KV cache groups (the "
            f"{what} layers' blocks; v1/core/kv_cache_utils.py _max_memory_usage_bytes_from_groups, 0.14–0.18; "
            "0.19 sums every group)")


def check_count_words(layout: KVLayout | None, ver: tuple[int, int, int] | None, release: str) -> str:
    """Why vLLM ``release``'s check counts other blocks than one request takes from the pool, for a message: the whole
    model's groups on one stage (PP, 0.14–0.16), no padding slot (before 0.14), the first group alone (0.14–0.18);
    "" where it counts what the request takes."""
    if global_check(ver, layout):
        slots = layout.global_layout.groups[0].slots
        return (f"vLLM {release}'s start-up check counts the whole model's KV cache groups ({slots} layer slots a "
                "block, every pipeline stage's layers) against one stage's memory (v1/core/kv_cache_utils.py "
                "get_kv_cache_configs, 0.14–0.16; 0.17 checks each stage's own layers)")
    if per_layer_check(ver, layout):
        return (f"vLLM {release}'s start-up check counts each real layer, not the layout's {layout.padding_layers} "
                "padding slots (v1/core/kv_cache_utils.py check_enough_kv_cache_memory sums the layer specs before "
                "0.14; the pool's blocks carry the padding)")
    if first_group_only(ver, layout):
        return first_group_words(layout, release)
    return ""
