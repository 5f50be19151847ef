"""The note a hybrid layout's prefix caching prints: the rule simulated (the release's Mamba rule, or the attention
groups'), or why no hit is simulated (``from_plan._hybrid_fields`` decides which)."""

from __future__ import annotations

from typing import Any

__all__ = ["HYBRID_NO_CACHING", "hybrid_caching", "hybrid_no_caching"]

HYBRID_NO_CACHING = ("prefix caching is not modelled for this hybrid layout (Mamba state groups, mixed block sizes or "
                     "the radix cache): the pool is the one the engine lays out as launched (for vLLM, with prefix "
                     "caching on unless --no-enable-prefix-caching), but no prefix hit is simulated, so repeated "
                     "prefixes cost their full prefill here")


def hybrid_caching(rule: Any, engine_version: str) -> str:
    """The prefix-caching rule a hybrid run simulates: the release's Mamba rule (``StepBlockRule.state_prefix``) or the
    full + sliding one (``StepBlockRule.retention``, the release's ``swa_retention.SlidingRetention``)."""
    if rule.state_prefix is not None:
        return rule.state_prefix.text + "; these runs take the general step throughout (slower)"
    if rule.state_per_block:
        return (f"Mamba prefix caching as vLLM {engine_version} (mamba_cache_mode all, read in 0.19 and 0.27): a state "
                "page per block of the step's tokens, every full block's state kept (MambaManager.cache_blocks), a "
                "hit is full attention's chain walked back to the last block whose state is cached "
                "(MambaManager.find_longest_cache_hit); these runs take the general step throughout (slower)")
    retention = rule.retention
    return (f"hybrid prefix caching as vLLM {engine_version} (ModelConfig.is_prefix_caching_supported): per-group "
            "hashes, sliding groups need only the window's blocks of a hit (kv_cache_coordinator.py) and keep in the "
            f"cache {retention.keeps} ({retention.source}); these runs take the general step throughout (slower)")


def hybrid_no_caching(layout: Any, engine_version: str) -> str:
    """Why no prefix hit is simulated: vLLM launched a Mamba hybrid with caching off (its default before 0.26), or the
    layout is one the simulator does not model."""
    state = [g for g in layout.groups if g.kind == "state"] if layout is not None else []
    if state and all(g.state_pages == 1 and not g.state_page_per_block for g in state):
        return (f"prefix caching off: vLLM {engine_version} launches this Mamba hybrid without it (mamba_cache_mode "
                "none; on by default for hybrid models from 0.26, ModelConfig.is_prefix_caching_supported); "
                "--enable-prefix-caching turns it on")
    return HYBRID_NO_CACHING
