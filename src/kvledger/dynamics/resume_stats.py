"""What preempted requests got back when they resumed: the tokens each KV tier gave back and those recomputed.

vLLM V1 preempts by recompute (``v1/core/sched/scheduler.py : _preempt_request``, 0.19.0 and 0.33.0): the request's
blocks are freed, ``num_computed_tokens`` goes to 0 and it goes back to the front of the waiting queue. When the
scheduler reaches it again it is looked up as any waiting request with nothing computed: ``get_computed_blocks`` in
HBM, where its own full, hashed blocks (prompt and generated tokens) stay in the free queue until reused, then the KV
connector's ``get_num_new_matched_tokens`` beyond that hit (engine/offload.py ``_lookup_range``). Whatever no tier
gives back is recomputed. These figures are kept apart from the hits at first arrival (``prefix_stats.hits``,
``host_hit_tokens``), which the per-tier hit rates (shares of prompt tokens at first admission) are made of.

LMCache 0.5.6 through vLLM looks a resumed request up afresh, over whole chunks of its saved prompt (engine/offload.py);
its chunks can come from the disk or remote store below the host (``lower_reloaded_tokens``). SGLang 0.5.23 retracts
a decoding request without checkpointing what it decoded, and matches it on resume in its radix tree and HiCache's
host tier (engine/radix_cache.py ``kept_tokens``, engine/hicache_host.py); its load-backs are not in the prefix
stats' hits (``reloads_in_hits`` False), vLLM's loads are.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ResumeStats", "resume_stats"]


@dataclass(frozen=True)
class ResumeStats:
    """Resumes after preemption (recompute), all replicas.

    Attributes:
        resumes: re-admissions of preempted requests, count.
        resume_tokens: the tokens (prompt + generated) they had to have in KV again, tokens.
        hbm_hit_tokens: of those, found in HBM's prefix cache (their own freed blocks or shared ones), tokens.
        host_reloaded_tokens: loaded back from the host tier, tokens.
        recomputed_tokens: recomputed (resume_tokens − the two above; the last token always is), tokens.
        host_unserved_tokens: loaded from the host for a resume, then evicted from HBM before its admission and
            recomputed (in recomputed_tokens, and in the tier's bytes and load time), tokens.
        lower_reloaded_tokens: loaded back from LMCache's disk or remote store (with one only; None: none), tokens.
    """

    __json_optional__ = ("lower_reloaded_tokens",)

    resumes: int
    resume_tokens: int
    hbm_hit_tokens: int
    host_reloaded_tokens: int
    recomputed_tokens: int
    host_unserved_tokens: int = 0
    lower_reloaded_tokens: int | None = None

    def __post_init__(self) -> None:
        parts = (self.hbm_hit_tokens, self.host_reloaded_tokens, self.recomputed_tokens,
                 self.lower_reloaded_tokens or 0)
        if min(parts) < 0 or sum(parts) != self.resume_tokens:
            raise RuntimeError(f"resume accounting is wrong: HBM {parts[0]} + host {parts[1]} + recomputed {parts[2]}"
                               f" + lower tiers {parts[3]} ≠ {self.resume_tokens} resume tokens, or one is negative")


def resume_stats(managers: list) -> ResumeStats | None:
    """The resumes of the KV managers ``managers`` with a host tier (vLLM's paged ones, engine/offload.py; SGLang
    HiCache's radix ones, engine/hicache_host.py), None when none was preempted."""
    n = sum(m.prefix_stats.preempted_requests for m in managers)
    if not n:
        return None
    tokens = sum(m.prefix_stats.preempted_queries for m in managers)
    host = sum(getattr(m, "host_resume_hit_tokens", 0) for m in managers)
    lower = sum(getattr(m, f"{k}_resume_hit_tokens", 0) for m in managers for k in ("disk", "remote"))
    # every tier's reload is in vLLM's prefix hits (loaded blocks enter the GPU cache first); HiCache's are not
    hits = sum(m.prefix_stats.preempted_hits + (0 if getattr(m, "reloads_in_hits", True) else
                                                m.host_resume_hit_tokens) for m in managers)
    unserved = sum(getattr(m, "host_resume_unserved_tokens", 0) for m in managers)
    lowered = any(getattr(m, "reloads_in_hits", True) and getattr(m, k, None) is not None for m in managers
                  for k in ("disk", "remote"))  # LMCache's levels (HiCache's storage prefetch on resume: not here)
    return ResumeStats(n, tokens, hits - host - lower, host, tokens - hits, unserved, lower if lowered else None)
