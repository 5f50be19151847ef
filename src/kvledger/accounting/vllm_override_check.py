"""Whether vLLM's start-up check sizes the KV pool from ``--num-gpu-blocks-override``, by release.

The check (one max_model_len request against the KV pool) and the override's place around it, read in the wheels:
V0 overrides first (0.9.0 ``engine/llm_engine.py : _initialize_kv_caches``) and checks the override's blocks
(``worker/worker.py : raise_if_cache_size_invalid``). V1 before 0.21 checks the profiled memory and overrides the count
only after: 0.8.0's ``v1/core/kv_cache_utils.py : get_kv_cache_configs`` and 0.9.0's ``get_kv_cache_config`` call
``check_enough_kv_cache_memory(…, available_memory)``, then ``_get_kv_cache_config_uniform_type`` overrides; 0.19.0's
and 0.20.0's ``get_kv_cache_configs`` call ``_check_enough_kv_cache_memory(avail_mem, …)``, then ``get_num_blocks`` →
``may_override_num_blocks``. From 0.21.0 ``get_kv_cache_configs`` replaces each worker's profiled ``available_memory``
with override × ``_pool_bytes_per_block`` before auto-fit and the check (0.22–0.29 there, 0.33's
``kv_cache_planning.py``). The printed "GPU KV cache size" and "Maximum concurrency" come from the overridden count in
every release (``_report_kv_cache_config`` reads ``kv_cache_config.num_blocks``).
"""

from __future__ import annotations

__all__ = ["OVERRIDE_IN_CHECK_FROM", "NULL_BLOCK_CHECK_FROM", "check_ignores_override"]

NULL_BLOCK_CHECK_FROM = (0, 29, 0)
"""First vLLM release whose start-up check (and the estimate it and auto-fit share) keeps back the block pool's null
block (``advice_len``'s docstring)."""

OVERRIDE_IN_CHECK_FROM = (0, 21, 0)
"""First vLLM release whose start-up check sizes the pool from ``--num-gpu-blocks-override`` (module docstring)."""


def check_ignores_override(ver: tuple[int, int, int]) -> bool:
    """True for the vLLM V1 releases whose start-up check judges max_model_len on the profiled memory, not on
    ``--num-gpu-blocks-override`` (0.8 up to ``OVERRIDE_IN_CHECK_FROM``)."""
    return (0, 8, 0) <= ver < OVERRIDE_IN_CHECK_FROM
