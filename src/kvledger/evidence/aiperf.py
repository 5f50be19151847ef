"""Reader for NVIDIA AIPerf exports: ``profile_export.jsonl`` (per request) and ``profile_export_aiperf.json``/``.csv``
(aggregates).

Two layouts exist (docs/formats.md §3). The early one (Oct 2025, the saved sample) puts the
request start in ``metadata.timestamp_ns``, the phase in ``credit_phase`` and uses short
tags (``ttft``, ``ttst``); its aggregate JSON wraps metrics in ``"records"``. The current
one uses ``metadata.request_start_ns``/``request_end_ns``, ``benchmark_phase`` and long
tags (``time_to_first_token``), with aggregate tags at the top level. Each metric carries
its unit (ms for latencies, ns for timestamps). Warmup records are dropped; a record with
no phase counts as profiling. AIPerf's ``inter_token_latency`` is canonical TPOT. AIPerf 0.11's ``input_config``
states the model as ``models.items[].name``, the load per phase (``phases[]``, warmup ones ``exclude_from_results``)
and the SLO its goodput used (``slos``: metric tag → limit in that metric's unit), read into ``tool_goodput``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from kvledger.errors import FormatError
from kvledger.evidence._io import Document, amount, count, latency_s, load_document, to_seconds
from kvledger.evidence._metric_table import parse_csv_tables, scalar, summaries_from_tags
from kvledger.evidence.aggregate import AggregateRun
from kvledger.evidence.aiperf_sessions import multi_turn_extra, session_extra
from kvledger.evidence.metadata_keys import CAP_FIELD_KEY
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
    meta = RunMetadata(doc.path, FORMAT_JSONL, time_origin=f"first request start, Unix epoch {origin} ns",
                       extra=session_extra([rec["metadata"] for rec, _, _ in kept]))  # a multi-turn run's sessions
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
    """Model, concurrency and request rate from AIPerf/GenAI-Perf ``input_config`` (missing parts omitted).

    AIPerf 0.11 states them as ``models.items[].name`` and ``phases[]`` (the ones not ``exclude_from_results``, i.e.
    not warmup: ``concurrency``, ``rate``); earlier layouts as ``endpoint.model_names`` and ``loadgen``.
    """
    out: dict[str, Any] = {}
    if not isinstance(cfg, dict):
        return out
    endpoint = cfg.get("endpoint") if isinstance(cfg.get("endpoint"), dict) else {}
    names = endpoint.get("model_names") or cfg.get("model_names") or cfg.get("model") or _model_items(cfg)
    if isinstance(names, list) and names:
        out["model"] = str(names[0])
    elif isinstance(names, str):
        out["model"] = names
    loadgen = cfg.get("loadgen") if isinstance(cfg.get("loadgen"), dict) else cfg
    if isinstance(loadgen.get("concurrency"), int):
        out["concurrency"] = loadgen["concurrency"]
    if _real(loadgen.get("request_rate")):
        out["request_rate"] = float(loadgen["request_rate"])
    phases = [p for p in cfg.get("phases") or [] if isinstance(p, dict) and not p.get("exclude_from_results")]
    for key, field, ok in (("concurrency", "concurrency", _whole), ("request_rate", "rate", _real)):
        stated = {p[field] for p in phases if ok(p.get(field))}
        if key not in out and len(stated) == 1:  # one value over the measured phases; several: no single figure
            out[key] = stated.pop() if key == "concurrency" else float(stated.pop())
    return out


def _model_items(cfg: dict[str, Any]) -> list[str] | None:
    """AIPerf 0.11 ``models: {items: [{name}]}`` → the names."""
    models = cfg.get("models")
    items = models.get("items") if isinstance(models, dict) else None
    names = [m["name"] for m in items or [] if isinstance(m, dict) and isinstance(m.get("name"), str)]
    return names or None


def _whole(v: Any) -> bool:
    """A stated concurrency: a whole number ≥ 1 (0 and booleans state none)."""
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1


def _real(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _merge_input_config(meta: RunMetadata, agg: dict[str, Any]) -> None:
    info = input_config_metadata(agg.get("input_config"))
    meta.model = meta.model or info.get("model")
    meta.concurrency = meta.concurrency or info.get("concurrency")
    meta.request_rate = meta.request_rate or info.get("request_rate")
    if meta.concurrency is None:  # a sweep's run states its level in run_info.variation_values too
        meta.concurrency = _variation_concurrency(agg.get("run_info"))
    if meta.concurrency is not None:  # AIPerf's name for its cap (--concurrency), not vLLM's max_concurrency
        meta.extra.setdefault(CAP_FIELD_KEY, "concurrency")
    telemetry = agg.get("telemetry_data")
    if isinstance(telemetry, dict) and meta.hardware is None:
        names = {v.get("gpu_name") for v in _walk_dicts(telemetry) if isinstance(v.get("gpu_name"), str)}
        if len(names) == 1:
            meta.hardware = names.pop()


def _variation_concurrency(run_info: Any) -> int | None:
    """The one concurrency an AIPerf sweep run states in ``run_info.variation_values`` (``phases.NAME.concurrency``)."""
    values = run_info.get("variation_values") if isinstance(run_info, dict) else None
    if not isinstance(values, dict):
        return None
    stated = {v for k, v in values.items() if str(k).endswith(".concurrency") and _whole(v)}
    return stated.pop() if len(stated) == 1 else None


def _walk_dicts(d: dict[str, Any]):
    yield d
    for v in d.values():
        if isinstance(v, dict):
            yield from _walk_dicts(v)


_RUN_FIELDS = ("aiperf_version", "schema_version", "benchmark_id", "start_time", "end_time", "was_cancelled")


def read_json(doc: Document) -> list[AggregateRun]:
    """One AggregateRun from ``profile_export_aiperf.json`` (early ``records`` wrapper or current top-level tags)."""
    obj = doc.value
    table, where = (obj["records"], "records.") if isinstance(obj.get("records"), dict) else (obj, "")
    meta = RunMetadata(source=doc.path, source_format=FORMAT_JSON)
    _merge_input_config(meta, obj)
    if where:
        meta.definitions.append("early AIPerf aggregate layout: metrics under 'records'")
    # the run's own fields beside the metrics (aiperf src/aiperf/exporters/metrics_json_exporter.py: JsonExportData;
    # start_time/end_time are datetime.fromtimestamp, the client's local time, no zone)
    meta.extra.update({k: obj[k] for k in _RUN_FIELDS if isinstance(obj.get(k), (str, bool))}, **multi_turn_extra(obj))
    if obj.get("was_cancelled") is True:
        meta.definitions.append("was_cancelled true: AIPerf was stopped before the run ended; its figures cover the "
                                "part that ran")
    agg = _aggregate(doc.path, table, where, meta)
    cfg = obj.get("input_config")
    if agg.tool_goodput is not None and isinstance(cfg, dict) and isinstance(cfg.get("slos"), dict) and cfg["slos"]:
        meta.definitions.append(_goodput_slo(doc.path, agg.tool_goodput, cfg["slos"], table, where))
    return [agg]


#: AIPerf SLO tag → the kvledger --slo key with the same per-request definition (inter_token_latency is TPOT)
_SLO_KEYS = {"time_to_first_token": "ttft", "ttft": "ttft", "inter_token_latency": "tpot", "request_latency": "e2e"}


def _goodput_slo(path: str, tool: dict[str, Any], slos: dict[str, Any], table: dict[str, Any], where: str) -> str:
    """The SLO AIPerf's goodput used (``input_config.slos``: tag → limit in the tag's unit) put into ``tool`` (the
    run's ``tool_goodput``); returns the note saying it."""
    parts, kv = [], []
    for tag, limit in slos.items():
        value = amount(path, limit, f"input_config.slos.{tag}")
        entry = table.get(tag)
        unit = entry.get("unit") if isinstance(entry, dict) and isinstance(entry.get("unit"), str) else None
        if tag in _SLO_KEYS:  # a latency: good when at most the limit (in ms unless the file gives the tag a unit)
            unit = unit or "ms"
            parts.append(f"{tag} ≤ {value:g} {unit}")
            kv.append(f"{_SLO_KEYS[tag]}={value * to_seconds(path, unit, f'{where}{tag}.unit') * 1e3:g}ms")
        else:  # e.g. a throughput floor: AIPerf knows which way it points; kvledger has no such SLO key
            parts.append(f"{tag}: {value:g}{' ' + unit if unit else ''}")
    tool["slo"] = {str(k): v for k, v in slos.items()}
    tool["slo_source"] = "input_config.slos (AIPerf --goodput; limits in each metric's unit)"
    text = f"AIPerf's goodput used input_config.slos: {', '.join(parts)}"
    if len(kv) == len(parts):
        tool["slo_as_kvledger"] = ",".join(kv)
        text += f" (as kvledger --slo: {','.join(kv)}" + (
            "; AIPerf's inter_token_latency is per-request TPOT)" if "inter_token_latency" in slos else ")")
    return text


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
