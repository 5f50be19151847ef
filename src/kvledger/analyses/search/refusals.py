"""Candidates that no load can qualify, because the engine refuses too many of the workload's requests before they run.

A request the engine refuses at input validation (vLLM V1: a prompt ≥ max_model_len) is never good, and every probe
of a capacity search replays the same requests (only their gaps are rescaled), so with ``r`` of ``N`` refused no rate
reaches more than (N − r) / N (``kvledger.analyses.serving.rejections``). When that ceiling is below the target, the
candidate is rejected ("SLO not met at any rate") without simulating it: a rate search would halve its rate down to
its floor, every probe missing, and say the same thing after minutes of simulation (a 32K-context search whose
lognormal prompts passed max_model_len for 18.5% of requests: 48 candidates, 30 probes each, 151 s, and an answer that
named the SLO instead of max_model_len).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kvledger.analyses.search.reasons import SLO_NOT_MET, SLO_REASONS

__all__ = ["refusal_rejection", "refused_everywhere"]


def refusal_rejection(spec: Any, cand: Any, entry: dict[str, Any]) -> dict[str, Any] | None:
    """``entry`` rejected because the requests its engine refuses keep every load below the target, or None (none
    refused, too few, a disaggregated unit, or multi-turn sessions, whose turns are drawn as they run)."""
    from kvledger.analyses.search.screen import sim_args
    from kvledger.analyses.serving.rejections import count_rejections
    from kvledger.analyses.serving.sim_ledgers import prepare_run

    if cand.disagg or hasattr(spec.synthetic, "prepare_setup"):
        return None
    args = replace(sim_args(spec, cand), rate=1.0, rate_scale=None, concurrency=None)  # lengths do not vary with it
    rej = count_rejections(prepare_run(args, spec.synthetic))
    if rej is None or not rej.blocks(spec.target):
        return None
    return {**entry, "status": "rejected", "reason": SLO_NOT_MET,
            "detail": "decided before simulating: " + rej.text(spec.target), "refused_requests": rej.to_dict(),
            "decided_by_bound": {"attainment_upper": rej.attainment_ceiling, "target": spec.target,
                                 "margin": spec.target - rej.attainment_ceiling}}


def refused_everywhere(rejected: list[dict[str, Any]], target: float) -> str | None:
    """Why nothing won when every entry of ``rejected`` held to the SLO was rejected for the requests its engine
    refuses (max_model_len, not the SLO or the GPUs, is then the cause): those refusals and their fix, in words
    (``Rejections.text``); else None."""
    from kvledger.analyses.serving.rejections import Rejections

    held = [e for e in rejected if e.get("reason") in SLO_REASONS]
    if not held or not all(e.get("refused_requests") for e in held):
        return None
    got = {k: v for k, v in held[0]["refused_requests"].items() if k != "attainment_ceiling"}  # a property
    return Rejections(**got).text(target)
