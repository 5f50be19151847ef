"""Data-parallel engines in one log: one engine's KV cache full while another's has room.

With ``--data-parallel-size`` N the API server prints one metrics line per engine each interval (``Engine 000: …``,
``Engine 001: …``: ``v1/metrics/loggers.py::LoggingStatLogger``, one per engine index, unless
``--aggregate-engine-logging`` merges them into ``N Engines Aggregated: …``). Each engine has its own KV pool, so an
engine preempting and queueing next to one with half its pool unused is a routing problem before a capacity one: the
capacity finding reads the busy engine, and this finding says what the idle one could take and what vLLM's own DP
load balancer does about it in the release the rules are of (``v1/engine/core_client.py``,
``DPLBAsyncMPClient.get_core_engine_for_request``, fed the per-engine counts the DP coordinator publishes every
100 ms, ``v1/engine/coordinator.py``):

- 0.10.0 (read; earlier V1 DP releases not read): the engine with the fewest waiting, then the fewest running requests
  (``[waiting, running]`` compared as a list);
- 0.10.1–0.26.0 (read in 0.10.1, 0.10.2, 0.11.0, 0.12.0, 0.19.0, 0.20.0, 0.24.0–0.26.0): the lowest
  ``waiting * 4 + running``;
- 0.27.0 on (read in 0.27.0, 0.28.0, 0.29.0, 0.33.0): ``max(client_count * in-flight, waiting + running)`` plus
  ``waiting * 6.0 * max(0, kv_cache_usage - 0.5)``, a penalty on a queue behind a KV cache more than half full.

Up to 0.26 the balancer counts requests, not their tokens: an engine whose requests are longer fills its cache at the
same count, and the imbalance stays. From 0.27 a queue on a full engine steers new requests to the other, so one that
stays means requests vLLM's balancer does not place: an external router (``--data-parallel-external-lb`` or
``--data-parallel-hybrid-lb``, where the engines publish no load stats) or requests pinned by ``data_parallel_rank``.
"""

from __future__ import annotations

from typing import Any

from kvledger.accounting.vllm_rules import parse_version
from kvledger.analyses.doctor.context import DoctorContext
from kvledger.analyses.doctor.dp_aggregated import aggregated_dp_finding
from kvledger.analyses.doctor.kv_usage import KV_FULL_PCT, ROOM_PCT
from kvledger.analyses.doctor.types import Finding
from kvledger.evidence.vllm_log import StatsSample

__all__ = ["ROOM_PCT", "diagnose_dp_balance", "engine_peaks"]

_RULE = (f"data-parallel engines (one 'Engine NNN:' metrics line each): one engine at ≥ {KV_FULL_PCT:.0f}% GPU KV "
         f"usage with requests waiting or preempted while another never reaches {ROOM_PCT:.0f}% → the traffic is split "
         "unevenly; vLLM's DP load balancer by release: v1/engine/core_client.py DPLBAsyncMPClient "
         "get_core_engine_for_request (0.10.0 fewest [waiting, running]; 0.10.1–0.26 waiting × 4 + running; 0.27 on "
         "waiting + running plus waiting × 6 × (KV usage − 0.5))")


def engine_peaks(stats: tuple[StatsSample, ...]) -> dict[str, dict[str, Any]]:
    """Per engine index ("000", "001", …): its peak KV usage (%) and that line, its peak running and waiting requests,
    its preemptions summed over the intervals, and its line count. Aggregated and V0 lines are left out."""
    out: dict[str, dict[str, Any]] = {}
    for s in stats:
        if s.engine in (None, "aggregated") or s.gpu_kv_usage_pct is None:
            continue
        e = out.setdefault(s.engine, {"peak_kv_pct": -1.0, "line": s.line_no, "time": s.time_text, "running": 0,
                                      "waiting": 0, "preemptions": 0, "lines": 0})
        if s.gpu_kv_usage_pct > e["peak_kv_pct"]:
            e.update(peak_kv_pct=s.gpu_kv_usage_pct, line=s.line_no, time=s.time_text,
                     at_peak=(s.waiting_reqs, s.running_reqs))
        e["running"], e["waiting"] = max(e["running"], s.running_reqs), max(e["waiting"], s.waiting_reqs)
        e["preemptions"] += s.preemptions or 0
        e["lines"] += 1
    return dict(sorted(out.items()))


def _balancer(version: str, busy: dict[str, Any], idle: dict[str, Any]) -> str:
    """What vLLM's DP balancer of ``version`` does with these two engines: ``busy`` at its peak line against the most
    waiting and running requests ``idle`` ever printed (the highest score it can have had)."""
    v = parse_version(version)
    if v >= (0, 27, 0):
        return (f"vLLM {version}'s DP load balancer adds waiting × 6 × (KV usage − 0.5) to a busy engine's score "
                "(core_client.py DPLBAsyncMPClient), so a queue behind a full KV cache steers new requests to the "
                "other engine: an imbalance that stays means requests it does not place — an external router "
                "(--data-parallel-external-lb / --data-parallel-hybrid-lb, where the engines publish no load) or "
                "requests pinned with data_parallel_rank")
    score = "the fewest waiting, then running requests" if v < (0, 10, 1) else "the lowest waiting × 4 + running"
    (bw, br), (iw, ir) = busy["at_peak"], (idle["waiting"], idle["running"])
    if ((bw, br) > (iw, ir)) if v < (0, 10, 1) else bw * 4 + br > iw * 4 + ir:
        counts = (f"[{bw:,}, {br:,}] against at most [{iw:,}, {ir:,}]" if v < (0, 10, 1) else
                  f"{bw:,} × 4 + {br:,} = {bw * 4 + br:,} against at most {iw:,} × 4 + {ir:,} = {iw * 4 + ir:,}")
        return (f"vLLM {version}'s DP load balancer sends each request to the engine with {score} (core_client.py "
                f"DPLBAsyncMPClient): by the counts printed ({counts}) it would have sent new requests to the idle "
                "engine, so these requests were placed past it: an external router (--data-parallel-external-lb / "
                "--data-parallel-hybrid-lb, where the engines publish no load) or requests pinned with "
                "data_parallel_rank; route by load there")
    return (f"vLLM {version}'s DP load balancer sends each request to the engine with {score} (core_client.py "
            "DPLBAsyncMPClient, from the counts the DP coordinator publishes every 100 ms): it counts requests, not "
            "their tokens, so an engine given longer requests fills its KV cache at the same count and stays full "
            "(0.27 adds a KV-usage penalty on waiting requests); an external router "
            "(--data-parallel-external-lb / --data-parallel-hybrid-lb) or data_parallel_rank pins route past it")


def diagnose_dp_balance(ctx: DoctorContext) -> Finding | None:
    """The finding for a log with two or more engines' metrics lines, or with aggregated DP lines
    (``dp_aggregated.py``); None for one engine."""
    peaks = engine_peaks(ctx.log.stats)
    if len(peaks) < 2:
        return aggregated_dp_finding(ctx.log.stats)  # None without 'N Engines Aggregated:' lines either
    evidence = tuple({"line": p["line"], "time": p["time"], "what": f"Engine {e}: peak GPU KV cache usage (its line); "
                      "most running and waiting, preemptions summed over its lines",
                      "value": f"{p['peak_kv_pct']:.1f}% KV; {p['running']:,} running, {p['waiting']:,} waiting; "
                               f"{p['preemptions']:,} preemptions over {p['lines']:,} lines"}
                     for e, p in peaks.items())
    full = [e for e, p in peaks.items() if p["peak_kv_pct"] >= KV_FULL_PCT and (p["waiting"] or p["preemptions"])]
    room = [e for e, p in peaks.items() if p["peak_kv_pct"] < ROOM_PCT]
    shown = "; ".join(f"Engine {e} {p['peak_kv_pct']:.1f}% (line {p['line']}), {p['running']:,} running, "
                      f"{p['waiting']:,} waiting, {p['preemptions']:,} preemptions" for e, p in peaks.items())
    if not full or not room:
        return Finding("dp_balance", False, "balanced", f"{len(peaks)} DP engines, peak GPU KV usage, most requests "
                       f"running and waiting, preemptions: {shown}; no engine full while another has room", _RULE,
                       evidence)
    busy, idle = full[0], min(room, key=lambda e: peaks[e]["peak_kv_pct"])
    b, i = peaks[busy], peaks[idle]
    msg = (f"{len(peaks)} DP engines split the traffic unevenly: Engine {busy} reached {b['peak_kv_pct']:.1f}% GPU KV "
           f"usage (line {b['line']}) with up to {b['waiting']:,} requests waiting and {b['preemptions']:,} "
           f"preemptions, while Engine {idle} never passed {i['peak_kv_pct']:.1f}% (line {i['line']}; "
           f"{i['waiting']:,} waiting at most). The capacity finding reads the busy engine; the idle one's unused "
           f"blocks are the cheaper fix (per engine: {shown}). {_balancer(ctx.settings['engine_version'], b, i)}")
    return Finding("dp_balance", True, "one_engine_full_another_idle", msg, _RULE, evidence)
