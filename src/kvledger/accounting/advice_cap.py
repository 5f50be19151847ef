"""The fits verdict's figures when --max-num-seqs binds: what the engine runs at once comes first, the KV figure second.

vLLM's scheduler admits at most ``max_num_seqs`` running requests whatever the KV pool holds
(vllm/v1/core/sched/scheduler.py: ``if len(self.running) == self.max_num_running_reqs: break``), so the first
number a reader meets is min(KV-limited requests, max_num_seqs); the KV-limited figure follows, named as such.
"""

from __future__ import annotations

from typing import Any

__all__ = ["capped_at_max", "context_words"]


def _reqs(n: int, tokens: int) -> str:
    return f"{n:,} concurrent {tokens:,}-token request{'' if n == 1 else 's'}"


def context_words(r: Any, as_few: str) -> str:
    """One asked context's figure: the requests that run at once, then (when max_num_seqs binds) what the KV holds;
    ``as_few`` is the range's low-end clause (" (as few as N…)") or ""."""
    decode = "" if r.decode_requests is None else f" (≈{r.decode_requests:,} while decoding)"
    if r.running_cap >= r.max_requests:
        return _reqs(r.max_requests, r.context_tokens) + decode + as_few
    low = as_few.removeprefix(" (").removesuffix(")")
    return (f"{_reqs(r.running_cap, r.context_tokens)} run at once (max_num_seqs={r.running_cap:,}; the KV cache "
            f"holds {r.max_requests:,}{decode}{', ' + low if low else ''})")


def capped_at_max(at_max: str, row: Any, tokens: int) -> str:
    """The max_model_len figure ``at_max`` (``window_capacity.at_max_words``, which opens with the KV-limited
    requests) led by what runs at once when max_num_seqs binds there; ``at_max`` unchanged otherwise."""
    if row is None or row.running_cap >= row.max_requests:
        return at_max
    return (f"{_reqs(row.running_cap, tokens)} run at once (max_num_seqs={row.running_cap:,}, the engine's limit; "
            f"the rest wait); the KV cache holds {at_max}")
