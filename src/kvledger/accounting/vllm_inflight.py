"""The tokens vLLM counts in flight when it sizes a sliding-window group's per-request block demand at start-up.

A sliding group's demand is ``cdiv(min(W − 1 + F, L), B) + 1`` blocks (``kv_cache_interface.py ::
SlidingWindowSpec.max_memory_usage_bytes``); F is what this module gives.
"""

from __future__ import annotations

__all__ = ["sliding_inflight_tokens"]


def sliding_inflight_tokens(ver: tuple[int, int, int], max_num_batched_tokens: int, pp: int = 1,
                            v2_runner: bool = False) -> tuple[int, str]:
    """F, the tokens in flight, and its source.

    0.33: ``VllmConfig.max_in_flight_tokens`` = ``max_concurrent_batches`` × max_num_batched_tokens
    (``config/vllm.py``): with async scheduling (on by default) PP + 1 batches on the V2 model runner; on the V1
    runner 2 at PP 1, and PP batches under PP, where the V1 runner turns async scheduling off
    (``VllmConfig.__post_init__``: "pipeline parallelism"). 0.10–0.20: max_num_batched_tokens. Async scheduling off by
    hand (not a plan flag) gives PP batches in 0.33; not modelled.
    """
    if ver >= (0, 33, 0):
        n = pp + 1 if v2_runner else max(pp, 2)
        v1 = "2 (async scheduling)" if pp == 1 else f"PP = {n} (async scheduling off under PP)"
        why = f"V2 model runner, PP {pp}: PP + 1 = {n}" if v2_runner else f"V1 model runner, PP {pp}: {v1}"
        return n * max_num_batched_tokens, (f"vLLM 0.33: {n} × max_num_batched_tokens in flight "
                                            f"(config/vllm.py::max_concurrent_batches; {why})")
    return max_num_batched_tokens, "vLLM 0.10–0.20 rule: max_num_batched_tokens (0.21–0.32 not read; assumed the same)"
