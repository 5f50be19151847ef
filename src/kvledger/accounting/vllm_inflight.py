"""The tokens vLLM counts in flight when it sizes a sliding-window group's per-request block demand at start-up.

A sliding group's demand is ``cdiv(min(W − 1 + F, L), B) + 1`` blocks (``kv_cache_interface.py ::
SlidingWindowSpec.max_memory_usage_bytes``); F is what this module gives.
"""

from __future__ import annotations

__all__ = ["INFLIGHT_BATCHES_FROM", "sliding_inflight_tokens"]

INFLIGHT_BATCHES_FROM = (0, 26, 0)
"""First vLLM release whose sliding-window demand counts ``max_in_flight_tokens`` (wheels 0.25.0 and 0.26.0 read)."""


def sliding_inflight_tokens(ver: tuple[int, int, int], max_num_batched_tokens: int, pp: int = 1,
                            v2_runner: bool = False) -> tuple[int, str]:
    """F, the tokens in flight, and its source.

    From 0.26 (wheels 0.26.0, 0.27.0, 0.28.0, 0.29.0 and 0.33.0 read; 0.30–0.32 between them, assumed the same):
    ``SlidingWindowSpec`` takes ``VllmConfig.max_in_flight_tokens`` = ``max_concurrent_batches`` ×
    max_num_batched_tokens (``config/vllm.py``): with async scheduling (on by default) PP + 1 batches on the V2 model
    runner; on the V1 runner 2 at PP 1 and PP under PP (0.26–0.29: async stays on, and ``max_concurrent_batches``
    returns PP for the V1 runner under PP; 0.33 turns async off there, ``VllmConfig.__post_init__``: "pipeline
    parallelism", with the same PP). 0.20–0.25 (wheels read, each): ``sliding_window − 1 + max_num_batched_tokens``;
    0.10–0.19 the same. Async scheduling off by hand (not a plan flag) gives PP batches; not modelled.
    """
    if ver >= INFLIGHT_BATCHES_FROM:
        n = pp + 1 if v2_runner else max(pp, 2)
        v1 = "2 (async scheduling)" if pp == 1 else f"PP = {n}"
        why = f"V2 model runner, PP {pp}: PP + 1 = {n}" if v2_runner else f"V1 model runner, PP {pp}: {v1}"
        return n * max_num_batched_tokens, (f"vLLM 0.26+ rule: {n} × max_num_batched_tokens in flight "
                                            f"(config/vllm.py::max_concurrent_batches; {why}; read in 0.26–0.29 "
                                            f"and 0.33, 0.30–0.32 not read; assumed the same)")
    return max_num_batched_tokens, ("vLLM 0.10–0.25 rule: max_num_batched_tokens (kv_cache_interface.py "
                                    "SlidingWindowSpec, read in 0.20–0.25; max_in_flight_tokens from 0.26)")
