"""Reader for ``vllm bench serve`` results (``--save-result``, ``--append-result``, ``--save-detailed``) and
vLLM-derived clients.

Layout (``vllm/benchmarks/serve.py``, docs/formats.md §1): one JSON object per run; with
``--append-result`` several objects separated by newlines. Per-request arrays exist only
with ``--save-detailed`` and are in **seconds**; aggregates are in **milliseconds**
(``*_ms``). Older files spell the goodput key ``"request_goodput:"`` (trailing colon) and
lack ``failed``, ``latencies`` and ``start_times``. InferenceX's trimmed client writes
the same keys without the ``_ms`` suffix, in seconds (docs/formats.md §6). The ``--goodput``
SLO that produced ``request_goodput`` is not stored in the file.
"""

from __future__ import annotations

from typing import Any

from kvledger.errors import FormatError
from kvledger.evidence._arrays import DETAIL_KEYS, has_details, length_quantiles, records_from_arrays
from kvledger.evidence._io import Document, amount, count, latency_s, percentile
from kvledger.evidence._meta import parse_flat_stat, rate_or_none, stated_gpu_count, stated_hardware, stated_model
from kvledger.evidence.aggregate import AggregateRun, MetricSummary
from kvledger.evidence.metadata_keys import launch_keys
from kvledger.records import RunMetadata, RunRecords

__all__ = ["FORMAT", "read", "flat_summaries", "objects_of", "check_run_keys", "run_metadata", "ramp_up"]

FORMAT = "vllm-bench-serve"
_TOOL_FIELDS = ("backend", "endpoint_type", "label", "date", "tokenizer_id", "num_prompts", "burstiness",
                "completed", "failed", "total_input_tokens", "total_output_tokens", "request_throughput",
                "output_throughput", "total_token_throughput", "max_output_tokens_per_s", "max_concurrent_requests",
                # the client's own arguments benchmark_serving.py (vLLM ≤ 0.7, benchmarks/benchmark_serving.py main())
                # writes beside the date: result_json["best_of"], ["use_beam_search"]
                "best_of", "use_beam_search",
                # the run's wall-clock window (unix s) InferenceX's bench_serving adds to the result
                "benchmark_start_time_unix", "benchmark_end_time_unix")
#: benchmark_serving.py's defaults of those client arguments (--best-of 1, no --use-beam-search): at these the request
#: asks nothing of the engine; another value is kept among the recorded launch settings, which warn it is not modelled
_CLIENT_DEFAULTS = {"best_of": 1, "use_beam_search": False}
_NOTES = {
    "ttft": "time to first token per request",
    "tpot": "(e2e − ttft)/(output_len − 1) per request; requests with ≤ 1 output token left out of the distribution",
    "itl": "every gap between streamed chunks, pooled over all requests (not per request)",
    "e2e": "end-to-end latency per request (only present when requested with --percentile-metrics)",
}


def objects_of(doc: Document, own_fields: frozenset[str] = frozenset()) -> list[tuple[dict[str, Any], str]]:
    """The run objects of a JSON or JSON Lines document with the location prefix for errors ("" or "line N: "; in a
    JSON list "run i (its swept parameters): ", ``own_fields`` being the reading tool's result fields beyond vLLM's)."""
    if doc.kind == "json" and isinstance(doc.value, dict):
        return [(doc.value, "")]
    if doc.kind == "json" and isinstance(doc.value, list):  # `vllm bench sweep`'s summary.json: one run per object
        out = []
        for i, obj in enumerate(doc.value):
            if not isinstance(obj, dict):
                raise FormatError(doc.path, f"expected a JSON object per run, found {type(obj).__name__}", f"[{i}]")
            params = sweep_params(obj, own_fields)
            out.append((obj, f"run {i}" + (f" ({params})" if params else "") + ": "))
        return out
    if doc.kind == "jsonl":
        out = []
        for obj, line in zip(doc.value, doc.line_numbers or []):
            if not isinstance(obj, dict):
                raise FormatError(doc.path, f"expected a JSON object per line, found {type(obj).__name__}",
                                  f"line {line}")
            out.append((obj, f"line {line}: "))
        return out
    raise FormatError(doc.path, "expected a JSON object (one run), a JSON list of runs or JSON Lines (one run per "
                                "line)")


#: keys of a bench result object itself (besides its ``*_ms`` summaries and per-request arrays): any other scalar in a
#: ``vllm bench sweep`` summary is a swept serve or bench parameter. The speculative-decoding and diffusion figures are
#: results too (vLLM 0.25.0 vllm/benchmarks/serve.py writes spec_decode_* and diffusion_* beside the latencies)
_RESULT_KEYS = {"model_id", "duration", "request_rate", "max_concurrency", "request_goodput", "rtfx", "run_number",
                "percentiles", "start_times", "errors", "generated_texts",
                "spec_decode_acceptance_rate", "spec_decode_acceptance_length", "spec_decode_num_drafts",
                "spec_decode_draft_tokens", "spec_decode_accepted_tokens", "diffusion_committed_throughput",
                "diffusion_steps_per_canvas", "diffusion_committed_per_step", "diffusion_committed_tokens",
                "diffusion_denoising_steps", "diffusion_canvas_positions",
                # the ramp-up load (``--ramp-up-strategy``; read by ``ramp_up``) and the probe requests'
                # figures (``--probe-request-rate``): results, not swept parameters
                "ramp_up_strategy", "ramp_up_start_rps", "ramp_up_end_rps", "probe_completed", "probe_failed"}


def sweep_params(obj: dict[str, Any], own_fields: frozenset[str] = frozenset()) -> str:
    """The swept parameters a sweep's run object carries, "name=value, ..." ("" for a plain result): the scalars that
    are not fields of a bench result (``vllm bench sweep`` merges each combination's serve and bench parameters into
    its result; vLLM 0.25.0 vllm/benchmarks/sweep/serve.py::_update_run_data) nor ``own_fields`` (another client's
    result fields, SGLang's), then the client's concurrency and the repetition."""
    known = set(_TOOL_FIELDS) | _RESULT_KEYS | set(DETAIL_KEYS) | own_fields
    params = [f"{k}={v}" for k, v in obj.items() if k not in known and not k.endswith(("_ms", "_ms:"))
              and isinstance(v, (str, int, float, bool)) and not isinstance(v, dict)]
    params += [f"max_concurrency={obj['max_concurrency']}"] if obj.get("max_concurrency") is not None else []
    params += [f"repetition {obj['run_number']}"] if "run_number" in obj else []
    return ", ".join(params)


def read(doc: Document) -> list[RunRecords | AggregateRun]:
    """One run per JSON object: RunRecords with ``--save-detailed`` arrays, else an AggregateRun.

    Raises:
        FormatError: NaN, negative latencies, mismatched array lengths, naming line and field.
    """
    objs = objects_of(doc)
    return [_read_one(doc.path, obj, where, len(objs)) for obj, where in objs]


_RUN_KEYS = ("completed", "duration", "request_throughput", "num_prompts", "request_goodput", "request_goodput:",
             "ttfts", "input_lens", "output_lens")


def check_run_keys(path: str, obj: dict[str, Any], where: str, fmt: str = FORMAT) -> None:
    """Refuse an object with none of a vLLM/SGLang result's keys (e.g. another tool's file read with ``--format fmt``).

    Raises:
        FormatError: naming the keys looked for and the keys seen.
    """
    if any(k in obj for k in _RUN_KEYS) or any(parse_flat_stat(k) for k in obj):
        return
    seen = ", ".join(list(map(str, obj))[:12]) + (", …" if len(obj) > 12 else "")
    raise FormatError(path, f"does not have the keys of {fmt} output (none of {', '.join(_RUN_KEYS[:4])}, ttfts, "
                      f"mean_ttft_ms, …); keys seen: {seen}. Drop --format to let the format be detected",
                      where.rstrip(": ") or None)


def _read_one(path: str, obj: dict[str, Any], where: str, n_runs: int) -> RunRecords | AggregateRun:
    check_run_keys(path, obj, where)
    meta = run_metadata(path, obj, where)
    if n_runs > 1:
        meta.extra["run_label"] = where.rstrip(": ") or "run"
    if has_details(obj):
        records, notes = records_from_arrays(path, obj, where)
        meta.definitions.extend(notes)
        return RunRecords(records, meta)
    if "latencies" in obj:
        meta.definitions.append("'latencies' present without ttfts/errors (saved without --save-detailed): per-request "
                                "E2E exists but failures cannot be told apart, so only aggregates are used")
    present = [k for k in DETAIL_KEYS if isinstance(obj.get(k), list)]
    if present:  # some of --save-detailed's arrays, not all: a renamed or dropped key, not a run without the flag
        missing = [k for k in DETAIL_KEYS if k not in present]
        meta.definitions.append(f"per-request arrays {', '.join(present)} present but {', '.join(missing)} missing "
                                f"(renamed or removed?): requests are read one by one only with all of "
                                f"{', '.join(DETAIL_KEYS)}, so aggregates only; goodput can only be bounded")
    else:
        meta.definitions.append("no per-request arrays (run without --save-detailed): aggregates only; goodput can "
                                "only be bounded")
    agg = aggregate_run(path, obj, where, meta)
    if agg.num_failed is None:
        agg.num_failed = failed_from_prompts(path, obj, where, agg.num_completed, meta.definitions)
    if agg.num_failed is None:
        meta.definitions.append("no 'failed' count in the file (older vLLM, or a vLLM-derived client such as "
                                "InferenceX's): failed requests unknown, counted as 0")
    if quantiles := length_quantiles(path, obj, where, agg.num_completed):
        meta.extra.update(quantiles)
        meta.definitions.append("input_lens and output_lens kept without ttfts and itls: the replay draws its request "
                                "lengths from their quantiles (every 5 %), latencies from the aggregates")
    agg.tool_goodput = meta.extra.get("tool_goodput")
    return agg


def failed_from_prompts(path: str, obj: dict[str, Any], where: str, completed: int | None,
                        definitions: list[str]) -> int | None:
    """The failed count a result without a ``failed`` key implies: ``num_prompts`` − ``completed``, else None.

    vLLM's benchmark_serving.py (0.4–0.7, benchmark() then calculate_metrics()) sends every one of the
    ``num_prompts`` sampled requests and counts in ``completed`` those whose output has ``success``; the rest failed.
    None where either count is missing or ``completed`` exceeds ``num_prompts`` (a client that counts otherwise).
    """
    prompts = obj.get("num_prompts")
    if completed is None or not isinstance(prompts, int) or isinstance(prompts, bool) or prompts < completed:
        return None
    count(path, prompts, f"{where}num_prompts")
    definitions.append(f"no 'failed' key (older vLLM benchmark_serving.py, or a client derived from it): failed = "
                       f"num_prompts − completed = {prompts} − {completed} = {prompts - completed} (every one of "
                       f"num_prompts requests is sent; completed counts the successful ones)")
    return prompts - completed


def aggregate_run(path: str, obj: dict[str, Any], where: str, meta: RunMetadata) -> AggregateRun:
    """The aggregate-only run of a vLLM-style result object (counts, token totals, *_ms summaries); SGLang shares the
    layout."""
    agg = AggregateRun(meta, duration_s=meta.duration_s)
    agg.num_completed = count(path, obj.get("completed"), f"{where}completed", allow_none=True)
    agg.num_failed = count(path, obj.get("failed"), f"{where}failed", allow_none=True)
    agg.total_input_tokens = count(path, obj.get("total_input_tokens"), f"{where}total_input_tokens", allow_none=True)
    agg.total_output_tokens = count(path, obj.get("total_output_tokens"), f"{where}total_output_tokens",
                                    allow_none=True)
    agg.metrics, notes = flat_summaries(path, obj, where, agg.num_completed)
    meta.definitions.extend(notes)
    return agg


def run_metadata(path: str, obj: dict[str, Any], where: str) -> RunMetadata:
    """The RunMetadata a vLLM result object states (model, GPU, rate, concurrency, duration, tool fields, tool
    goodput)."""
    meta = RunMetadata(source=path, source_format=FORMAT)
    meta.model = stated_model(obj.get("model_id"), meta.definitions, meta.extra)
    meta.hardware = stated_hardware(obj)
    meta.num_gpus = stated_gpu_count(obj)
    tp = next((obj[k] for k in ("tensor_parallel_size", "tp") if k in obj), None)  # as `--metadata tp=2` stores it
    if isinstance(tp, (int, str)) and str(tp).isdigit() and int(tp) >= 1:
        meta.extra["tensor_parallel_size"] = int(tp)
    meta.request_rate = rate_or_none(obj.get("request_rate"))
    ramp = ramp_up(obj)
    if ramp is not None:  # the file's request_rate is --request-rate's unused default, not the load
        meta.request_rate = None
        meta.extra["ramp_up"] = ramp
    meta.concurrency = count(path, obj.get("max_concurrency"), f"{where}max_concurrency", allow_none=True)
    meta.duration_s = latency_s(path, obj.get("duration"), f"{where}duration", allow_none=True)
    meta.time_origin = "earliest start_times entry (client perf_counter clock)" if "start_times" in obj else None
    meta.extra.update({k: obj[k] for k in _TOOL_FIELDS if k in obj})
    off_default = {k for k, v in _CLIENT_DEFAULTS.items() if k in obj and not (type(obj[k]) is type(v) and obj[k] == v)}
    known = (set(_TOOL_FIELDS) - off_default) | _RESULT_KEYS | set(DETAIL_KEYS) | {"input_throughput"}
    launch_keys(path, obj, where, meta, known)  # `vllm bench serve --metadata KEY=VALUE`: the launch it records
    if ramp is not None:
        how = {"linear": "linearly", "exponential": "exponentially"}.get(ramp["strategy"], f"({ramp['strategy']})")
        meta.definitions.append(f"the request rate ramped {how} from {ramp['start_rps']:g} to "
                                f"{ramp['end_rps']:g} req/s over the run (vllm bench serve --ramp-up-strategy); the "
                                f"file's request_rate {obj.get('request_rate')!r} is not the load, so no fixed rate is "
                                "read")
    for key in ("request_goodput", "request_goodput:"):
        if key in obj and obj[key] is not None:
            meta.extra["tool_goodput"] = {"req_per_s": amount(path, obj[key], f"{where}{key}"), "field": key,
                                          "slo": "not stored in the file (vllm bench serve --goodput)"}
            if key.endswith(":"):
                meta.definitions.append("goodput key spelled 'request_goodput:' (trailing colon, older vLLM) read as "
                                        "request_goodput")
    return meta


def ramp_up(obj: dict[str, Any]) -> dict[str, Any] | None:
    """The ramped load a result states (``vllm bench serve --ramp-up-strategy linear|exponential --ramp-up-start-rps A
    --ramp-up-end-rps B``, vllm/benchmarks/serve.py: the rate moves from A to B with the request's index), as
    ``{"strategy", "start_rps", "end_rps"}``; None for a run at one rate (no ramp_up_strategy, or its rates unreadable).
    """
    strategy, lo, hi = obj.get("ramp_up_strategy"), obj.get("ramp_up_start_rps"), obj.get("ramp_up_end_rps")
    if not isinstance(strategy, str) or not strategy:
        return None
    lo_r, hi_r = rate_or_none(lo), rate_or_none(hi)
    if lo_r is None or hi_r is None:
        return None
    return {"strategy": strategy, "start_rps": lo_r, "end_rps": hi_r}


def flat_summaries(path: str, obj: dict[str, Any], where: str, completed: int | None) -> tuple[dict[str, MetricSummary],
    list[str]]:
    """Canonical metric summaries from flat keys (``p99_ttft_ms``, ``median_e2e_latency_ms``, ``median_tpot``).

    Returns the summaries and definition notes (units, which definition each tool metric has).
    """
    out: dict[str, MetricSummary] = {}
    seconds_keys: list[str] = []
    ms_keys: list[str] = []
    for key, value in obj.items():
        parsed = parse_flat_stat(key)
        if parsed is None or value is None:
            continue
        stat, metric, scale = parsed
        (seconds_keys if scale == 1.0 else ms_keys).append(key)
        v = latency_s(path, value, f"{where}{key}", scale)
        weighting = "gap" if metric == "itl" else "request"
        m = out.setdefault(metric, MetricSummary(metric, weighting, note=_NOTES[metric]))
        m.count = completed if weighting == "request" else None
        m.source_field = ", ".join(filter(None, [m.source_field, key]))
        if stat == "mean":
            m.mean_s = v
        elif stat == "median":
            m.percentiles_s[50.0] = v
        elif stat.startswith("p"):
            m.percentiles_s[percentile(path, stat[1:], f"{where}{key}")] = v
    notes = []
    if seconds_keys:
        notes.append(f"latency keys without the _ms suffix ({', '.join(sorted(seconds_keys)[:4])}…) read as seconds "
                     f"(InferenceX-style client)")
    if ms_keys:
        notes.append("aggregate latencies read from *_ms keys as milliseconds (per-request arrays, when present, are "
                     "seconds)")
    return out, notes
