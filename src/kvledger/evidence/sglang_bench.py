"""Reader for SGLang ``python -m sglang.bench_serving`` JSON Lines results (``--output-file``, ``--output-details``).

Layout (docs/formats.md §2): each run appends one JSON object as a line. Aggregates follow
vLLM's keys in milliseconds, with ``*_e2e_latency_ms`` for E2E,
``total_output_tokens_retokenized`` and ``concurrency`` = the **mean** number of
in-flight requests (not a limit; the limit is ``max_concurrency``). With
``--output-details`` the same line carries ``input_lens``, ``output_lens``, ``ttfts``
(s), ``itls`` (s) and ``errors``, at the top level or, in some versions, under
``details``. SGLang's native client splits a multi-token chunk's gap evenly over its
tokens (``adjust_itl``), so its ``itls`` are per token, not per chunk.
"""

from __future__ import annotations

from typing import Any

from kvledger.evidence._arrays import has_details, records_from_arrays
from kvledger.evidence._io import Document, count, latency_s
from kvledger.evidence._meta import rate_or_none, stated_gpu_count, stated_hardware
from kvledger.evidence.aggregate import AggregateRun
from kvledger.evidence.vllm_bench import aggregate_run, check_run_keys, objects_of
from kvledger.records import RunMetadata, RunRecords

__all__ = ["FORMAT", "read"]

FORMAT = "sglang-bench-serving"
_TOOL_FIELDS = ("backend", "dataset_name", "tag", "random_input_len", "random_output_len", "random_range_ratio",
                "completed", "total_input_tokens", "total_output_tokens", "total_output_tokens_retokenized",
                "request_throughput", "input_throughput", "output_throughput", "total_throughput", "accept_length")


def read(doc: Document) -> list[RunRecords | AggregateRun]:
    """One run per line: RunRecords when the line has the detail arrays, else an AggregateRun.

    Raises:
        FormatError: NaN, negative latencies, mismatched arrays, naming the line and field.
    """
    objs = objects_of(doc)
    return [_read_one(doc.path, obj, where, len(objs)) for obj, where in objs]


def _read_one(path: str, obj: dict[str, Any], where: str, n_runs: int) -> RunRecords | AggregateRun:
    if not isinstance(obj.get("details"), dict):
        check_run_keys(path, obj, where, FORMAT)
    meta = _metadata(path, obj, where)
    if n_runs > 1:
        meta.extra["run_label"] = where.rstrip(": ") or "run"
    details = obj.get("details") if isinstance(obj.get("details"), dict) else obj
    if has_details(details):
        prefix = f"{where}details." if details is not obj else where
        records, notes = records_from_arrays(path, details, prefix)
        meta.definitions.extend(notes)
        meta.definitions.append("SGLang itls may be per token (a multi-token chunk's gap split evenly, bench_serving "
                                "adjust_itl): chunk times are then per-token times")
        return RunRecords(records, meta)
    meta.definitions.append("no per-request arrays (run without --output-details): aggregates only; goodput can only "
                            "be bounded")
    agg = aggregate_run(path, obj, where, meta)
    if agg.num_failed is None:
        meta.definitions.append("SGLang aggregates state no failed count: failed requests unknown, counted as 0")
    return agg


def _metadata(path: str, obj: dict[str, Any], where: str) -> RunMetadata:
    meta = RunMetadata(source=path, source_format=FORMAT)
    model = obj.get("model_id", obj.get("model"))
    meta.model = model if isinstance(model, str) else None
    meta.hardware = stated_hardware(obj)
    meta.num_gpus = stated_gpu_count(obj)
    meta.request_rate = rate_or_none(obj.get("request_rate"))
    meta.concurrency = count(path, obj.get("max_concurrency"), f"{where}max_concurrency", allow_none=True)
    meta.duration_s = latency_s(path, obj.get("duration"), f"{where}duration", allow_none=True)
    meta.extra = {k: obj[k] for k in _TOOL_FIELDS if k in obj}
    if "concurrency" in obj:
        meta.extra["mean_in_flight_requests"] = obj["concurrency"]
        meta.definitions.append("SGLang 'concurrency' is the mean number of in-flight requests, kept as "
                                "extra.mean_in_flight_requests; the client limit is max_concurrency")
    return meta
