"""Data-parallel engines logged with ``--aggregate-engine-logging``: one ``N Engines Aggregated:`` metrics line per
interval instead of one per engine, so the per-engine split ``dp_balance`` compares is not printed.

What such a line holds (``v1/metrics/loggers.py::AggregatedLoggingStatLogger``, read in 0.11.1, 0.19.0, 0.26.0 and
0.33.0; the logger is new in 0.11.1): ``aggregate_scheduler_stats`` sums the engines' running and waiting requests and
averages their KV cache usage (the sum of each engine's ``kv_cache_usage`` divided by the number of engines);
``Preemptions`` sums every engine's preemptions over the interval (``record`` → ``_track_iteration_stats``). So at a
line whose mean usage is U over N engines, the emptiest engine held at most U % and the fullest at least U %; every
engine held at least N·U − (N − 1)·100 %.

A V1 engine preempts only when its scheduler cannot allocate KV blocks for a running request (its pool is out of free
blocks), so a line with preemptions means some engine ran out of blocks during that interval; with the mean below
``ROOM_PCT`` (50 %) at the interval's end, at least one engine then had half its pool free. The usage is a snapshot at
the end of the interval and the preemptions a count over it, so this is a strong hint of uneven routing, not proof of
the same instant: the per-engine lines (without ``--aggregate-engine-logging``) show it.
"""

from __future__ import annotations

from kvledger.analyses.doctor.kv_usage import KV_FULL_PCT, ROOM_PCT
from kvledger.analyses.doctor.types import Finding
from kvledger.evidence.vllm_log import StatsSample

__all__ = ["aggregated_rule", "all_full_mean_pct", "aggregated_dp_finding"]


def all_full_mean_pct(engines: int) -> float:
    """The least mean KV usage, %, at which every one of ``engines`` pools of the same size held at least
    ``KV_FULL_PCT``: N·U − (N − 1)·100 ≥ 90 ⇔ U ≥ 100 − (100 − 90) / N (95% at N = 2, 98.75% at N = 8)."""
    return 100.0 - (100.0 - KV_FULL_PCT) / engines


def aggregated_rule(engines: int) -> str:
    """The rule's words for a log whose aggregated lines state ``engines`` engines."""
    floor = max(0.0, engines * KV_FULL_PCT - (engines - 1) * 100.0)
    return ("'N Engines Aggregated:' metrics lines (--aggregate-engine-logging; v1/metrics/loggers.py "
            "AggregatedLoggingStatLogger: running and waiting summed over the N engines, GPU KV usage their mean, "
            f"preemptions summed): a line with preemptions while the mean usage is below {ROOM_PCT:.0f}% → one engine "
            "ran out of KV blocks in that interval while another had half its pool free (the emptiest engine is at or "
            "below the mean); at a mean U every engine holds at least N·U − (N − 1)·100%, so over these "
            f"{engines} engines only a mean ≥ 100 − (100 − {KV_FULL_PCT:.0f}) / {engines} = "
            f"{all_full_mean_pct(engines):.2f}% with preemptions means every engine was at least "
            f"{KV_FULL_PCT:.0f}% full (capacity, not routing); a mean of {KV_FULL_PCT:.0f}% bounds each engine only "
            f"at ≥ {engines} × {KV_FULL_PCT:.0f} − {engines - 1} × 100 = {floor:.0f}%")


def _evidence(s: StatsSample, what: str) -> dict:
    return {"line": s.line_no, "time": s.time_text, "what": what,
            "value": f"mean {s.gpu_kv_usage_pct:.1f}% KV over {s.engines_aggregated} engines; {s.running_reqs:,} "
                     f"running, {s.waiting_reqs:,} waiting, {s.preemptions or 0:,} preemptions (summed)"}


def aggregated_dp_finding(stats: tuple[StatsSample, ...]) -> Finding | None:
    """The dp_balance finding read from aggregated lines; None where the log has none."""
    agg = [s for s in stats if s.engine == "aggregated" and s.gpu_kv_usage_pct is not None and s.engines_aggregated]
    if not agg:
        return None
    n = max(s.engines_aggregated or 0 for s in agg)
    peak = max(agg, key=lambda s: s.gpu_kv_usage_pct or 0.0)
    u = peak.gpu_kv_usage_pct or 0.0
    floor = max(0.0, n * u - (n - 1) * 100.0)
    total = sum(s.preemptions or 0 for s in agg)
    seen = (f"{n} DP engines logged aggregated (--aggregate-engine-logging): mean GPU KV usage up to {u:.1f}% (line "
            f"{peak.line_no}; every engine then held at least {floor:.1f}% and the fullest at least {u:.1f}%), "
            f"{total:,} preemptions summed over {len(agg):,} lines")
    uneven = [s for s in agg if (s.preemptions or 0) > 0 and (s.gpu_kv_usage_pct or 0.0) < ROOM_PCT]
    evidence = (_evidence(peak, "highest mean GPU KV usage (its line)"),)
    if not uneven:
        return Finding("dp_balance", False, "aggregated_no_sign", f"{seen}; no line shows preemptions while the mean "
                       f"usage is below {ROOM_PCT:.0f}%{_preempting_reading(agg, n)}. The per-engine split is not "
                       "printed: drop --aggregate-engine-logging to compare the engines", aggregated_rule(n), evidence)
    s = max(uneven, key=lambda x: (x.preemptions or 0, -(x.gpu_kv_usage_pct or 0.0)))
    msg = (f"{seen}. Line {s.line_no}: {s.preemptions:,} preemptions in the interval while the {n} engines' mean KV "
           f"usage at its end was {s.gpu_kv_usage_pct:.1f}% (below {ROOM_PCT:.0f}%): an engine ran out of KV blocks "
           f"while at least one held {s.gpu_kv_usage_pct:.1f}% or less, so the traffic is likely split unevenly "
           f"({len(uneven):,} such line(s)). The aggregated lines do not say which engine: drop "
           "--aggregate-engine-logging to see one line per engine, which the dp_balance finding then compares")
    return Finding("dp_balance", True, "aggregated_preempting_below_half", msg, aggregated_rule(n),
                   (*evidence, _evidence(s, "preemptions with the mean usage below half")))


def _preempting_reading(agg: list[StatsSample], n: int) -> str:
    """What the preempting line of the highest mean says of the ``n`` engines: all at least ``KV_FULL_PCT`` full
    (capacity) at a mean ≥ ``all_full_mean_pct(n)``, else only its lower bound N·U − (N − 1)·100; "" without one."""
    pre = [s for s in agg if (s.preemptions or 0) > 0]
    if not pre:
        return ""
    s = max(pre, key=lambda x: (x.gpu_kv_usage_pct or 0.0, -x.line_no))
    u, full = s.gpu_kv_usage_pct or 0.0, all_full_mean_pct(n)
    floor = max(0.0, n * u - (n - 1) * 100.0)
    head = (f"; line {s.line_no}'s {s.preemptions:,} preemptions came at a mean of {u:.1f}%, so every engine held at "
            f"least {n} × {u:.1f} − {n - 1} × 100 = {floor:.1f}%")
    if u >= full:
        return f"{head} (a mean ≥ {full:.2f}%: every engine at least {KV_FULL_PCT:.0f}% full): capacity, not routing"
    return (f"{head}, below {KV_FULL_PCT:.0f}% (that takes a mean ≥ 100 − (100 − {KV_FULL_PCT:.0f}) / {n} = "
            f"{full:.2f}% over {n} engines), so one full pool beside one with room is not ruled out")
