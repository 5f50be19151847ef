"""KV usage read off a vLLM log's metrics lines: when the pool counts as full, the usage at a V0 preemption warning,
and the tokens a running request holds at saturation (``doctor``'s capacity diagnosis)."""

from __future__ import annotations

import statistics

from kvledger.evidence.vllm_log import PreemptionEvent, StatsSample, VllmLog

__all__ = ["KV_FULL_PCT", "ROOM_PCT", "queue_clause", "usage_at", "tokens_per_running_request", "full_with_running",
           "impossible_per_request", "ran_out_of_memory"]

KV_FULL_PCT = 90.0
"""GPU KV cache usage (%) at or above which the pool counts as full. The metrics line is a sample taken every
5 s (V0) or 10 s (V1) and V1 frees a preempted request's blocks at once, so the usage printed next to a
preemption reads below the instant it happened; 90% keeps those cases while a pool at, say, 60% cannot have
been short of blocks for long."""

ROOM_PCT = 50.0
"""Peak GPU KV cache usage (%) below which a DP engine had room all along: half its pool never in use (dp_balance,
dp_aggregated). vLLM's own balancer (0.27 on) takes the same 50 % as the usage up to which a queue is transient and
costs no penalty."""


def usage_at(event: PreemptionEvent, stats: tuple[StatsSample, ...]) -> float | None:
    """GPU KV usage (%) at a V0 preemption: the trend of the two samples before it extended to its time, or the
    nearest sample's value; the later sample counts too when it is higher."""
    before = [s for s in stats if s.line_no < event.line_no and s.gpu_kv_usage_pct is not None]
    after = [s for s in stats if s.line_no > event.line_no and s.gpu_kv_usage_pct is not None]
    est = None
    if len(before) >= 2 and None not in (before[-1].t_s, before[-2].t_s, event.t_s) and before[-1].t_s > before[-2].t_s:
        a, b = before[-2], before[-1]
        slope = (b.gpu_kv_usage_pct - a.gpu_kv_usage_pct) / (b.t_s - a.t_s)
        est = min(100.0, max(0.0, b.gpu_kv_usage_pct + slope * (event.t_s - b.t_s)))
    elif before:
        est = before[-1].gpu_kv_usage_pct
    if after and (est is None or after[0].gpu_kv_usage_pct > est):
        est = after[0].gpu_kv_usage_pct
    return est


def tokens_per_running_request(stats: tuple[StatsSample, ...], usable_blocks: int, block_size: int) -> float | None:
    """Median KV tokens held per running request in the full intervals: usage × usable_blocks × block_size ÷ running,
    tokens.
    A lower bound on a request's final size (they are still growing)."""
    xs = [s.gpu_kv_usage_pct / 100 * usable_blocks * block_size / s.running_reqs for s in full_with_running(stats)]
    return statistics.median(xs) if xs else None


def full_with_running(stats: tuple[StatsSample, ...]) -> list[StatsSample]:
    """The metrics lines at or above ``KV_FULL_PCT`` of KV usage with requests running."""
    return [s for s in stats if s.gpu_kv_usage_pct is not None and s.gpu_kv_usage_pct >= KV_FULL_PCT
            and s.running_reqs > 0]


def impossible_per_request(per_req: float | None, max_model_len: int, block_size: int) -> str | None:
    """Why the tokens per running request read off the metrics cannot be (None when they can): no request holds more
    than max_model_len tokens, in whole blocks (one more block of slack for tokens scheduled ahead)."""
    most = (-(-max_model_len // block_size) + 1) * block_size
    if per_req is None or per_req <= most:
        return None
    return (f"The log's figures are inconsistent: they give each running request ≈{per_req:,.0f} tokens (usage × slots "
            f"÷ running), more than max_model_len {max_model_len:,} allows (at most {most:,} in whole blocks), so the "
            "metrics and the start-up figures cannot both be this server's (edited, garbled, or another run's "
            "start-up): no remedy is sized from it. Check that the metrics and the start-up come from the same run.")


def ran_out_of_memory(log: VllmLog) -> int | None:
    """The first line of a CUDA out-of-memory failure the log shows (not one a request survived), else None."""
    return next((f.line_no for f in log.failures if f.kind == "cuda_oom" and f.line_no not in log.excused_failures),
                None)


def queue_clause(full: list[StatsSample]) -> str:
    """The preemptions' effect on TTFT, from the metrics lines that report them: the most requests waiting there (and
    its line), or "" where none waited. A waiting request has no first token yet, and vLLM V1 puts a preempted request
    back at the head of the waiting queue, ahead of them, to recompute (0.19 ``v1/core/sched/scheduler.py::
    _preempt_request``: ``self.waiting.prepend_request``), so the queue, not the step time, is what a TTFT percentile
    measures while it lasts."""
    top = max(full, key=lambda s: s.waiting_reqs, default=None)
    if top is None or top.waiting_reqs <= 0:
        return ""
    return (f" and up to {top.waiting_reqs:,} requests waiting for a first token (line {top.line_no}; behind the "
            "preempted ones, which vLLM puts back at the head of the queue to recompute: that wait is the TTFT that "
            "grows)")

