"""The KV cache manager an engine's settings select (``EngineConfig`` in config.py)."""

from __future__ import annotations

from typing import Any

from kvledger.dynamics.engine.hybrid_kv import HybridKVManager, supports_hybrid_caching
from kvledger.dynamics.engine.kv_interface import KVManager
from kvledger.dynamics.engine.kv_manager import PagedKVManager
from kvledger.dynamics.engine.mamba_prefix import MambaPrefixKVManager, supports_mamba_caching

__all__ = ["make_kv_manager", "supports_prefix_caching"]


def supports_prefix_caching(rule: Any) -> bool:
    """Whether a hybrid layout's prefix caching is modelled: attention groups of one block size (hybrid_kv.py) or full
    and align-mode Mamba state groups of one block size (mamba_prefix.py)."""
    return supports_hybrid_caching(rule) or supports_mamba_caching(rule)


def make_kv_manager(cfg: Any) -> KVManager:
    """The KV cache manager the settings select (a PagedKVManager, HybridKVManager, MambaPrefixKVManager or
    RadixKVManager)."""
    if cfg.caching_policy_in_effect == "sglang":
        from kvledger.dynamics.engine.radix_cache import RadixKVManager  # lazy: SGLang's cache, for its policy only

        return RadixKVManager((cfg.num_gpu_blocks - 1) * cfg.block_size, cfg.block_size)
    if cfg.hybrid_caching:
        manager = MambaPrefixKVManager if supports_mamba_caching(cfg.step_blocks) else HybridKVManager
        return manager(cfg.num_gpu_blocks, cfg.step_blocks, True)
    # the pool keeps block 0 as v1's null block; V0 had none, so give it one more id to keep all usable
    return PagedKVManager(cfg.num_usable_blocks + 1, cfg.block_size, cfg.enable_prefix_caching,
                          cfg.blocks_for_tokens, contiguous=cfg.kv_allocation == "contiguous",
                          max_model_len=cfg.max_model_len, step_blocks=cfg.step_blocks)
