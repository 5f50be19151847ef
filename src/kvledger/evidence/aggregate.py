"""The aggregate-only run: what a benchmark file gives when it kept percentiles but no per-request records.

Such files (vLLM without ``--save-detailed``, inference-perf lifecycle reports, llmperf
summaries, GuideLLM with stripped request lists, AIPerf/GenAI-Perf aggregate JSON/CSV)
still allow a *bounded* goodput estimate (``kvledger.ledgers.estimate``). Each metric is
stored in canonical seconds with the weighting of its distribution stated, because a
percentile over pooled inter-chunk gaps or over tokens says nothing per request.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from kvledger.errors import FormatError
from kvledger.jsonable import json_fields, to_jsonable
from kvledger.records import RunMetadata

__all__ = ["MetricSummary", "AggregateRun", "CANONICAL_METRICS", "WEIGHTINGS", "check_summary"]

#: Canonical metric names (records.py definitions): TTFT, TPOT excluding the first token, E2E, per-gap ITL.
CANONICAL_METRICS = ("ttft", "tpot", "e2e", "itl")
#: What one value of a distribution stands for.
WEIGHTINGS = {
    "request": "one value per successful request",
    "gap": "one value per inter-chunk gap, pooled over all requests",
    "token": "one value per output token (token-weighted)",
}


@json_fields(read={"percentiles_s": "percentiles_by_label"})
@dataclass(slots=True)
class MetricSummary:
    """A tool's summary of one canonical metric, converted to seconds.

    Attributes:
        metric: "ttft", "tpot", "e2e" or "itl" (canonical names, see records.py).
        weighting: key of :data:`WEIGHTINGS`; only "request" distributions bound per-request attainment.
        percentiles_s: percentile (0–100, e.g. 99.9) → value, s.
        count: how many values were summarised, if stated.
        mean_s, min_s, max_s: s, if stated.
        source_field: the file's field(s) this came from, e.g. "p99_ttft_ms".
        note: how the tool's definition maps onto the canonical one.
    """

    metric: str
    weighting: str
    percentiles_s: dict[float, float] = field(default_factory=dict)
    count: int | None = None
    mean_s: float | None = None
    min_s: float | None = None
    max_s: float | None = None
    source_field: str = ""
    note: str = ""

    def __post_init__(self) -> None:
        if self.metric not in CANONICAL_METRICS:
            raise ValueError(f"metric {self.metric!r} not in {CANONICAL_METRICS}")
        if self.weighting not in WEIGHTINGS:
            raise ValueError(f"weighting {self.weighting!r} not in {list(WEIGHTINGS)}")

    def points(self) -> list[tuple[float, float]]:
        """(percentile, value_s) pairs including min as p0 and max as p100 when known, sorted by percentile."""
        pts = dict(self.percentiles_s)
        if self.min_s is not None:
            pts.setdefault(0.0, self.min_s)
        if self.max_s is not None:
            pts.setdefault(100.0, self.max_s)
        return sorted(pts.items())

    @property
    def percentiles_by_label(self) -> dict[str, float]:
        """``percentiles_s`` keyed "p50", "p99.9", ..., in percentile order (the JSON's keys)."""
        return {_pct_label(p): v for p, v in sorted(self.percentiles_s.items())}

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


@dataclass(slots=True)
class AggregateRun:
    """A run known only through aggregates.

    Attributes:
        metadata: as for per-request runs (source, format, model, hardware, rate, ...).
        num_completed: successful requests, count, if stated.
        num_failed: failed requests, count, if stated (None: the file does not say).
        duration_s: benchmark duration as the tool defines it, s (see metadata.definitions).
        total_input_tokens, total_output_tokens: over successful requests, tokens, if stated.
        metrics: canonical metric name → :class:`MetricSummary`.
        tool_goodput: what the tool itself reported as goodput, verbatim with its field name
            (the SLO it used is usually not stored in the file), or None.
    """

    kind: ClassVar[str] = "aggregate"  # the JSON says which kind of run it is (RunRecords has per-request records)
    __json__ = ("kind", "metadata", "num_requests", "num_completed", "num_failed", "duration_s", "total_input_tokens",
                "total_output_tokens", "metrics", "tool_goodput")
    metadata: RunMetadata
    num_completed: int | None = None
    num_failed: int | None = None
    duration_s: float | None = None
    total_input_tokens: int | None = None
    total_output_tokens: int | None = None
    metrics: dict[str, MetricSummary] = field(default_factory=dict)
    tool_goodput: dict[str, Any] | None = None

    @property
    def num_requests(self) -> int | None:
        """All requests, failed included, count; None when the completed count is unknown."""
        if self.num_completed is None:
            return None
        return self.num_completed + (self.num_failed or 0)

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


def _pct_label(p: float) -> str:
    return f"p{int(p)}" if float(p).is_integer() else f"p{p:g}"


def check_summary(path: str, m: MetricSummary, where: str) -> None:
    """Quantiles of one sample cannot fall as the percentile rises, nor leave [min, max], and the mean lies in
    [min, max]: a summary that breaks this (p50 above p99, a mean under the min) is damaged, not a run to judge.
    A relative slack of 1e-9 lets through float rounding of equal values.

    Raises:
        FormatError: the first pair out of order, naming both fields.
    """
    ranked = ([("min", m.min_s)] if m.min_s is not None else []) + \
        [(f"p{p:g}" if p != 50.0 else "median", v) for p, v in sorted(m.percentiles_s.items())] + \
        ([("max", m.max_s)] if m.max_s is not None else [])
    for (ka, a), (kb, b) in zip(ranked, ranked[1:]):
        if a > b * (1 + 1e-9):
            raise FormatError(path, f"{ka} {a:g} s is above {kb} {b:g} s; quantiles of one sample cannot fall as the "
                                    "percentile rises (damaged file)", where)
    lo, hi = m.min_s if m.min_s is not None else 0.0, m.max_s if m.max_s is not None else float("inf")
    if m.mean_s is not None and not lo * (1 - 1e-9) <= m.mean_s <= hi * (1 + 1e-9):  # a tail can lift it past p99.9
        raise FormatError(path, f"mean {m.mean_s:g} s lies outside min {lo:g} s … max {hi:g} s (damaged file)", where)
