"""How many requests of a run's mean length one replica's simulated KV pool holds at once: the count ``simulate``
prints when it explains preemptions and a max_num_seqs cap, by the rule of ``plan``'s concurrency rows.

Under vLLM's hybrid KV cache manager a request draws blocks for every KV cache group, so the pool's token slots ÷ the
mean length overstates it: Gemma-3-27B's 13,865 usable blocks hold 221,840 token slots, 27 requests of 8,192 tokens
by that division, but each such request holds 512 blocks of its full-attention group and 65 in each of its six
sliding groups while decoding, 902 blocks, so 13,865 ÷ 902 = 15 — plan's "≈15 while decoding". The count is
``accounting.window_capacity.held_blocks`` (sliding layers at their window, Mamba state groups at the pages vLLM's
start-up check counts, full attention at every block); one full-attention group, and SGLang's token pool, keep token
slots ÷ the mean (no other group draws from the pool).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from kvledger.accounting.window_capacity import held_blocks, held_words

__all__ = ["PoolHolds", "pool_holds"]


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

    def why(self) -> str:
        """The division, with its sources: "28,159 usable blocks ÷ 902 blocks per 8,192-token request …"."""
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
        return PoolHolds(int(slots // mean_tokens), slots, cfg.num_usable_blocks, mean_tokens)
    return PoolHolds(cfg.num_usable_blocks // d, slots, cfg.num_usable_blocks, mean_tokens, d, held_words(plan.layout))
