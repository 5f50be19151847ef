"""The fix a Mamba / linear-attention hybrid has that others lack: ``--no-enable-prefix-caching``.

With prefix caching on, vLLM 0.33 keeps state in "align" mode: a request may claim 2 state pages per state group plus
its prefill checkpoints (``v1/kv_cache_interface.py : MambaSpec.max_memory_usage_bytes``); off, mode "none", one page.
The start-up check (and what fits) changes with it, at the price of no prefix reuse. E.g. Nemotron-H-56B at TP 2 on
H100, 8,192 tokens: 198 blocks ÷ (2 attention + 6 state groups × 3 pages = 20) = 9.90x, against 198 ÷ (2 + 6) =
24.75x without prefix caching.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from kvledger.accounting.advice_types import Option
from kvledger.catalog.layers import StateLayer

if TYPE_CHECKING:
    from kvledger.accounting.plan import Plan

__all__ = ["no_prefix_caching_option"]

WHY = ("Mamba state kept as one page per request (mamba_cache_mode none) instead of aligned pages and prefill "
       "checkpoints for prefix caching (MambaSpec.max_memory_usage_bytes); no prefix reuse")


def no_prefix_caching_option(p: Plan, retry: Callable[..., Plan | None], more_than: int) -> list[Option]:
    """``--no-enable-prefix-caching`` re-planned for a vLLM hybrid with state layers and prefix caching on, when it
    holds more than ``more_than`` whole max_model_len requests; [] otherwise."""
    if p.settings.engine != "vllm" or p.settings.enable_prefix_caching is False:
        return []
    if not any(isinstance(layer, StateLayer) for layer in p.model.layers):
        return []
    q = retry(enable_prefix_caching=False)
    r = q.row_at(q.memory.max_model_len) if q is not None else None
    if r is None or r.max_requests <= more_than:
        return []
    return [Option("--no-enable-prefix-caching", r.max_concurrency, r.max_requests, WHY, q.memory.max_model_len)]
