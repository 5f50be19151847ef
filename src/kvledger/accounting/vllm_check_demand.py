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
* 0.13.0 and before: ``check_enough_kv_cache_memory`` per worker, ``max_memory_usage_bytes`` summed over every
  layer's spec: every group's blocks (with no padding slot, which kvledger's layouts count; the same where a layout
  has none).

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

__all__ = ["FIRST_GROUP_CHECK", "first_group_only", "check_demand_blocks", "check_estimate_len", "first_group_words"]

FIRST_GROUP_CHECK = ((0, 14, 0), (0, 19, 0))
"""[first, end) of the vLLM releases whose start-up check counts the first KV cache group's blocks alone."""


def first_group_only(ver: tuple[int, int, int] | None, layout: KVLayout | None) -> bool:
    """Whether vLLM ``ver``'s check counts fewer groups than ``layout`` has (module docstring): 0.14–0.18 with two or
    more groups."""
    return (ver is not None and layout is not None and len(layout.groups) > 1
            and FIRST_GROUP_CHECK[0] <= tuple(ver) < FIRST_GROUP_CHECK[1])


def check_demand_blocks(layout: KVLayout, max_model_len: int, inflight_tokens: int,
                        ver: tuple[int, int, int] | None) -> int:
    """Blocks vLLM ``ver``'s start-up check counts for one ``max_model_len`` request: the first group's in 0.14–0.18,
    every group's otherwise (``KVLayout.blocks_per_request``), blocks."""
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
