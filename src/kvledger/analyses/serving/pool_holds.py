"""How many requests of a run's mean length one replica's simulated KV pool holds at once: the count ``simulate``
prints when it explains preemptions and a max_num_seqs cap, by the rule of ``plan``'s concurrency rows.

Under vLLM's hybrid KV cache manager a request draws blocks for every KV cache group, so the pool's token slots ÷ the
mean length overstates it: Gemma-3-27B's 13,865 usable blocks hold 221,840 token slots, 27 requests of 8,192 tokens
by that division, but each such request holds 512 blocks of its full-attention group and 65 in each of its six
sliding groups while decoding, 902 blocks, so 13,865 ÷ 902 = 15 — plan's "≈15 while decoding". The count is
``accounting.window_capacity.held_blocks`` (sliding layers at their window, Mamba state groups at the pages vLLM's
start-up check counts, full attention at every block); one full-attention group, and SGLang's token pool, keep token
slots ÷ the mean (no other group draws from the pool).

With ``--shared-prefix-tokens N`` and prefix caching on, the prefix's full blocks are held once, by every request that
reaches N, not once per request (vLLM's hash cache: ``kv_cache_utils.py::hash_request_tokens`` keys full blocks only,
``block_pool.py`` hands a cached block to every request whose hashes match, with a reference count): the slots less
those ⌊N/B⌋·B tokens, ÷ the mean less the share of requests reaching N × those tokens. Llama-3.1-70B at TP 4 on H100:
460,800 slots, 80,939 + 548 token means, N = 20,000 reached by every prompt → (460,800 − 20,000) ÷ 61,487 = 7
requests, not 460,800 ÷ 81,487 = 5 (the run's batch peaked at 9).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from kvledger.accounting.window_capacity import held_blocks, held_words

__all__ = ["PoolHolds", "pool_holds", "shared_prefix_held", "shared_count"]


@dataclass(frozen=True)
class PoolHolds:
    """Requests of ``mean_tokens`` one replica's pool holds at once.

    Attributes:
        requests: that count, requests. token_slots: usable blocks × block size, tokens.
        blocks_per_request: blocks one request of the mean length holds while decoding (``held_blocks``), blocks;
            None where the count is token slots ÷ the mean. rule: which rule counted them, in words ("" for slots).
    """

    requests: int
    token_slots: int
    usable_blocks: int
    mean_tokens: float
    blocks_per_request: int | None = None
    rule: str = ""
    shared_tokens: int = 0
    private_mean_tokens: float | None = None

    def why(self) -> str:
        """The division, with its sources: "28,159 usable blocks ÷ 902 blocks per 8,192-token request …"."""
        if self.blocks_per_request is None and self.shared_tokens:
            return (f"({self.token_slots:,} slots − {self.shared_tokens:,} shared-prefix tokens, cached once for every "
                    f"request) ÷ {self.private_mean_tokens:,.0f} tokens, the prompt + output means "
                    f"({self.mean_tokens:,.0f}) less the shared prefix")
        if self.blocks_per_request is None:
            return f"{self.token_slots:,} slots ÷ {self.mean_tokens:,.0f} tokens, prompt + output means"
        return (f"{self.usable_blocks:,} usable blocks ÷ {self.blocks_per_request:,} blocks per "
                f"{math.ceil(self.mean_tokens):,}-token request at the prompt + output means, as `kvledger plan` "
                f"counts a request while decoding under vLLM's hybrid KV cache manager: {self.rule}")


def pool_holds(setup: Any, mean_tokens: float) -> PoolHolds | None:
    """The PoolHolds of ``setup``'s (a ``SimSetup``) pool for requests of ``mean_tokens`` tokens; None for no mean."""
    cfg = setup.config
    if mean_tokens <= 0:
        return None
    slots = cfg.num_usable_blocks * cfg.block_size
    plan = getattr(setup, "plan", None)
    d = None
    if plan is not None and plan.memory.engine == "vllm" and cfg.batching != "sglang":
        d = held_blocks(plan.layout, math.ceil(mean_tokens), plan.inflight_tokens)
    if d is None:
        shared, share = shared_prefix_held(setup)
        if shared:
            private = mean_tokens - share * shared
            return PoolHolds(shared_count(slots, mean_tokens, shared, share), slots, cfg.num_usable_blocks,
                             mean_tokens, shared_tokens=shared, private_mean_tokens=private)
        return PoolHolds(int(slots // mean_tokens), slots, cfg.num_usable_blocks, mean_tokens)
    return PoolHolds(cfg.num_usable_blocks // d, slots, cfg.num_usable_blocks, mean_tokens, d, held_words(plan.layout))


def shared_prefix_held(setup: Any) -> tuple[int, float]:
    """(tokens of ``--shared-prefix-tokens`` the pool holds once: its full blocks, ⌊N/B⌋·B; the share of requests
    whose prompt reaches N), (0, 0.0) without a shared prefix, with prefix caching off or no prompt reaching it."""
    info, cfg = getattr(setup, "workload_info", None) or {}, setup.config
    n, reach, total = info.get("shared_prefix_tokens"), info.get("shared_prefix_requests"), info.get("num_requests")
    if not n or not reach or not total or not cfg.enable_prefix_caching:
        return 0, 0.0
    return (n // cfg.block_size) * cfg.block_size, reach / total


def shared_count(slots: int, mean_tokens: float, shared: int, share: float) -> int:
    """Requests of ``mean_tokens`` a pool of ``slots`` token slots holds when ``shared`` tokens of the share ``share``
    of them are one cached copy: (slots − shared) ÷ (mean − share × shared), rounded down; slots ÷ mean without."""
    private = mean_tokens - share * shared
    if not shared or private <= 0 or slots <= shared:
        return int(slots // mean_tokens)
    return int((slots - shared) // private)
