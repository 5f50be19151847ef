"""Reader for InferenceX ``together_runner`` results
(``baselines/<hw>/<framework>/<profile>/<seq>/<tuning>/conc<N>.json``): one concurrency level of a bench_serving run,
summarised.

The layout (``together_runner/compare.py`` ``cmd_emit``, the nested schema its ``analysis/results_lib.py`` names): run
facts at the top level (``hw``, ``model``, ``framework``, ``tp``, ``conc`` = the client's ``--max-concurrency``,
``image``, ``isl``/``osl`` = the requested lengths) and ``metrics`` copied from the client's result:
``successful_requests``, ``request_throughput`` (req/s), ``total_token_throughput`` and ``output_token_throughput``
(tokens/s), and medians and p99s of TTFT, TPOT and E2E with the median ITL, in ms. ``gpu.n_gpus`` counts every GPU
the host's power sampling saw, not the run's (8 on a TP-4 run), so the GPU count is ``tp``.

A file is one level: ``validate --sweep conc16.json conc64.json ...`` compares them level by level, each a closed loop
of ``conc`` clients. The duration and token totals are the file's throughputs turned back into counts (definitions).
"""

from __future__ import annotations

import re
from typing import Any

from kvledger.errors import FormatError
from kvledger.evidence._io import Document, count, latency_s, positive
from kvledger.evidence.aggregate import AggregateRun, MetricSummary
from kvledger.evidence.metadata_keys import CAP_FIELD_KEY, OWN_KEYS_SUFFIX
from kvledger.records import RunMetadata

__all__ = ["FORMAT", "looks_like_together_runner", "read"]

FORMAT = "inferencex-together-runner"
#: metrics.KEY → (canonical metric, percentile); each in ms
_LATENCIES = {
    "median_ttft_ms": ("ttft", 50.0), "p99_ttft_ms": ("ttft", 99.0),
    "median_tpot_ms": ("tpot", 50.0), "p99_tpot_ms": ("tpot", 99.0),
    "median_itl_ms": ("itl", 50.0),
    "median_e2el_ms": ("e2e", 50.0), "p99_e2el_ms": ("e2e", 99.0),
}
_NEEDED = ("successful_requests", "request_throughput", "output_token_throughput", "total_token_throughput")
_VLLM_IMAGE = re.compile(r"vllm[^:]*:v?(\d+\.\d+\.\d+)$")


def looks_like_together_runner(d: dict[str, Any]) -> bool:
    """A together_runner result: ``hw``, ``conc`` and a ``metrics`` object at the top level."""
    return isinstance(d.get("metrics"), dict) and "hw" in d and "conc" in d


def read(doc: Document) -> list[AggregateRun]:
    """One AggregateRun (module docstring).

    Raises:
        FormatError: no ``metrics`` object (a forced --format), a metric the replay needs is missing (a run
            adapted from the flat recipe record keeps no request count), or a count, rate or latency is not a
            number of its kind.
    """
    path, obj = doc.path, doc.value
    m = obj.get("metrics")
    if not isinstance(m, dict):  # a --format forced on another file
        raise FormatError(path, "read as an InferenceX together_runner result but has no metrics object, the "
                                "aggregate figures such a result keeps", "metrics")
    missing = [k for k in _NEEDED if m.get(k) is None]
    if missing:
        raise FormatError(path, f"the together_runner result states no {', '.join(missing)} under metrics, so its "
                                "request count, duration or token totals are unknown and the run cannot be replayed",
                          f"metrics.{missing[0]}")
    meta = _metadata(path, obj)
    agg = AggregateRun(meta)
    agg.num_completed = count(path, m["successful_requests"], "metrics.successful_requests")
    rate = positive(path, m["request_throughput"], "metrics.request_throughput")
    out_rate = positive(path, m["output_token_throughput"], "metrics.output_token_throughput")
    all_rate = positive(path, m["total_token_throughput"], "metrics.total_token_throughput")
    if all_rate < out_rate:
        raise FormatError(path, f"total_token_throughput {all_rate:g} is below output_token_throughput {out_rate:g} "
                                "tokens/s", "metrics.total_token_throughput")
    agg.duration_s = meta.duration_s = agg.num_completed / rate
    agg.total_output_tokens = int(round(out_rate * agg.duration_s))
    agg.total_input_tokens = int(round((all_rate - out_rate) * agg.duration_s))
    for key, (metric, pct) in _LATENCIES.items():
        if m.get(key) is None:
            continue
        weighting = "gap" if metric == "itl" else "request"
        s = agg.metrics.setdefault(metric, MetricSummary(metric, weighting, count=agg.num_completed
                                                         if weighting == "request" else None))
        s.percentiles_s[pct] = latency_s(path, m[key], f"metrics.{key}", 1e-3)
        s.source_field = ", ".join(filter(None, [s.source_field, f"metrics.{key}"]))
    meta.definitions += [
        "duration = metrics.successful_requests ÷ metrics.request_throughput",
        "token totals = (total_token_throughput − output_token_throughput) and output_token_throughput × duration; "
        "isl/osl are the requested lengths, not the measured ones",
    ]
    return [agg]


def _metadata(path: str, obj: dict[str, Any]) -> RunMetadata:
    """Model, GPU, client cap (``conc``), and the launch the file records (``tp``; vLLM's version from ``image``)."""
    meta = RunMetadata(source=path, source_format=FORMAT)
    meta.model = obj["model"] if isinstance(obj.get("model"), str) and obj["model"].strip() else None
    meta.hardware = obj["hw"].strip() if isinstance(obj.get("hw"), str) and obj["hw"].strip() else None
    meta.concurrency = count(path, obj.get("conc"), "conc")
    meta.extra[CAP_FIELD_KEY] = "conc"
    meta.extra["run_label"] = f"conc {meta.concurrency}"
    tp = count(path, obj.get("tp"), "tp", allow_none=True)
    if tp:
        meta.num_gpus = tp
        meta.extra["engine_kwargs"] = {"tensor_parallel_size": tp}
        meta.extra["record_file"] = f"{path} tp, {OWN_KEYS_SUFFIX}"
    version = _VLLM_IMAGE.search(obj["image"]) if isinstance(obj.get("image"), str) else None
    if version and obj.get("framework") == "vllm":
        meta.extra["vllm_version"] = version.group(1)
    meta.extra.update({k: obj[k] for k in ("framework", "precision", "isl", "osl", "profile", "image", "ts")
                       if k in obj})
    return meta
