"""Reader for kubernetes-sigs/inference-perf lifecycle reports (per stage; the pooled summary is refused) and
``per_request_lifecycle_metrics.json``.

Everything is in **seconds**, although the metrics doc says ms (docs/formats.md §6). The
lifecycle report has ``load_summary``, ``successes`` (latency percentiles ``p0.1``…
``median``…``p99.9``, throughput) and ``failures``; its ``inter_token_latency`` pools
every token gap, its ``time_per_output_token`` is per request (canonical TPOT), and its
``goodput_percentage`` divides by *successful* requests only. Duration is measured over
successful requests, so it is recovered as ``successes.count ÷ requests_per_sec``. The
per-request file is a list of ``RequestLifecycleMetric`` objects (two layouts: token
times under ``info`` or under ``info.response_metrics``); each stage becomes one run.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

from kvledger.errors import FormatError
from kvledger.evidence._io import Document, amount, count, latency_s, number, percentile, yaml_docs
from kvledger.evidence.aggregate import AggregateRun, MetricSummary, check_summary
from kvledger.evidence.inference_perf_client import client_config_path
from kvledger.evidence.inference_perf_stage import check_not_pooled, missing_metrics, settings_warning, tpot_from_e2e
from kvledger.records import RequestRecord, RunMetadata, RunRecords

__all__ = ["FORMAT_LIFECYCLE", "FORMAT_PER_REQUEST", "CONFIG_MODEL_KEY", "client_config_model", "read_lifecycle",
           "read_per_request"]

FORMAT_LIFECYCLE, FORMAT_PER_REQUEST = "inference-perf-lifecycle", "inference-perf-per-request"
_LATENCIES = {  # inference-perf latency key → (canonical, weighting, note)
    "time_to_first_token": ("ttft", "request", "first token time − start time per streamed request, s"),
    "time_per_output_token": ("tpot", "request", "(last − first token time)/(tokens − 1) per streamed request, s"),
    "request_latency": ("e2e", "request", "end time − start time per request, s"),
    "inter_token_latency": ("itl", "gap", "every gap between token times, pooled over requests, s"),
}
_PCT = re.compile(r"^p(\d+(?:\.\d+)?)$")


def _get(d: Any, *keys: str) -> Any:
    """``d[k1][k2]…`` through mappings only; None where a level is missing or not a mapping."""
    for k in keys:
        d = d.get(k) if isinstance(d, dict) else None
    return d


CONFIG_MODEL_KEY = "config.yaml server.model_name"  # where an inference-perf report folder names the served model


def client_config_model(report_path: str | Path) -> tuple[str, str] | None:
    """(model, where it was read: ``CONFIG_MODEL_KEY``, or the file's path when it lies above the report) from the
    client config of an inference-perf report (its echo of the client config: the nearest ``config.yaml`` beside it or
    up to ``CLIENT_FILE_UP`` folders above, ``inference_perf_client.client_config_path``, where the output length and
    prompt pool are read too), or None when there is none or it names no model; the last YAML document that names one
    decides. The one reader of that field: the lifecycle reader (``goodput``, ``cost``) and the stage replays
    (``validate``, ``calibrate``) both take the model from here."""
    f = client_config_path(report_path)
    model = None
    for cfg in yaml_docs(f) if f is not None else []:
        name = _get(cfg, "server", "model_name")
        if isinstance(name, str) and name.strip():
            model = name.strip()
    if model is None or f is None:
        return None
    beside = f.parent == Path(report_path).resolve().parent  # one found above is named by its path
    return model, CONFIG_MODEL_KEY if beside else f"{f} server.model_name"


def _launched(path: str, meta: RunMetadata) -> bool:
    """Fill model, GPU count (its TP) and launch flags from the stage's launch record (``launch_record``: an
    inference-sim/training ``exp-config.yaml``), as ``validate`` replays the stage; whether there was one."""
    from kvledger.evidence.launch_record import stage_launch

    launch = stage_launch(path)
    if launch.path is None:
        return False
    if launch.model:
        meta.model = launch.model
        meta.definitions.append(f"model from {launch.path} model (the launch record)")
    if launch.engine_kwargs.get("tensor_parallel_size"):
        meta.num_gpus = launch.engine_kwargs["tensor_parallel_size"]
        meta.definitions.append(f"GPU count from {launch.path} tensor_parallelism (one engine at that TP)")
    if launch.engine_kwargs:
        meta.extra["engine_kwargs"] = launch.engine_kwargs
        if "max_num_seqs" in launch.engine_kwargs:
            meta.extra["max_num_seqs"] = launch.engine_kwargs["max_num_seqs"]
    meta.extra.update(launch_record=launch.path, record_file=launch.path)
    return True


def _sidecars(path: str, meta: RunMetadata) -> None:
    """Fill model, GPU type/count, the engine's version and launch flags as ``validate`` reads them
    (``calibration.sweep.stage_run``): the model from the stage's launch record (``_launched``), else the Kubernetes
    Deployment's (manifests.yaml beside the report or one folder up, ``k8s_manifests``: the model the engine served),
    else the client config.yaml's; the engine's settings from the launch record where it states any, else from the
    manifests."""
    from kvledger.evidence.k8s_manifests import manifest_facts

    launched = _launched(path, meta)
    model_given, hints = launched and bool(meta.model), launched and bool(meta.extra.get("engine_kwargs"))
    if model_given and hints:  # the record says both: nothing else is read
        return
    named = client_config_model(path)
    where, facts = (None, {}) if hints else manifest_facts(path)  # the engine's settings: the record's, else these
    served = facts.get("deployed_model") if facts else None
    if served and not model_given:
        meta.model = served
        meta.extra["deployed_model"] = served
        meta.definitions.append(f"model from {where} MODEL_ID (the Deployment's)" + (
            f"; {named[1]} names {named[0]}, the name the client sent, not the model the engine served"
            if named is not None and named[0] != served else ""))
    elif named is not None and not model_given:
        meta.model = named[0]
        meta.definitions.append(f"model from {named[1]}")
    if not facts:
        return
    meta.hardware = facts.get("accelerator", meta.hardware)
    meta.num_gpus = facts.get("num_gpus", meta.num_gpus)
    kwargs = facts.get("engine_kwargs") or {}
    if "max_num_seqs" in kwargs:
        meta.extra["max_num_seqs"] = kwargs["max_num_seqs"]
    if kwargs:
        meta.extra["engine_kwargs"] = kwargs  # the launch flags, as calibration.run_record reads a record's
    if facts.get("vllm_version"):
        meta.extra["vllm_version"] = facts["vllm_version"]
    meta.extra["record_file"] = str(where)
    meta.definitions.append(f"GPU type, count (nvidia.com/gpu limit × replicas), vLLM version (container image) and "
                            f"engine flags (container args) from {where} (Kubernetes Deployment)")


def read_lifecycle(doc: Document) -> list[AggregateRun]:
    """One AggregateRun from a ``stage_N_lifecycle_metrics.json`` report; model from a sibling config.yaml.

    Raises:
        FormatError: the pooled summary over every stage (``inference_perf_stage.check_not_pooled``), NaN or negative
            latencies, or a summary whose quantiles fall as the percentile rises (p50
            above p99) or whose mean is outside [min, max], naming the field.
    """
    obj, path = doc.value, doc.path
    check_not_pooled(path, obj)
    meta = RunMetadata(source=path, source_format=FORMAT_LIFECYCLE)
    _sidecars(path, meta)
    settings_warning(path, meta)
    m = re.search(r"stage_(\d+)_", Path(path).name)
    meta.extra["run_label"] = f"stage {m.group(1)}" if m else Path(path).stem
    load = obj.get("load_summary") if isinstance(obj.get("load_summary"), dict) else {}
    succ = obj.get("successes") if isinstance(obj.get("successes"), dict) else {}
    fail = obj.get("failures") if isinstance(obj.get("failures"), dict) else {}
    meta.request_rate = amount(path, load.get("requested_rate"), "load_summary.requested_rate", allow_none=True)
    agg = AggregateRun(meta)
    agg.num_completed = count(path, succ.get("count"), "successes.count", allow_none=True)
    agg.num_failed = count(path, fail.get("count"), "failures.count", allow_none=True)
    thr = succ.get("throughput") if isinstance(succ.get("throughput"), dict) else {}
    rps = amount(path, thr.get("requests_per_sec"), "successes.throughput.requests_per_sec", allow_none=True)
    if agg.num_completed and rps:
        agg.duration_s = meta.duration_s = agg.num_completed / rps
        meta.definitions.append("duration = successes.count ÷ successes.throughput.requests_per_sec (inference-perf "
                                "times successful requests only)")
    for attr, key in (("total_input_tokens", "prompt_len"), ("total_output_tokens", "output_len")):
        mean = succ.get(key, {}).get("mean") if isinstance(succ.get(key), dict) else None
        if mean is not None and agg.num_completed is not None:
            setattr(agg, attr, int(round(amount(path, mean, f"successes.{key}.mean") * agg.num_completed)))
    lat = succ.get("latency") if isinstance(succ.get("latency"), dict) else {}
    for key, (canon, weighting, note) in _LATENCIES.items():
        if isinstance(lat.get(key), dict):
            agg.metrics[canon] = _summary(path, lat[key], canon, weighting, note, agg.num_completed,
                                          f"successes.latency.{key}")
    meta.extra["missing_metrics"] = missing_metrics(lat)
    meta.extra["untrusted_tpot_field"] = ("disagrees with the TTFT and E2E of the reports that state them (below the "
                                          "(E2E − TTFT)/(output − 1) they give, by about half at low load)")
    meta.definitions.append("all latencies in seconds (the inference-perf docs say ms; the files are s)")
    tpot_from_e2e(path, succ, agg)
    gm = obj.get("goodput_metrics")
    if isinstance(gm, dict):
        agg.tool_goodput = {"req_per_s": amount(path, gm.get("request_goodput"), "goodput_metrics.request_goodput",
                                                allow_none=True),
                            "field": "goodput_metrics",
                            "good_requests": count(path, gm.get("good_requests"), "goodput_metrics.good_requests",
                                                   allow_none=True),
                            "percentage_of_successful": amount(path, gm.get("goodput_percentage"),
                                                               "goodput_metrics.goodput_percentage", allow_none=True),
                                                                   "slo": "report.goodput.constraints (not in this "
                                                                          "file)"}
    return [agg]


def _summary(path: str, d: dict[str, Any], canon: str, weighting: str, note: str, n: int | None,
             where: str) -> MetricSummary:
    m = MetricSummary(canon, weighting, count=n if weighting == "request" else None, source_field=where, note=note)
    for key, value in d.items():
        if value is None:
            continue
        pm = _PCT.match(key)
        if pm:
            m.percentiles_s[percentile(path, pm.group(1), f"{where}.{key}")] = latency_s(path, value, f"{where}.{key}")
        elif key == "median":
            m.percentiles_s[50.0] = latency_s(path, value, f"{where}.{key}")
        elif key in ("mean", "min", "max"):
            setattr(m, f"{key}_s", latency_s(path, value, f"{where}.{key}"))
    check_summary(path, m, where)
    return m


def read_per_request(doc: Document) -> list[RunRecords]:
    """One RunRecords per ``stage_id`` (one run when there are no stage ids), on the file's shared clock.

    Raises:
        FormatError: missing start/end times, NaN, token times before the start (negative latency).
    """
    path, items = doc.path, doc.value
    bad = next((i for i, r in enumerate(items) if not isinstance(r, dict)), None)
    if bad is not None:
        raise FormatError(path, "expected one object per request", f"[{bad}]")
    starts = [number(path, r.get("start_time"), f"[{i}].start_time") for i, r in enumerate(items)]
    t0 = min(starts)
    stages: dict[Any, list[RequestRecord]] = {}
    for i, r in enumerate(items):
        stages.setdefault(r.get("stage_id"), []).append(_request(path, r, i, starts[i] - t0))
    runs = []
    for stage, records in sorted(stages.items(), key=lambda kv: (kv[0] is None, kv[0] if kv[0] is not None else 0)):
        meta = RunMetadata(source=path, source_format=FORMAT_PER_REQUEST, time_origin=f"first start_time in the file "
            f"({t0} s, perf_counter clock)")
        _sidecars(path, meta)
        meta.extra["run_label"] = f"stage {stage}" if stage is not None else "all requests"
        meta.definitions += [
            "arrival = start_time; chunk times = response_metrics.chunk_times (else output_token_times); TTFT to the "
            "first of them",
            "E2E to the last token time (inference-perf's request_latency runs to end_time, slightly later); without "
            "token times, to end_time",
            "duration = last finish − first arrival within the stage",
        ]
        runs.append(RunRecords(records, meta))
    return runs


def _request(path: str, r: dict[str, Any], i: int, arrival: float) -> RequestRecord:
    where = f"[{i}]."
    info = r.get("info") if isinstance(r.get("info"), dict) else {}
    resp = info.get("response_metrics") if isinstance(info.get("response_metrics"), dict) else info
    reqm = info.get("request_metrics") if isinstance(info.get("request_metrics"), dict) else {}
    text = reqm.get("text") if isinstance(reqm.get("text"), dict) else {}
    n_in = count(path, text.get("input_tokens", info.get("input_tokens", 0)), f"{where}info.input_tokens")
    n_out = count(path, resp.get("output_tokens", 0), f"{where}info.output_tokens")
    start = number(path, r.get("start_time"), f"{where}start_time")
    end = number(path, r.get("end_time"), f"{where}end_time")
    err = r.get("error")
    if err:
        text_err = f"{err.get('error_type', 'error')}: {err.get('error_msg', '')}" if isinstance(err,
            dict) else str(err)
        return RequestRecord(str(i), arrival, n_in, 0, None, arrival + latency_s(path, end - start, f"{where}end_time "
            f"− start_time"), None, error=text_err)
    times = resp.get("chunk_times") or resp.get("output_token_times") or []
    if not times:
        e2e = latency_s(path, end - start, f"{where}end_time − start_time")
        return RequestRecord(str(i), arrival, n_in, n_out, None, arrival + e2e, None)
    rel = np.array([latency_s(path, number(path, t, f"{where}token_times[{k}]") - start, f"{where}token_times[{k}] − "
        f"start_time") for k, t in enumerate(times)])
    if np.any(np.diff(rel) < 0):
        raise FormatError(path, "token times go backwards", f"{where}token_times")
    chunks = arrival + rel
    return RequestRecord(str(i), arrival, n_in, n_out, float(chunks[0]), float(chunks[-1]), chunks)
