"""``doctor`` on a log holding several start-ups: each earlier one's preemptions and the settings it ran with against
the last one's, so that "did my restart fix it?" is answered in the log's own lines (the verdict itself is the last
one's).
"""

from __future__ import annotations

from typing import Any

from kvledger.evidence.vllm_log import VllmLog

__all__ = ["COMPARED_SETTINGS", "preemptions_of", "changed_settings", "restart_lines"]

# the engine settings compared between start-ups (StartupFacts names): those that move KV capacity, the step or the
# model; a setting one start-up does not print is not compared (unknown, not changed)
COMPARED_SETTINGS = ("model", "vllm_version", "quantization", "dtype", "tensor_parallel_size",
                     "pipeline_parallel_size", "data_parallel_size", "gpu_memory_utilization", "kv_cache_dtype",
                     "block_size", "max_model_len", "max_num_seqs", "max_num_batched_tokens", "enable_prefix_caching",
                     "enable_chunked_prefill", "max_cudagraph_capture_size")


def preemptions_of(lg: VllmLog) -> dict[str, Any]:
    """One start-up's preemptions: their count (V1: the metrics lines' "Preemptions: N" summed; V0: the warning lines,
    or the largest total_num_cumulative_preemption printed), the lines that report them, and the highest GPU KV usage
    those lines print (%; None where they print none)."""
    v1 = [s for s in lg.stats if (s.preemptions or 0) > 0]
    v0 = [e for e in lg.preemptions if e.kind == "preempted"]
    count = sum(s.preemptions for s in v1) + max([len(v0)] + [e.cumulative for e in v0 if e.cumulative is not None])
    lines = sorted([s.line_no for s in v1] + [e.line_no for e in v0])
    peak = max((s for s in v1 if s.gpu_kv_usage_pct is not None), key=lambda s: s.gpu_kv_usage_pct, default=None)
    return {"count": count, "report_lines": len(lines), "first_line": lines[0] if lines else None,
            "last_line": lines[-1] if lines else None,
            "peak_gpu_kv_usage_pct": peak.gpu_kv_usage_pct if peak else None,
            "peak_line": peak.line_no if peak else None, "metrics_lines": len(lg.stats)}


def _value(lg: VllmLog, name: str) -> tuple[Any, int | None]:
    return getattr(lg.startup, name), lg.startup.lines.get(name)


def changed_settings(lg: VllmLog, last: VllmLog) -> list[dict[str, Any]]:
    """The settings of ``COMPARED_SETTINGS`` that ``lg`` printed otherwise than ``last``, each with both lines."""
    out = []
    for name in COMPARED_SETTINGS:
        (was, was_line), (now, now_line) = _value(lg, name), _value(last, name)
        if was is not None and now is not None and was != now:
            out.append({"setting": name, "was": was, "was_line": was_line, "now": now, "now_line": now_line})
    return out


def _at(line: int | None) -> str:
    return f" (line {line:,})" if line else ""


def _changes(rows: list[dict[str, Any]], lines: bool) -> str:
    if lines:
        return ", ".join(f"{c['setting']} {c['was']}{_at(c['was_line'])} → {c['now']}{_at(c['now_line'])}"
                         for c in rows)
    return ", ".join(f"{c['setting']} {c['was']}→{c['now']}" for c in rows)


def _preempted(p: dict[str, Any]) -> str:
    if not p["count"]:
        return f"no preemptions in {p['metrics_lines']:,} metrics line(s)"
    peak = p["peak_gpu_kv_usage_pct"]
    at = f", GPU KV usage up to {peak:.1f}% (line {p['peak_line']:,})" if peak is not None else ""
    span = (f"line {p['first_line']:,}" if p["first_line"] == p["last_line"]
            else f"lines {p['first_line']:,}–{p['last_line']:,}")
    return f"{p['count']:,} preemption(s) in {p['report_lines']:,} line(s) ({span}){at}"


def _since(logs: list[VllmLog]) -> str | None:
    """Whether the settings changed between start-ups, and the preemptions before and after the latest change."""
    last, earlier = logs[-1], logs[:-1]
    differ = [i for i, lg in enumerate(earlier) if changed_settings(lg, last)]
    before = sum(preemptions_of(lg)["count"] for lg in earlier)
    if not differ:
        if not before:
            return None
        return (f"did a restart fix it? no setting compared changed between the start-ups, so no restart added "
                f"capacity: {before:,} preemption(s) before the last start-up, {_preempted(preemptions_of(last))} in "
                "it (fewer preemptions there follow the traffic, not a fix)")
    k = differ[-1] + 1  # the start-up (0-based) from which the settings are the last one's
    after = [preemptions_of(lg) for lg in logs[k:]]
    n, metrics = sum(p["count"] for p in after), sum(p["metrics_lines"] for p in after)
    top = max((s for lg in logs[k:] for s in lg.stats if s.gpu_kv_usage_pct is not None),
              key=lambda s: s.gpu_kv_usage_pct, default=None)
    peak = "" if top is None else f" (peak GPU KV usage {top.gpu_kv_usage_pct:.1f}%, line {top.line_no:,})"
    then = f"{n:,} preemption(s) since{peak}" if n else f"no preemptions since{peak}"
    was = sum(preemptions_of(lg)["count"] for lg in logs[:k])
    who = f"#{k + 1}" if k + 1 == len(logs) else f"#{k + 1}–#{len(logs)}"
    (a, a_line), (b, b_line) = _value(logs[k - 1], "kv_cache_tokens"), _value(logs[k], "kv_cache_tokens")
    pool = (f" (GPU KV cache size {a:,} → {b:,} tokens, lines {a_line:,} and {b_line:,})" if a and b and a != b
            and a_line and b_line else "")
    return (f"did a restart fix it? start-up #{k + 1} (from line {logs[k].first_line:,}) changed "
            f"{_changes(changed_settings(logs[k - 1], logs[k]), False)} against #{k}{pool}: {then}, in {metrics:,} "
            f"metrics line(s) of start-up(s) {who}, against {was:,} preemption(s) before"
            + ("" if metrics else " (no metrics line since: no traffic seen, so nothing is shown fixed)"))


def restart_lines(log: VllmLog, outcomes: list[str]) -> list[str]:
    """For a log holding several start-ups (none for one): a line per earlier start-up (what became of it, one of
    ``outcomes`` in the order of ``log.earlier``; its preemptions; the settings it ran with otherwise than the last
    one), and whether the latest change of settings stopped them."""
    if not log.earlier:
        return []
    out = []
    for i, (lg, became) in enumerate(zip(log.earlier, outcomes), start=1):
        moved = changed_settings(lg, log)
        differs = (f"; settings otherwise than the last start-up: {_changes(moved, True)}" if moved
                   else "; no setting compared differs from the last start-up's (where both print it)")
        out.append(f"earlier start-up #{i} (lines {lg.first_line:,}–{lg.last_line:,}, {became.replace('_', ' ')}): "
                   f"{_preempted(preemptions_of(lg))}{differs}")
    since = _since([*log.earlier, log])
    return out + ([since] if since else [])
