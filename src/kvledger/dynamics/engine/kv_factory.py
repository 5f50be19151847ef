"""The KV cache manager an engine's settings select (``EngineConfig`` in config.py)."""

from __future__ import annotations

from typing import Any

from kvledger.dynamics.engine.hybrid_kv import HybridKVManager
from kvledger.dynamics.engine.kv_interface import KVManager
from kvledger.dynamics.engine.kv_manager import PagedKVManager

__all__ = ["make_kv_manager"]


def make_kv_manager(cfg: Any) -> KVManager:
    """The KV cache manager the settings select (a PagedKVManager, HybridKVManager or RadixKVManager)."""
    if cfg.caching_policy_in_effect == "sglang":
        from kvledger.dynamics.engine.radix_cache import RadixKVManager  # lazy: SGLang's cache, for its policy only

        return RadixKVManager((cfg.num_gpu_blocks - 1) * cfg.block_size, cfg.block_size)
    if cfg.hybrid_caching:
        return HybridKVManager(cfg.num_gpu_blocks, cfg.step_blocks, True)
    # the pool keeps block 0 as v1's null block; V0 had none, so give it one more id to keep all usable
    return PagedKVManager(cfg.num_usable_blocks + 1, cfg.block_size, cfg.enable_prefix_caching,
                          cfg.blocks_for_tokens, contiguous=cfg.kv_allocation == "contiguous",
                          max_model_len=cfg.max_model_len, step_blocks=cfg.step_blocks)
