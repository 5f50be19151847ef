"""Reader for NVIDIA AIPerf exports: ``profile_export.jsonl`` (per request) and ``profile_export_aiperf.json``/``.csv``
(aggregates).

Two layouts exist (docs/formats.md §3). The early one (Oct 2025, the saved sample) puts the
request start in ``metadata.timestamp_ns``, the phase in ``credit_phase`` and uses short
tags (``ttft``, ``ttst``); its aggregate JSON wraps metrics in ``"records"``. The current
one uses ``metadata.request_start_ns``/``request_end_ns``, ``benchmark_phase`` and long
tags (``time_to_first_token``), with aggregate tags at the top level. Each metric carries
its unit (ms for latencies, ns for timestamps). Warmup records are dropped; a record with
no phase counts as profiling. AIPerf's ``inter_token_latency`` is canonical TPOT.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from kvledger.errors import FormatError
from kvledger.evidence._io import Document, amount, count, latency_s, load_document, to_seconds
from kvledger.evidence._metric_table import parse_csv_tables, scalar, summaries_from_tags
from kvledger.evidence.aggregate import AggregateRun
from kvledger.records import RequestRecord, RunMetadata, RunRecords

__all__ = ["FORMAT_JSONL", "FORMAT_JSON", "FORMAT_CSV", "read_jsonl", "read_json", "read_csv", "input_config_metadata"]

FORMAT_JSONL, FORMAT_JSON, FORMAT_CSV = "aiperf-jsonl", "aiperf-json", "aiperf-csv"


def read_jsonl(doc: Document) -> list[RunRecords]:
    """One RunRecords from ``profile_export.jsonl`` (warmup dropped), times shifted to the first request start.

    Model and concurrency come from a sibling ``*_aiperf.json`` when present.

    Raises:
        FormatError: a line that is not a record, missing start time, bad units, NaN or negative latency.
    """
    kept, dropped = [], 0
    for rec, line in zip(doc.value, doc.line_numbers or []):
        if not isinstance(rec, dict) or not isinstance(rec.get("metadata"), dict):
            raise FormatError(doc.path, "not an AIPerf record (expected an object with 'metadata')", f"line {line}")
        md = rec["metadata"]
        phase = md.get("benchmark_phase", md.get("credit_phase"))
        if phase is not None and str(phase).lower() == "warmup":
            dropped += 1
            continue
        start = md.get("request_start_ns", md.get("timestamp_ns"))
        if not isinstance(start, int) or start < 0:
            raise FormatError(doc.path, f"missing or invalid request start time {start!r} (ns)", f"line {line}: "
                f"metadata.request_start_ns")
        kept.append((rec, line, start))
    if not kept:
        raise FormatError(doc.path,
                          "no profiling records (the file holds only warmup records)" if dropped else "no records")
    origin = min(s for _, _, s in kept)
    records = [_record(doc.path, rec, line, (start - origin) / 1e9) for rec, line, start in kept]
    meta = RunMetadata(source=doc.path, source_format=FORMAT_JSONL, time_origin=f"first request start, Unix epoch "
                                                                                f"{origin} ns")
    meta.definitions += [
        "arrival = request start (metadata.request_start_ns or early-layout timestamp_ns) − the first start, s",
        "TTFT from time_to_first_token/ttft; chunk times = arrival + TTFT + cumulative inter_chunk_latency; E2E from "
        "request_latency",
        "output tokens = output_sequence_length (reasoning tokens included; output_token_count excludes them)",
        "duration = last finish − first request start (AIPerf benchmark_duration)",
    ]
    if dropped:
        meta.definitions.append(f"{dropped} warmup records dropped")
    sibling = _sibling_aggregate(doc.path)
    if sibling is not None:
        _merge_input_config(meta, sibling)
    return [RunRecords(records, meta)]


def _metric(path: str, metrics: dict[str, Any], tags: tuple[str, ...], where: str) -> Any:
    for tag in tags:
        m = metrics.get(tag)
        if isinstance(m, dict) and "value" in m:
            return m["value"], m.get("unit"), f"{where}metrics.{tag}"
    return None


def _record(path: str, rec: dict[str, Any], line: int, arrival: float) -> RequestRecord:
    md, metrics, where = rec["metadata"], rec.get("metrics") or {}, f"line {line}: "
    rid = str(md.get("x_request_id") or md.get("session_num") or line)
    n_in = _tokens(path, metrics, ("input_sequence_length", "error_isl"), where)
    err = rec.get("error")
    if err or md.get("was_cancelled"):
        text = _error_text(err) if err else "cancelled"
        return RequestRecord(rid, arrival, n_in, 0, None, None, None, error=text)
    ttft = _metric(path, metrics, ("time_to_first_token", "ttft"), where)
    e2e = _metric(path, metrics, ("request_latency",), where)
    if ttft is None or e2e is None:
        raise FormatError(path, "successful record without time_to_first_token/ttft or request_latency", f"line {line}")
    ttft_s = latency_s(path, ttft[0], ttft[2], to_seconds(path, ttft[1], ttft[2] + ".unit"))
    e2e_s = latency_s(path, e2e[0], e2e[2], to_seconds(path, e2e[1], e2e[2] + ".unit"))
    n_out = _tokens(path, metrics, ("output_sequence_length", "output_token_count"), where)
    chunks = None
    icl = _metric(path, metrics, ("inter_chunk_latency",), where)
    if icl is not None and isinstance(icl[0], list):
        scale = to_seconds(path, icl[1], icl[2] + ".unit")
        gaps = [latency_s(path, g, f"{icl[2]}.value[{j}]", scale) for j, g in enumerate(icl[0])]
        chunks = arrival + ttft_s + np.concatenate(([0.0], np.cumsum(gaps)))
    return RequestRecord(rid, arrival, n_in, n_out, arrival + ttft_s, arrival + e2e_s, chunks)


def _tokens(path: str, metrics: dict[str, Any], tags: tuple[str, ...], where: str) -> int:
    for tag in tags:
        m = metrics.get(tag)
        if isinstance(m, dict) and "value" in m:
            return count(path, m["value"], f"{where}metrics.{tag}.value") or 0
    return 0


def _error_text(err: Any) -> str:
    if isinstance(err, dict):
        return " ".join(str(err[k]) for k in ("code", "type", "message") if err.get(k) is not None) or "error"
    return str(err)


def _sibling_aggregate(jsonl_path: str) -> dict[str, Any] | None:
    p = Path(jsonl_path)
    candidate = p.with_name(p.name[: -len(".jsonl")] + "_aiperf.json") if p.name.endswith(".jsonl") else None
    if candidate is None or not candidate.is_file():
        return None
    try:
        doc = load_document(candidate)
    except FormatError:
        return None
    return doc.value if doc.kind == "json" and isinstance(doc.value, dict) else None


def input_config_metadata(cfg: Any) -> dict[str, Any]:
    """Model, concurrency and request rate from AIPerf/GenAI-Perf ``input_config`` (missing parts omitted)."""
    out: dict[str, Any] = {}
    if not isinstance(cfg, dict):
        return out
    endpoint = cfg.get("endpoint") if isinstance(cfg.get("endpoint"), dict) else {}
    names = endpoint.get("model_names") or cfg.get("model_names") or cfg.get("model")
    if isinstance(names, list) and names:
        out["model"] = str(names[0])
    elif isinstance(names, str):
        out["model"] = names
    loadgen = cfg.get("loadgen") if isinstance(cfg.get("loadgen"), dict) else cfg
    if isinstance(loadgen.get("concurrency"), int):
        out["concurrency"] = loadgen["concurrency"]
    if isinstance(loadgen.get("request_rate"), (int, float)) and not isinstance(loadgen.get("request_rate"), bool):
        out["request_rate"] = float(loadgen["request_rate"])
    return out


def _merge_input_config(meta: RunMetadata, agg: dict[str, Any]) -> None:
    info = input_config_metadata(agg.get("input_config"))
    meta.model = meta.model or info.get("model")
    meta.concurrency = meta.concurrency or info.get("concurrency")
    meta.request_rate = meta.request_rate or info.get("request_rate")
    telemetry = agg.get("telemetry_data")
    if isinstance(telemetry, dict) and meta.hardware is None:
        names = {v.get("gpu_name") for v in _walk_dicts(telemetry) if isinstance(v.get("gpu_name"), str)}
        if len(names) == 1:
            meta.hardware = names.pop()


def _walk_dicts(d: dict[str, Any]):
    yield d
    for v in d.values():
        if isinstance(v, dict):
            yield from _walk_dicts(v)


def read_json(doc: Document) -> list[AggregateRun]:
    """One AggregateRun from ``profile_export_aiperf.json`` (early ``records`` wrapper or current top-level tags)."""
    obj = doc.value
    table, where = (obj["records"], "records.") if isinstance(obj.get("records"), dict) else (obj, "")
    meta = RunMetadata(source=doc.path, source_format=FORMAT_JSON)
    _merge_input_config(meta, obj)
    if where:
        meta.definitions.append("early AIPerf aggregate layout: metrics under 'records'")
    return [_aggregate(doc.path, table, where, meta)]


def read_csv(doc: Document) -> list[AggregateRun]:
    """One AggregateRun from ``profile_export_aiperf.csv`` (or GenAI-Perf's CSV of the same shape)."""
    table = parse_csv_tables(doc.path, doc.value)
    meta = RunMetadata(source=doc.path, source_format=FORMAT_CSV)
    meta.definitions.append("CSV display names mapped to AIPerf tags; units from the parentheses")
    return [_aggregate(doc.path, table, "", meta)]


def _aggregate(path: str, table: dict[str, Any], where: str, meta: RunMetadata) -> AggregateRun:
    ok = scalar(path, table, "request_count", where)
    err = scalar(path, table, "error_request_count", where)
    agg = AggregateRun(meta)
    agg.num_completed = count(path, ok[0], f"{where}request_count") if ok else None
    agg.num_failed = count(path, err[0], f"{where}error_request_count") if err else 0
    dur = scalar(path, table, "benchmark_duration", where)
    if dur is not None:
        agg.duration_s = latency_s(
            path,
            dur[0],
            f"{where}benchmark_duration",
            to_seconds(path, dur[1] or "sec", f"{where}benchmark_duration.unit"),
        )
        meta.duration_s = agg.duration_s
    for attr, tag in (("total_input_tokens", "total_isl"), ("total_output_tokens", "total_osl")):
        v = scalar(path, table, tag, where)
        setattr(agg, attr, count(path, v[0], f"{where}{tag}") if v else None)
    agg.metrics = summaries_from_tags(path, table, where, agg.num_completed)
    meta.definitions.append("AIPerf request_count counts successful requests; error_request_count the failed ones")
    good = scalar(path, table, "goodput", where)
    if good is not None:
        n_good = scalar(path, table, "good_request_count", where)
        agg.tool_goodput = {"req_per_s": amount(path, good[0], f"{where}goodput"), "field": "goodput",
                            "good_requests": count(path, n_good[0], f"{where}good_request_count") if n_good else None,
                            "slo": "not stored in the file (aiperf --goodput)"}
    return agg
