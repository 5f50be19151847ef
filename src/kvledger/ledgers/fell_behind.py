"""The open-loop check that a run's server served the load it was offered: a rate sweep's top stages are sent faster
than the engine completes requests (inference-perf's kubecon NA 2025 baseline, stage 6: 183.38 req/s requested, 103.08
completed per second, vLLM 0.11.0 on one H100), and a run like that measures the server at its throughput ceiling with a
queue that grew all run, whatever share of its requests met the SLO.

Rule: open loop (a finite request rate R stated), completed requests per second (the run's throughput, completed ÷
first arrival → last finish) below :data:`FELL_BEHIND_SHARE` × what a server that keeps up completes per second.

The drain. A server that keeps up finishes each request one E2E after it arrives: its N requests arrive over N ÷ R s
and the last finishes about one typical E2E e later, so it completes N ÷ (N ÷ R + e) = R ÷ (1 + R·e ÷ N) req/s, not R.
Where the run has per-request times, e is the median E2E of the first quarter of its arrivals (by arrival time): those
arrived before a queue could build, so a run that fell behind does not buy itself an allowance with the waits its own
queue added (with the whole run's median, a server offered ρ × its capacity would pass up to ρ ≈ 1.25: its median
request waits half the final backlog). The share judged is served ÷ that rate = served × (N ÷ R + e) ÷ N. For a long
run (R·e ≪ N) it is served ÷ R, the plain share. From aggregates (no per-request times) e = 0: the plain share.
:data:`FELL_BEHIND_SHARE`'s 10 % then covers the rest: Poisson arrivals that span more than N ÷ R, and the E2E of the
last requests above the typical one; ``calibration/sweep_bands.py`` takes the same 0.9 of the requested rate as the
line below which a stage was saturated.

LLMServingSim's vLLM 0.19.0 runs (300 ShareGPT requests, Poisson 10 req/s, forced output lengths): Qwen3-30B-A3B on two
RTX PRO 6000 served 300 in 64.02 s, 4.69 req/s (46.9 % of 10), but its first quarter's median E2E is 36.58 s and its
median TTFT stayed 0.11 → 3.9 s from the first to the last quarter: (30 + 36.58) ÷ 64.02 = 104 %, kept up. Llama-3.1-8B
on one RTX 4090 served 300 in 183.57 s with e = 36.65 s: (30 + 36.65) ÷ 183.57 = 36 %, fell behind (its median TTFT
grew 1.2 → 120.7 s).
"""

from __future__ import annotations

from typing import Any

__all__ = ["FELL_BEHIND_RULE", "FELL_BEHIND_SHARE", "fell_behind", "kept_up_rate", "kept_up_words", "typical_e2e_s"]

FELL_BEHIND_SHARE = 0.9
"""Completed req/s below this share of what a server that keeps up completes (the offered rate less the drain of a
typical E2E after the last arrival, module docstring): the server fell behind its load."""

FELL_BEHIND_RULE = (f"fell behind when an open-loop run's completed req/s is below {FELL_BEHIND_SHARE:.0%} of what a "
                    "server keeping up completes: N requests offered at R req/s arrive over N/R s and the last "
                    "finishes one typical E2E e later (the first quarter's median E2E; 0 from aggregates), so "
                    "N/(N/R + e) req/s")


def typical_e2e_s(records: Any) -> float | None:
    """The median E2E (finish − arrival, s) of the first quarter of a run's completed requests by arrival time (at
    least one): the E2E before a queue could build (module docstring). None without a completed request."""
    import numpy as np

    done = sorted((r for r in records if r.ok and r.finish_s is not None), key=lambda r: r.arrival_s)
    if not done:
        return None
    first = done[:max(1, len(done) // 4)]
    return float(np.median([r.finish_s - r.arrival_s for r in first]))


def kept_up_rate(rate_req_per_s: float, num_requests: int | None = None, drain_s: float | None = None) -> float:
    """What a server keeping up with ``num_requests`` offered at ``rate_req_per_s`` completes per second when the last
    finishes a typical E2E ``drain_s`` (s) after the last arrival: N ÷ (N ÷ R + e), req/s (module docstring); R itself
    without the drain or the count (aggregates)."""
    if not (drain_s and num_requests):
        return rate_req_per_s
    return num_requests / (num_requests / rate_req_per_s + drain_s)


def kept_up_words(rate_req_per_s: float, num_requests: int | None = None, drain_s: float | None = None) -> str:
    """What ``kept_up_rate`` is, in words: "offered", or the rate with its N, arrival span and drain."""
    if not (drain_s and num_requests):
        return "offered"
    return (f"the {kept_up_rate(rate_req_per_s, num_requests, drain_s):,.4g} req/s a server keeping up completes: "
            f"{num_requests:,} requests over {num_requests / rate_req_per_s:,.4g} s of arrivals, then a typical E2E "
            f"of {drain_s:,.4g} s")


def fell_behind(rate_req_per_s: float | None, served_req_per_s: float | None, *, num_requests: int | None = None,
                drain_s: float | None = None) -> dict[str, Any] | None:
    """The failed check, as ``capacity_basis``'s check rows are, when an open-loop run (``rate_req_per_s`` offered,
    req/s; ``num_requests`` of them) completed fewer than :data:`FELL_BEHIND_SHARE` of what a server keeping up
    completes per second (``served_req_per_s``; ``kept_up_rate``), allowing the drain of a typical E2E (``drain_s``,
    s; ``typical_e2e_s``) after the last arrival; None when it kept up, or when either rate is unknown (a closed loop,
    a ramped rate, no duration). Without ``drain_s`` or ``num_requests`` the plain share served ÷ offered."""
    if not rate_req_per_s or served_req_per_s is None:
        return None
    share = served_req_per_s / kept_up_rate(rate_req_per_s, num_requests, drain_s)
    if share >= FELL_BEHIND_SHARE:
        return None
    return {"check": "served the offered load (open loop)", "value": share, "limit": FELL_BEHIND_SHARE,
            "passed": False,
            "text": (f"offered {rate_req_per_s:,.4g} req/s, served {served_req_per_s:,.4g} completed req/s "
                     f"({share:.1%} of {kept_up_words(rate_req_per_s, num_requests, drain_s)}, below "
                     f"{FELL_BEHIND_SHARE:.0%}): the server fell behind its load, so its queue grew all run and the "
                     "run measured its throughput ceiling")}
