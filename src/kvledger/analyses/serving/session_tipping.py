"""A session run's KV tipping point: the turn rate at which its KV pool filled, and what the preemptions and the
evicted prefixes then cost, read from its turns before and after the first preemption.

Sessions keep their earlier turns in the prefix cache while their users think. Under a load near capacity the
queue grows, the running batch takes the pool, the engine preempts (recompute) and the cache evicts the thinking
sessions' turns, so the next turns recompute them: more prefill, a longer queue — latency jumps at nearly the same
arrival rate. A run that stops before that point (fewer sessions, or the same ones spread over more replicas) never
shows it, which is why two runs of the same per-replica rate can differ many times over.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

__all__ = ["Tipping", "tipping", "tipping_note", "COLLAPSE_RATIO", "RATE_WINDOW_S"]

COLLAPSE_RATIO = 3.0
"""kvledger rule: a tipping point is named when the turns sent after the first preemption waited ≥ 3× as long for their
first token (mean TTFT) as those sent before it."""
RATE_WINDOW_S = 60.0
"""The window before the first preemption whose turns give the rate that tipped the pool, s."""


@dataclass(frozen=True, slots=True)
class Tipping:
    """The turns before / after the first preemption (at ``t_s`` after the first arrival).

    Attributes:
        rate_per_replica: turns sent per second per replica in the ``RATE_WINDOW_S`` before it.
        hit_before / hit_after: cached ÷ prompt tokens of the turns sent before / after it.
        ttft_before_s / ttft_after_s: mean TTFT of those turns, s.
    """

    t_s: float
    rate_per_replica: float
    hit_before: float
    hit_after: float
    ttft_before_s: float
    ttft_after_s: float

    @property
    def collapsed(self) -> bool:
        return self.ttft_after_s >= COLLAPSE_RATIO * self.ttft_before_s > 0


def _share(num: float, den: float) -> float:
    return num / den if den else math.nan


def tipping(turns: list[tuple[float, float, int, int]], first_preemption_s: float, replicas: int = 1
            ) -> Tipping | None:
    """The ``Tipping`` of ``turns`` — (arrival, TTFT, prompt tokens, cached tokens) each, s and tokens — split at
    ``first_preemption_s`` (s after the first arrival); None when either side holds no turn."""
    if not turns:
        return None
    t0 = min(a for a, *_ in turns)
    cut = t0 + first_preemption_s
    before = [x for x in turns if x[0] < cut]
    after = [x for x in turns if x[0] >= cut]
    if not before or not after:
        return None
    window = min(RATE_WINDOW_S, first_preemption_s)
    recent = sum(1 for a, *_ in before if a >= cut - window)
    rate = _share(recent, window * replicas)
    return Tipping(first_preemption_s, rate,
                   _share(sum(c for *_, c in before), sum(p for *_, p, _ in before)),
                   _share(sum(c for *_, c in after), sum(p for *_, p, _ in after)),
                   sum(t for _, t, *_ in before) / len(before), sum(t for _, t, *_ in after) / len(after))


def tipping_note(setup: Any, result: Any, facts: dict[str, Any] | None) -> list[str]:
    """simulate's sentence naming a session run's KV tipping point (``facts``: ``preemption_why.preemption_facts``);
    [] for another workload, a run without preemptions, or one whose latency did not jump at them."""
    if not setup.workload_info.get("mode", "").startswith("sessions") or not facts or not facts.get("first"):
        return []
    turns = [(r.arrival_s, r.first_token_s - r.arrival_s, r.num_prompt_tokens, r.num_cached_tokens or 0)
             for r in result.records.records if r.first_token_s is not None]
    tip = tipping(turns, facts["first"]["t_s"], setup.replicas)
    if tip is None or not tip.collapsed:
        return []
    per = "per replica " if setup.replicas > 1 else ""
    return [f"sessions: a KV tipping point: turns arrived at {tip.rate_per_replica:.3g}/s {per}in the "
            f"{RATE_WINDOW_S:.0f} s before the first preemption (t = {tip.t_s:,.0f} s after the first arrival); from "
            f"then the KV pool was full: {facts['num_preemptions']:,} preemptions recomputed running turns and the "
            f"prefix cache evicted the thinking sessions' earlier turns (prefix hit rate {tip.hit_before:.1%} of the "
            f"prompt tokens of the turns sent before, {tip.hit_after:.1%} after), so TTFT mean went from "
            f"{tip.ttft_before_s:.3g} s to {tip.ttft_after_s:.3g} s. A run that holds this rate for longer collapses "
            "the same way; one that ends sooner (fewer --sessions, or the same sessions over more replicas) stops "
            "short of it and shows the light-load latency"]
