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
from kvledger.evidence._meta import rate_or_none, stated_gpu_count, stated_hardware, stated_model
from kvledger.evidence.aggregate import AggregateRun
from kvledger.evidence.vllm_bench import aggregate_run, check_run_keys, objects_of
from kvledger.records import RunMetadata, RunRecords

__all__ = ["FORMAT", "read", "server_gpus"]

FORMAT = "sglang-bench-serving"
_TOOL_FIELDS = ("backend", "dataset_name", "tag", "random_input_len", "random_output_len", "random_range_ratio",
                "completed", "total_input_tokens", "total_output_tokens", "total_output_tokens_retokenized",
                "request_throughput", "input_throughput", "output_throughput", "total_throughput", "accept_length")
#: the scalars bench_serving writes of its own beyond vLLM's result keys (sglang 0.5.23 sglang/benchmark/serving.py,
#: the result of benchmark(), and goodput.py's GoodputMetrics; "model" as _metadata reads it): the run's settings and
#: figures, not parameters swept over a JSON list of runs (``vllm_bench.sweep_params``)
_RESULT_FIELDS = frozenset({*_TOOL_FIELDS, "model", "sharegpt_output_len", "total_input_text_tokens",
                            "total_input_vision_tokens", "concurrency", "slo_attainment"})


def read(doc: Document) -> list[RunRecords | AggregateRun]:
    """One run per line: RunRecords when the line has the detail arrays, else an AggregateRun.

    Raises:
        FormatError: NaN, negative latencies, mismatched arrays, naming the line and field.
    """
    objs = objects_of(doc, _RESULT_FIELDS)
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


#: SGLang's ``server_info`` (the server's resolved arguments, which bench_serving fetches and writes beside its results)
#: → vLLM's launch-flag names, as a launch record's ``engine_kwargs`` (``calibration.run_record``): chunked_prefill_size
#: is SGLang's per-step prefill token budget (the simulator's ``max_num_batched_tokens``), max_running_requests its
#: running cap; max_total_num_tokens (the KV pool SGLang sized) is kept so that the replay says it plans its own
_SERVER_FLAGS = {"tp_size": "tensor_parallel_size", "dp_size": "data_parallel_size",
                 "pp_size": "pipeline_parallel_size", "context_length": "max_model_len", "page_size": "block_size",
                 "chunked_prefill_size": "max_num_batched_tokens", "max_running_requests": "max_num_seqs",
                 "mem_fraction_static": "mem_fraction_static", "kv_cache_dtype": "kv_cache_dtype",
                 "max_total_num_tokens": "max_total_tokens"}


def _server_settings(info: Any) -> dict[str, Any]:
    """The launch settings a ``server_info`` states, under vLLM's names (``_SERVER_FLAGS``; the radix cache as
    ``enable_prefix_caching``, expert parallelism as ``enable_expert_parallel``); {} when there is none."""
    if not isinstance(info, dict):
        return {}
    out = {vllm: info[k] for k, vllm in _SERVER_FLAGS.items()
           if isinstance(info.get(k), (int, float, str)) and not isinstance(info.get(k), bool)}
    if isinstance(info.get("disable_radix_cache"), bool):
        out["enable_prefix_caching"] = not info["disable_radix_cache"]
    if isinstance(info.get("ep_size"), int) and info["ep_size"] > 1:
        out["enable_expert_parallel"] = True
    return out


def server_gpus(info: Any) -> tuple[int, str] | None:
    """The GPUs one SGLang server ran on, as its ``server_info`` states them, and how they were counted: tp_size ×
    dp_size × pp_size (a missing size counts 1); with ``enable_dp_attention`` the DP ranks split the TP group's GPUs
    (server_args.py: dp_size ≤ tp_size, one engine of tp_size GPUs), so tp_size × pp_size. None without a tp_size."""
    if not isinstance(info, dict) or not _whole(info.get("tp_size")):
        return None
    sizes = {k: int(info[k]) if _whole(info.get(k)) else 1 for k in ("tp_size", "dp_size", "pp_size")}
    shared = info.get("enable_dp_attention") is True
    used = ("tp_size", "pp_size") if shared else ("tp_size", "dp_size", "pp_size")
    n = 1
    for k in used:
        n *= sizes[k]
    how = " × ".join(f"{k} {sizes[k]}" for k in used)
    return n, f"server_info: {how}" + (" (DP attention: its DP ranks share the TP group's GPUs)" if shared else "")


def _whole(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1


def _metadata(path: str, obj: dict[str, Any], where: str) -> RunMetadata:
    meta = RunMetadata(source=path, source_format=FORMAT)
    model = obj.get("model_id", obj.get("model"))
    info = obj.get("server_info")
    if not isinstance(model, str) and isinstance(info, dict):  # the served model, as the server reported it
        model = info.get("model_path")
    meta.hardware = stated_hardware(obj)
    meta.num_gpus = stated_gpu_count(obj)
    meta.request_rate = rate_or_none(obj.get("request_rate"))
    meta.concurrency = count(path, obj.get("max_concurrency"), f"{where}max_concurrency", allow_none=True)
    meta.duration_s = latency_s(path, obj.get("duration"), f"{where}duration", allow_none=True)
    meta.extra = {k: obj[k] for k in _TOOL_FIELDS if k in obj}
    meta.model = stated_model(model, meta.definitions, meta.extra)
    if meta.num_gpus is None and (served := server_gpus(info)):
        meta.num_gpus, meta.extra["num_gpus_source"] = served[0], f"{path} {where}{served[1]}".replace("  ", " ")
    if settings := _server_settings(info):
        meta.extra.update(engine_kwargs=settings, record_file=f"{path} {where}server_info".replace("  ", " "))
        if isinstance(info.get("version"), str):
            meta.extra["sglang_version"] = info["version"]
    if "concurrency" in obj:
        meta.extra["mean_in_flight_requests"] = obj["concurrency"]
        meta.definitions.append("SGLang 'concurrency' is the mean number of in-flight requests, kept as "
                                "extra.mean_in_flight_requests; the client limit is max_concurrency")
    return meta
