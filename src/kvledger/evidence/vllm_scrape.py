"""The figures ``kvledger doctor`` reads from a vLLM Prometheus ``/metrics`` scrape (``prometheus_text.samples``).

Names per release (read in the wheels): vLLM 0.10.1's V0 engine (vllm/engine/metrics.py, ``Metrics``) exports the
counter ``vllm:num_preemptions_total`` and the gauge ``vllm:gpu_cache_usage_perc``; its V1 engine
(vllm/v1/metrics/loggers.py, ``PrometheusStatLogger``) the counter ``vllm:num_preemptions`` (exposed with the client's
``_total`` suffix) and both ``vllm:gpu_cache_usage_perc`` (deprecated) and ``vllm:kv_cache_usage_perc``; 0.19.0's V1
keeps ``vllm:num_preemptions`` and ``vllm:kv_cache_usage_perc`` only. ``vllm:num_requests_running``/``_waiting`` are
in all three. ``vllm:cache_config_info`` (``log_metrics_info``, 0.10.1 and 0.19.0) is an info gauge whose labels are
the CacheConfig's fields as strings (``num_gpu_blocks``, ``block_size``, ``gpu_memory_utilization``, ``cache_dtype``,
…). With data parallelism each engine's series carries its ``engine`` label: counts are summed, gauges kept per
engine.

Prefix caching (vLLM 0.33.0 vllm/v1/metrics/loggers.py): the counters ``vllm:prefix_cache_queries`` and
``vllm:prefix_cache_hits`` (prompt tokens looked up in, and found in, the GPU's prefix cache) and, with a KV connector
(the native CPU offloading connector, LMCache), ``vllm:external_prefix_cache_queries`` / ``_hits``: the tokens past the
GPU hit looked up in the connector (``Scheduler.schedule``: ``request.num_tokens − num_new_local_computed_tokens``) and
those it loaded (``num_external_computed_tokens``); all in tokens, exposed with ``_total``. V0 (0.10.1) exports the
gauge ``vllm:gpu_prefix_cache_hit_rate`` instead, a block hit rate, −1 when prefix caching is off (0.10.1
core/block/naive_block.py: ``NaiveBlockAllocator.get_prefix_cache_hit_rate`` returns −1).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvledger.evidence.prometheus_text import samples

__all__ = ["VllmScrape", "read_vllm_scrape", "PREEMPTIONS", "KV_USAGE", "V0_PREFIX_RATE"]

PREEMPTIONS = ("vllm:num_preemptions_total",)
KV_USAGE = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")  # the newer name first (0.10.1 exports both)
#: (queries, hits) counters of the GPU prefix cache and of the KV connector's, tokens (module doc)
PREFIX_GPU = ("vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total")
PREFIX_CONNECTOR = ("vllm:external_prefix_cache_queries_total", "vllm:external_prefix_cache_hits_total")
V0_PREFIX_RATE = "vllm:gpu_prefix_cache_hit_rate"


@dataclass(frozen=True)
class VllmScrape:
    """What a scrape says; None where it carries no such series."""

    source: str
    preemptions: int | None
    kv_usage_fraction: dict[str, float] = field(default_factory=dict)  # per engine label ("" where none), 0–1
    kv_usage_name: str | None = None
    running: int | None = None
    waiting: int | None = None
    cache_config: dict[str, str] = field(default_factory=dict)
    model_name: str | None = None
    prefix_gpu: tuple[int, int] | None = None  # (queried, hit) tokens, summed over engines
    prefix_connector: tuple[int, int] | None = None
    v0_prefix_hit_rate: float | None = None

    def label_int(self, name: str) -> int | None:
        """A cache_config_info label as an integer; None where absent or 'None'."""
        raw = self.cache_config.get(name)
        return int(raw) if raw is not None and raw.strip().lstrip("-").isdigit() else None

    def label_float(self, name: str) -> float | None:
        raw = self.cache_config.get(name)
        try:
            return float(raw) if raw is not None else None
        except ValueError:
            return None

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "preemptions": self.preemptions, "kv_usage_fraction": self.kv_usage_fraction,
                "kv_usage_metric": self.kv_usage_name, "running": self.running, "waiting": self.waiting,
                "cache_config_info": self.cache_config, "model_name": self.model_name,
                "prefix_cache_tokens": _pair(self.prefix_gpu),
                "connector_prefix_cache_tokens": _pair(self.prefix_connector),
                "v0_gpu_prefix_cache_hit_rate": self.v0_prefix_hit_rate}


def _pair(p: tuple[int, int] | None) -> dict[str, int] | None:
    return {"queries": p[0], "hits": p[1]} if p else None


def _counts(rows: list[tuple[str, dict[str, str], float]], names: tuple[str, str]) -> tuple[int, int] | None:
    q, h = _sum(rows, names[:1]), _sum(rows, names[1:])
    return (q, h) if q is not None and h is not None else None


def _sum(rows: list[tuple[str, dict[str, str], float]], names: tuple[str, ...]) -> int | None:
    vals = [v for n, _, v in rows if n in names]
    return int(sum(vals)) if vals else None


def read_vllm_scrape(text: str, source: str) -> VllmScrape:
    """The scrape's preemption count, KV usage, queue and cache configuration."""
    rows = samples(text)
    usage_name = next((n for n in KV_USAGE if any(r[0] == n for r in rows)), None)
    usage = {lab.get("engine", ""): v for n, lab, v in rows if n == usage_name}
    info = next((lab for n, lab, _ in rows if n == "vllm:cache_config_info"), {})
    model = next((lab["model_name"] for _, lab, _ in rows if lab.get("model_name")), None)
    v0 = next((v for n, _, v in rows if n == V0_PREFIX_RATE), None)
    return VllmScrape(source, _sum(rows, PREEMPTIONS), usage, usage_name,
                      _sum(rows, ("vllm:num_requests_running",)), _sum(rows, ("vllm:num_requests_waiting",)),
                      dict(info), model, _counts(rows, PREFIX_GPU), _counts(rows, PREFIX_CONNECTOR), v0)
