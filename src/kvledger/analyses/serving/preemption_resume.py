"""What a run's preemptions cost on resume, without a host KV tier: the ``resume`` facts under ``preemptions``.

vLLM preempts by recompute (``v1/core/sched/scheduler.py : _preempt_request``, 0.19.0 and 0.33.0; V0's
``_preempt_by_recompute``): the request's blocks are freed and it is admitted again later with nothing computed,
looked up in HBM's prefix cache as any waiting request (``get_computed_blocks``: its own freed blocks stay there
until reused), and whatever the cache does not give back is recomputed. The figures are the simulator's
(``PrefixCacheStats.preempted_*``, all replicas); with a host tier the tier's report says the same with the
tier's reloads (``dynamics.resume_stats``), so this is for runs without one. SGLang's retractions are left out.
"""

from __future__ import annotations

from typing import Any

from kvledger.dynamics.resume_stats import ResumeStats

__all__ = ["resume_facts"]


def resume_facts(cfg: Any, reps: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The resumes of a vLLM run (``cfg``: its ``EngineConfig``; ``reps``: each replica's ``batch_facts``): their
    count, the tokens (prompt + generated) they needed back, those HBM's prefix cache gave back (only with prefix
    caching on), those recomputed, and the recompute's share of all prefill tokens the steps computed. None for
    SGLang or a replica without the counts."""
    if cfg.batching == "sglang" or not reps or any("resume" not in b for b in reps):
        return None
    got = [b["resume"] for b in reps]
    n, tokens, hits, prefill = (sum(g[k] for g in got) for k in ("resumes", "resume_tokens", "hbm_hit_tokens",
                                                                 "prefill_tokens"))
    r = ResumeStats(n, tokens, hits, 0, tokens - hits)  # checks HBM + recomputed = needed back
    out = {"resumes": r.resumes, "resume_tokens": r.resume_tokens, "recomputed_tokens": r.recomputed_tokens,
           "prefill_tokens": prefill,
           "recomputed_share_of_prefill": r.recomputed_tokens / prefill if prefill else 0.0}
    if cfg.enable_prefix_caching:
        out["hbm_hit_tokens"] = r.hbm_hit_tokens
    return out
