"""Reader for ray-project/llmperf ``*_individual_responses.json`` and ``*_summary.json``.

Units are seconds (``*_s``; docs/formats.md §5). Traps: llmperf's ``inter_token_latency_s``
is (Σ of all gaps, TTFT included) ÷ chunks ≈ e2e/tokens, **not** TPOT, so TPOT is
recomputed as (e2e − ttft)/(output − 1); the files store no send times, so requests are
placed on their own clocks (arrival 0) and the run duration comes from the summary
(``results_num_completed_requests ÷ results_num_completed_requests_per_min × 60``, the
same window llmperf divides by). A request with ``error_code`` set failed, even when
its latencies look fine (the leaderboard's −100 "Output too few tokens").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kvledger.errors import FormatError
from kvledger.evidence._io import Document, amount, count, latency_s, load_document, positive
from kvledger.evidence.aggregate import AggregateRun, MetricSummary
from kvledger.evidence.metadata_keys import CAP_FIELD_KEY
from kvledger.records import RequestRecord, RunMetadata, RunRecords

__all__ = ["FORMAT_INDIVIDUAL", "FORMAT_SUMMARY", "read_individual", "read_summary", "summary_duration_s",
           "is_summary_collection", "bench_digest_hint"]

FORMAT_INDIVIDUAL, FORMAT_SUMMARY = "llmperf-individual", "llmperf-summary"
_SUMMARY_METRICS = {
    "ttft_s": ("ttft", "time to first token per request, s"),
    "end_to_end_latency_s": ("e2e", "end-to-end latency per request, s"),
}
_QUANTILES = (25, 50, 75, 90, 95, 99)


def read_individual(doc: Document) -> list[RunRecords]:
    """One RunRecords; model, concurrency and duration from the sibling summary when found.

    Raises:
        FormatError: a non-object entry, NaN, negative latency, e2e shorter than ttft.
    """
    records = [_one(doc.path, r, i) for i, r in enumerate(doc.value)]
    meta = RunMetadata(source=doc.path, source_format=FORMAT_INDIVIDUAL, time_origin="each request's own send time "
        "(llmperf stores no send times)")
    meta.extra["shared_clock"] = False
    meta.definitions += [
        "TPOT recomputed as (end_to_end_latency_s − ttft_s)/(number_output_tokens − 1); llmperf's "
        "inter_token_latency_s (≈ e2e/tokens, TTFT included) is not used",
        "no per-chunk times: ITL SLOs are unavailable",
        "requests carry no send times: each sits on its own clock (arrival 0), so the duration must come from the "
        "summary",
    ]
    summary = _sibling_summary(doc.path)
    if summary is not None:
        s_path, s_obj = summary
        meta.model = s_obj.get("model") if isinstance(s_obj.get("model"), str) else None
        meta.concurrency = count(s_path, s_obj.get("num_concurrent_requests"), "num_concurrent_requests",
                                 allow_none=True)
        if meta.concurrency is not None:
            meta.extra[CAP_FIELD_KEY] = "num_concurrent_requests"
        meta.duration_s = summary_duration_s(s_path, s_obj)
        meta.extra["summary_file"] = s_path
        meta.definitions.append(f"duration from {Path(s_path).name}: completed ÷ completed-per-minute × 60")
    else:
        meta.definitions.append("no sibling *_summary.json found: duration unknown, so goodput and throughput per "
                                "second cannot be given (attainment can)")
    return [RunRecords(records, meta)]


def _one(path: str, r: Any, i: int) -> RequestRecord:
    where = f"[{i}]."
    if not isinstance(r, dict):
        raise FormatError(path, "expected one object per request", f"[{i}]")
    code = r.get("error_code")
    err = None if code is None else f"error_code {code}: {r.get('error_msg') or ''}".strip()
    n_in = count(path, r.get("number_input_tokens") or 0, f"{where}number_input_tokens")
    n_out = count(path, r.get("number_output_tokens") or 0, f"{where}number_output_tokens")
    ttft = latency_s(path, r.get("ttft_s"), f"{where}ttft_s", allow_none=err is not None)
    e2e = latency_s(path, r.get("end_to_end_latency_s"), f"{where}end_to_end_latency_s", allow_none=err is not None)
    if err is not None:
        return RequestRecord(str(i), 0.0, n_in, n_out, None, e2e, None, error=err)
    if e2e < ttft:
        raise FormatError(path, f"end_to_end_latency_s {e2e} is shorter than ttft_s {ttft}",
                          f"{where}end_to_end_latency_s")
    return RequestRecord(str(i), 0.0, n_in, n_out, ttft, e2e, None)


def _sibling_summary(path: str) -> tuple[str, dict[str, Any]] | None:
    p = Path(path)
    for old in ("individual_responses", "individual"):
        if old in p.name:
            cand = p.with_name(p.name[::-1].replace(old[::-1], "summary"[::-1], 1)[::-1])
            if cand.is_file():
                try:
                    doc = load_document(cand)
                except FormatError:
                    return None
                return (str(cand), doc.value) if doc.kind == "json" and isinstance(doc.value, dict) else None
    return None


def summary_duration_s(path: str, obj: dict[str, Any], where: str = "") -> float | None:
    """Run duration, s: completed ÷ (completed per minute) × 60 (llmperf divides both by end − start)."""
    n = count(path, obj.get("results_num_completed_requests"), f"{where}results_num_completed_requests",
              allow_none=True)
    if n == 0:
        return None
    per_min = positive(path, obj.get("results_num_completed_requests_per_min"),
                       f"{where}results_num_completed_requests_per_min", allow_none=True)
    if n is None or per_min is None:
        return None
    return n / per_min * 60.0


def read_summary(doc: Document) -> list[AggregateRun]:
    """One AggregateRun from the flattened ``results_*`` keys (quantiles p25–p99, min, max, mean), seconds; or, for a
    collection of summaries keyed by concurrency (llmperf-bench's ``*_results.json``: ``{"1": summary, "2": ...}``,
    one llmperf run per ``--num-concurrent-requests``), one per key in file order, a closed-loop sweep.

    Raises:
        FormatError: a key that is not the concurrency its summary states, or any one summary's damaged values.
    """
    obj, path = doc.value, doc.path
    if not is_summary_collection(obj):
        return [_summary(path, obj, "")]
    runs = []
    for key, one in obj.items():
        run = _summary(path, one, f"{key}.")
        if run.metadata.concurrency is not None and str(run.metadata.concurrency) != str(key).strip():
            raise FormatError(path, f"the summary under key {key!r} states num_concurrent_requests "
                                    f"{run.metadata.concurrency}: a collection keyed by concurrency needs the two to "
                                    "agree", f"{key}.num_concurrent_requests")
        run.metadata.extra["run_label"] = f"num_concurrent_requests {key}"
        runs.append(run)
    return runs


def is_summary_collection(obj: Any) -> bool:
    """Whether ``obj`` is a JSON object of llmperf summaries keyed by concurrency (llmperf-bench ``*_results.json``)."""
    return (isinstance(obj, dict) and bool(obj) and all(isinstance(v, dict) for v in obj.values())
            and all(any(str(k).startswith("results_ttft_s_") for k in v) for v in obj.values()))


def bench_digest_hint(path: str | Path, value: Any) -> str | None:
    """For llmperf-bench's ``*_summary.json`` digest (per concurrency only the mean TTFT, output throughput and
    llmperf's inter-token latency: no request count, duration or lengths to replay), what to give instead: the
    ``*_results.json`` it writes beside it, the full llmperf summaries; None for any other file."""
    if not (isinstance(value, dict) and value and all(isinstance(v, dict) and "first-time-to-token_mean_in_ms" in v
                                                      for v in value.values())):
        return None
    p = Path(path)
    beside = p.with_name(p.name.replace("_summary.json", "_results.json")) if p.name.endswith("_summary.json") else None
    there = f" ({beside.name} is beside it)" if beside is not None and beside.is_file() else ""
    return ("This is llmperf-bench's digest (mean TTFT and throughput per concurrency, no request counts or "
            f"durations): give the *_results.json it wrote beside it{there}, its full llmperf summaries, read as a "
            "sweep over concurrency")


def _summary(path: str, obj: dict[str, Any], where: str) -> AggregateRun:
    """One summary's AggregateRun; ``where`` prefixes the field names errors give (its key in a collection)."""
    meta = RunMetadata(source=path, source_format=FORMAT_SUMMARY)
    meta.model = obj.get("model") if isinstance(obj.get("model"), str) else None
    meta.concurrency = count(path, obj.get("num_concurrent_requests"), f"{where}num_concurrent_requests",
                             allow_none=True)
    meta.duration_s = summary_duration_s(path, obj, where)
    meta.extra = {k: obj[k] for k in ("name", "version", "timestamp", "framework", "api",
                                      "results_error_code_frequency") if k in obj}
    if meta.concurrency is not None:  # llmperf's name for its cap (--num-concurrent-requests)
        meta.extra[CAP_FIELD_KEY] = "num_concurrent_requests"
    agg = AggregateRun(meta, duration_s=meta.duration_s)
    _counts(path, obj, where, agg)
    for key, (canon, note) in _SUMMARY_METRICS.items():
        m = MetricSummary(canon, "request", count=agg.num_completed, source_field=f"results_{key}_*", note=note)
        for q in _QUANTILES:
            v = obj.get(f"results_{key}_quantiles_p{q}")
            if v is not None:
                m.percentiles_s[float(q)] = latency_s(path, v, f"{where}results_{key}_quantiles_p{q}")
        for stat, attr in (("mean", "mean_s"), ("min", "min_s"), ("max", "max_s")):
            v = obj.get(f"results_{key}_{stat}")
            if v is not None:
                setattr(m, attr, latency_s(path, v, f"{where}results_{key}_{stat}"))
        if m.percentiles_s or m.max_s is not None:
            agg.metrics[canon] = m
    meta.definitions += [
        "duration = results_num_completed_requests ÷ results_num_completed_requests_per_min × 60",
        "llmperf's inter_token_latency_s (≈ e2e/tokens, TTFT included) is not TPOT and bounds no TPOT SLO",
    ]
    _token_totals(path, obj, agg, where)
    return agg


def _counts(path: str, obj: dict[str, Any], where: str, agg: AggregateRun) -> None:
    """Completed and failed requests (``results_number_errors``, else started − completed)."""
    agg.num_completed = count(path, obj.get("results_num_completed_requests"),
                              f"{where}results_num_completed_requests", allow_none=True)
    started = count(path, obj.get("results_num_requests_started"), f"{where}results_num_requests_started",
                    allow_none=True)
    errors = count(path, obj.get("results_number_errors"), f"{where}results_number_errors", allow_none=True)
    if started is not None and agg.num_completed is not None and agg.num_completed > started:
        raise FormatError(path, f"results_num_completed_requests {agg.num_completed} exceeds "
                                f"results_num_requests_started {started}",
                          f"{where}results_num_completed_requests")
    agg.num_failed = (
        errors
        if errors is not None
        else (started - agg.num_completed if started and agg.num_completed is not None else None)
    )


def _token_totals(path: str, obj: dict[str, Any], agg: AggregateRun, where: str = "") -> None:
    """Input and output token totals over the completed requests: ``results_number_*_tokens_mean`` × completed
    (llmperf takes these means over the requests without an error, the same ones its output throughput sums; the
    top-level ``mean_*_tokens`` are the requested lengths, not measured ones)."""
    n = agg.num_completed
    if not n:
        return
    said = []
    for attr, kind in (("total_input_tokens", "input"), ("total_output_tokens", "output")):
        key = f"results_number_{kind}_tokens_mean"
        mean = amount(path, obj.get(key), f"{where}{key}", allow_none=True)
        if mean is not None:
            setattr(agg, attr, int(round(mean * n)))
            said.append(key)
    if said:
        agg.metadata.definitions.append(f"token totals = {' and '.join(said)} × results_num_completed_requests "
                                        "(means over the completed requests)")
