"""The metric-table shape AIPerf and GenAI-Perf share: ``{tag: {unit, avg, min, max, p1..p99, std, count}}``, in JSON
or CSV.

AIPerf copied GenAI-Perf's aggregate shape on purpose (docs/formats.md §3): each metric
carries its own ``unit``, which the docs call authoritative. Tags map onto canonical
metrics like this: ``time_to_first_token``/``ttft`` → TTFT; ``inter_token_latency`` →
**TPOT** (both tools define it as (e2e − ttft)/(osl − 1)); ``request_latency`` → E2E;
``inter_chunk_latency`` → ITL per gap (pooled). The CSV form is a per-request statistics
table, a blank line, then a ``Metric,Value`` table, with display names such as
``Time to First Token (ms)``.
"""

from __future__ import annotations

import csv
import io
import re
from typing import Any

from kvledger.errors import FormatError
from kvledger.evidence._io import count, latency_s, number, percentile, to_seconds
from kvledger.evidence.aggregate import MetricSummary

__all__ = ["TAG_TO_METRIC", "summaries_from_tags", "scalar", "parse_csv_tables", "DISPLAY_TO_TAG"]

TAG_TO_METRIC: dict[str, tuple[str, str, str]] = {
    "time_to_first_token": ("ttft", "request", "time to first token per request"),
    "ttft": ("ttft", "request", "time to first token per request"),
    "inter_token_latency": ("tpot", "request", "AIPerf/GenAI-Perf 'inter_token_latency' = (e2e − ttft)/(osl − 1) per "
                                               "request, i.e. canonical TPOT"),
    "request_latency": ("e2e", "request", "end-to-end latency per request (to the last chunk)"),
    "inter_chunk_latency": ("itl", "gap",
                            "AIPerf 'inter_chunk_latency': every gap between chunks, pooled over requests"),
}
#: Display names (lower case, unit stripped) of the CSV form → tag.
DISPLAY_TO_TAG = {
    "time to first token": "time_to_first_token", "inter token latency": "inter_token_latency",
    "request latency": "request_latency", "inter chunk latency": "inter_chunk_latency",
    "benchmark duration": "benchmark_duration", "request count": "request_count",
    "error request count": "error_request_count", "total input sequence length": "total_isl",
    "total output sequence length": "total_osl", "goodput": "goodput", "good request count": "good_request_count",
    "request throughput": "request_throughput", "request goodput": "request_goodput",
}
_PCT = re.compile(r"^p(\d+(?:\.\d+)?)$")


def summaries_from_tags(path: str, table: dict[str, Any], where: str, n_ok: int | None) -> dict[str, MetricSummary]:
    """Canonical summaries from a ``{tag: {unit, avg, min, max, pNN, count}}`` table, converted to seconds.

    Raises:
        FormatError: an unknown time unit, NaN or negative latency, naming the tag and field.
    """
    out: dict[str, MetricSummary] = {}
    for tag, (metric, weighting, note) in TAG_TO_METRIC.items():
        entry = table.get(tag)
        if not isinstance(entry, dict) or metric in out:
            continue
        loc = f"{where}{tag}"
        scale = to_seconds(path, entry.get("unit"), f"{loc}.unit")
        m = MetricSummary(metric, weighting, source_field=tag, note=note)
        for key, value in entry.items():
            if value is None:
                continue
            pm = _PCT.match(key)
            if pm:
                m.percentiles_s[percentile(path, pm.group(1), f"{loc}.{key}")] = latency_s(path, value, f"{loc}.{key}",
                    scale)
            elif key in ("avg", "mean"):
                m.mean_s = latency_s(path, value, f"{loc}.{key}", scale)
            elif key == "min":
                m.min_s = latency_s(path, value, f"{loc}.{key}", scale)
            elif key == "max":
                m.max_s = latency_s(path, value, f"{loc}.{key}", scale)
            elif key == "median":
                m.percentiles_s[50.0] = latency_s(path, value, f"{loc}.{key}", scale)
        c = count(path, entry.get("count"), f"{loc}.count", allow_none=True)
        m.count = c if c is not None else (n_ok if weighting == "request" else None)
        out[metric] = m
    return out


def scalar(path: str, table: dict[str, Any], tag: str, where: str) -> tuple[float, str | None] | None:
    """``(value, unit)`` of a single-valued tag (``{unit, avg}`` or a bare number), or None when absent."""
    entry = table.get(tag)
    if entry is None:
        return None
    if isinstance(entry, dict):
        v = entry.get("avg", entry.get("value"))
        if v is None:
            return None
        return number(path, v, f"{where}{tag}.avg"), entry.get("unit")
    return number(path, entry, f"{where}{tag}"), None


def parse_csv_tables(path: str, text: str) -> dict[str, Any]:
    """The AIPerf/GenAI-Perf CSV as a tag table: statistic rows become dicts, ``Metric,Value`` rows become ``{unit,
    avg}``.

    Raises:
        FormatError: no ``Metric`` header row, or a row whose numbers cannot be read (row number given).
    """
    rows = list(csv.reader(io.StringIO(text)))
    table: dict[str, Any] = {}
    header: list[str] | None = None
    for i, row in enumerate(rows, start=1):
        if not row or not any(c.strip() for c in row):
            header = None
            continue
        if row[0].strip().lower() == "metric":
            header = [c.strip().lower() for c in row]
            continue
        if header is None:
            raise FormatError(path, "CSV row outside a table (expected a 'Metric,...' header first)", f"row {i}")
        tag, unit = _display(row[0])
        entry: dict[str, Any] = {"unit": unit}
        for col, cell in zip(header[1:], row[1:]):
            cell = cell.strip()
            if cell == "":
                continue
            try:
                entry["avg" if col == "value" else col] = float(cell)
            except ValueError:
                raise FormatError(path, f"cannot read {cell!r} as a number", f"row {i}, column {col!r}") from None
        table[tag] = entry
    if not table:
        raise FormatError(path, "CSV has no 'Metric,...' table; not an AIPerf/GenAI-Perf export")
    return table


def _display(name: str) -> tuple[str, str | None]:
    """``"Time to First Token (ms)"`` → ("time_to_first_token", "ms"); unknown names → snake_case."""
    m = re.match(r"^\s*(.*?)\s*(?:\(([^)]*)\))?\s*$", name)
    base, unit = (m.group(1), m.group(2)) if m else (name, None)
    key = base.lower()
    tag = DISPLAY_TO_TAG.get(key, re.sub(r"\W+", "_", key).strip("_"))
    return tag, unit
