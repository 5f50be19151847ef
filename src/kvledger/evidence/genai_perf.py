"""Reader for GenAI-Perf (triton-inference-server/perf_analyzer): raw ``profile_export.json`` and
``profile_export_genai_perf.json``.

The raw export (docs/formats.md §3) holds ``experiments[]``, each ``{experiment: {mode, value},
requests: [{timestamp, response_timestamps, response_outputs}]}`` with timestamps in
**ns**; every latency is derived from them. The aggregate export has one top-level key
per metric with ``{unit, avg, p..}`` (the shape AIPerf later copied); its
``inter_token_latency`` is canonical TPOT. GenAI-Perf counts equality with the SLO as
good (bad only when value > SLO).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from kvledger.errors import FormatError
from kvledger.evidence._io import Document, amount, count, latency_s, number
from kvledger.evidence._metric_table import scalar, summaries_from_tags
from kvledger.evidence.aggregate import AggregateRun
from kvledger.evidence.aiperf import input_config_metadata
from kvledger.evidence.metadata_keys import CAP_FIELD_KEY
from kvledger.records import RequestRecord, RunMetadata, RunRecords

__all__ = ["FORMAT_RAW", "FORMAT_JSON", "read_raw", "read_json"]

FORMAT_RAW, FORMAT_JSON = "genai-perf-raw", "genai-perf-json"


def read_raw(doc: Document) -> list[RunRecords]:
    """One RunRecords per experiment (a concurrency or request-rate level).

    Raises:
        FormatError: malformed experiments/requests, NaN or timestamps going backwards.
    """
    exps = doc.value.get("experiments")
    if not isinstance(exps, list) or not exps:
        raise FormatError(doc.path, "'experiments' must be a non-empty list", "experiments")
    return [_experiment(doc.path, e, i, doc.value) for i, e in enumerate(exps)]


def _experiment(path: str, exp: Any, i: int, top: dict[str, Any]) -> RunRecords:
    where = f"experiments[{i}]"
    if not isinstance(exp, dict) or not isinstance(exp.get("requests"), list):
        raise FormatError(path, "expected {experiment: {...}, requests: [...]}", where)
    info = exp.get("experiment") if isinstance(exp.get("experiment"), dict) else {}
    mode, value = info.get("mode"), info.get("value")
    reqs = exp["requests"]
    starts = [r.get("timestamp") if isinstance(r, dict) else None for r in reqs]
    if not reqs or any(not isinstance(s, int) or s < 0 for s in starts):
        raise FormatError(path, "every request needs an integer 'timestamp' (ns)", f"{where}.requests")
    origin = min(starts)
    records, approx = [], 0
    for j, r in enumerate(reqs):
        rec, was_approx = _request(path, r, f"{where}.requests[{j}]", str(j), (r["timestamp"] - origin) / 1e9,
                                   r["timestamp"])
        records.append(rec)
        approx += was_approx
    meta = RunMetadata(source=path, source_format=FORMAT_RAW, time_origin=f"first request timestamp {origin} ns")
    meta.extra = {"run_label": f"{mode}={value}", "service_kind": top.get("service_kind"),
                  "endpoint": top.get("endpoint")}
    if mode == "concurrency" and isinstance(value, int):
        meta.concurrency = value
    elif mode == "request_rate" and isinstance(value, (int, float)):
        meta.request_rate = float(value)
    meta.definitions += [
        "timestamps are ns; first token = first response carrying text (role-only and empty chunks skipped), finish = "
        "last such response",
        "input tokens unknown without the tokenizer GenAI-Perf used: counted as 0 unless a response reports "
        "usage.prompt_tokens",
    ]
    if approx:
        meta.definitions.append(f"{approx} requests have no usage block: output tokens = number of text-carrying "
                                f"chunks (approximation)")
    return RunRecords(records, meta)


def _request(path: str, r: dict[str, Any], where: str, rid: str, arrival: float, t0_ns: int) -> tuple[RequestRecord,
    bool]:
    ts, outs = r.get("response_timestamps") or [], r.get("response_outputs") or []
    if not isinstance(ts, list) or not isinstance(outs, list):
        raise FormatError(path, "response_timestamps and response_outputs must be lists", where)
    content_times, usage = [], {}
    for k, t in enumerate(ts):
        out = outs[k] if k < len(outs) else None
        has_text, u = _inspect(out)
        usage.update(u)
        if has_text:
            delta = t - t0_ns if isinstance(t, int) else number(path, t, f"{where}.response_timestamps[{k}]") - t0_ns
            content_times.append(latency_s(path, delta, f"{where}.response_timestamps[{k}] − timestamp", 1e-9))
    if not content_times:
        return RequestRecord(rid, arrival, int(usage.get("prompt_tokens", 0)), 0,
                             error="no response carrying text"), False
    chunks = arrival + np.array(content_times)
    if np.any(np.diff(chunks) < 0):
        raise FormatError(path, "response_timestamps go backwards", f"{where}.response_timestamps")
    n_out = usage.get("completion_tokens")
    approx = n_out is None
    n_out = len(content_times) if approx else count(path, n_out, f"{where}.usage.completion_tokens")
    n_in = count(path, usage.get("prompt_tokens", 0), f"{where}.usage.prompt_tokens")
    return RequestRecord(rid, arrival, n_in, n_out, float(chunks[0]), float(chunks[-1]), chunks), approx


def _inspect(out: Any) -> tuple[bool, dict[str, Any]]:
    """(carries text?, usage dict) for one response output: OpenAI SSE 'data:' chunk, Triton text_output, or other."""
    if isinstance(out, dict) and "response" in out:
        raw = str(out["response"]).strip()
        if raw.startswith("data:"):
            raw = raw[5:].strip()
        if not raw or raw == "[DONE]":
            return False, {}
        try:
            obj = json.loads(raw)
        except (json.JSONDecodeError, RecursionError):
            return bool(raw), {}
        if not isinstance(obj, dict):  # a body that is JSON but not an OpenAI chunk ("5", "[…]"): text of its own
            return bool(raw), {}
        usage = obj.get("usage") if isinstance(obj.get("usage"), dict) else {}
        text = ""
        choices = obj.get("choices")
        for ch in choices if isinstance(choices, list) else []:
            if isinstance(ch, dict):
                delta = ch.get("delta") if isinstance(ch.get("delta"), dict) else {}
                text += str(delta.get("content") or ch.get("text") or "")
        return bool(text), usage
    if isinstance(out, dict):
        return any(isinstance(v, str) and v.strip() for v in out.values()), {}
    return bool(out), {}


def read_json(doc: Document) -> list[AggregateRun]:
    """One AggregateRun from ``profile_export_genai_perf.json`` (top-level metric tags with units)."""
    obj = doc.value
    meta = RunMetadata(source=doc.path, source_format=FORMAT_JSON)
    info = input_config_metadata(obj.get("input_config"))
    meta.model, meta.concurrency, meta.request_rate = (
        info.get("model"),
        info.get("concurrency"),
        info.get("request_rate"),
    )
    if meta.concurrency is not None:  # GenAI-Perf's name for its cap (--concurrency)
        meta.extra[CAP_FIELD_KEY] = "concurrency"
    agg = AggregateRun(meta)
    agg.metrics = summaries_from_tags(doc.path, obj, "", None)
    n = agg.metrics["e2e"].count if "e2e" in agg.metrics else None
    agg.num_completed = n
    meta.definitions.append("GenAI-Perf's aggregate export states no request or error counts: completed = "
                            "request_latency count; failures unknown")
    thr = scalar(doc.path, obj, "request_throughput", "")
    if thr is not None and n:
        agg.duration_s = meta.duration_s = n / thr[0] if thr[0] > 0 else None
        meta.definitions.append("duration = completed ÷ request_throughput")
    good = scalar(doc.path, obj, "request_goodput", "")
    if good is not None:
        agg.tool_goodput = {"req_per_s": amount(doc.path, good[0], "request_goodput"), "field": "request_goodput",
                            "slo": "not stored in the file (genai-perf --goodput)"}
    return [agg]
