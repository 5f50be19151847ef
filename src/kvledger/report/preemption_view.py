"""The lines under ``preemptions (recompute): N`` in ``kvledger simulate``'s summary: why the run preempted, what to
change (``analyses.serving.preemption_why``; --json: ``preemptions``) and, without a host KV tier, what the resumes
got back and recomputed (``analyses.serving.preemption_resume``; --json: ``preemptions.resume``)."""

from __future__ import annotations

from typing import Any

__all__ = ["preemption_lines", "resume_words"]


def preemption_lines(p: dict[str, Any] | None) -> list[str]:
    """"why" and "what to change", for a run that preempted, then its resumes where known; none otherwise."""
    if not p:
        return []
    return [f"  why: {p['why']}", f"  what to change: {p['what_to_change']}"] + (
        [f"  {resume_words(p['resume'])}"] if p.get("resume") else [])


def resume_words(r: dict[str, Any]) -> str:
    """Where the KV of the resumed requests came from: HBM's prefix cache (with prefix caching on) or recompute."""
    hbm = (f"{r['hbm_hit_tokens']:,} found in HBM's prefix cache, " if "hbm_hit_tokens" in r
           else "prefix caching off, so ")
    return (f"on resume after preemption ({r['resumes']:,} resumes, {r['resume_tokens']:,} tokens of prompt + "
            f"generated KV): {hbm}{r['recomputed_tokens']:,} recomputed = "
            f"{_share(r['recomputed_share_of_prefill'])} of "
            f"the {r['prefill_tokens']:,} prefill tokens the engine computed (vLLM frees a preempted request's KV and "
            "looks it up again in HBM's prefix cache when it resumes; no host KV tier)")


def _share(x: float) -> str:
    """A share as a percentage, one decimal; two significant figures under 0.1 % (0.024%): a small one is not 0.0%."""
    return f"{x:.1%}" if x == 0 or x >= 0.001 else f"{x * 100:.2g}%"
