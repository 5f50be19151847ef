"""What an inference-perf lifecycle report lacks or pools, read before it is judged (``inference_perf.read_lifecycle``):

- a pooled ``summary_lifecycle_metrics.json`` (every stage's requests in one distribution, no load rate stated) is no
  one run: refused with the words ``validate`` uses (``sidecars.summary_hint``);
- a report with no client config (``config.yaml``) beside it or above it has lost the run's settings: the model the
  client named and the one output length every request was generated to under ``ignore_eos``; a warning says so;
- the latency fields the report lacks, by the metric name an SLO uses (``metadata.extra["missing_metrics"]``), so that
  an SLO on one of them is refused (``ledgers.estimate``) instead of bounded at 0 … n;
- the output lengths a TPOT judged as (E2E − TTFT)/(output − 1) divides by (``metadata.extra["tpot_from_e2e"]``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from kvledger.errors import FormatError
from kvledger.evidence._io import amount, percentile
from kvledger.evidence.aggregate import AggregateRun
from kvledger.evidence.inference_perf_client import CLIENT_FILE, CLIENT_FILE_UP, client_config_path, fixed_output_tokens
from kvledger.records import WARNING_PREFIX, RunMetadata

__all__ = ["LATENCY_FIELDS", "check_not_pooled", "missing_metrics", "settings_warning", "tpot_from_e2e"]

LATENCY_FIELDS = {"ttft": "time_to_first_token", "tpot": "time_per_output_token", "e2e": "request_latency",
                  "itl": "inter_token_latency"}  # the SLO's metric → the report's successes.latency field
_PCT = re.compile(r"^p(\d+(?:\.\d+)?)$")


def check_not_pooled(path: str, obj: dict[str, Any]) -> None:
    """Refuse inference-perf's summary over every stage: named ``summary…lifecycle_metrics.json``, or a report whose
    ``load_summary`` counts requests but states no rate, send time or achieved rate (what the summary writes).

    Raises:
        FormatError: what the file is and which files to give instead (``sidecars.summary_hint``).
    """
    from kvledger.evidence.sidecars import summary_hint

    p = Path(path)
    load = obj.get("load_summary")
    pooled = isinstance(load, dict) and "count" in load and not {"requested_rate", "send_duration",
                                                                  "achieved_rate"} & set(load)
    if pooled or (p.name.startswith("summary") and p.name.endswith("lifecycle_metrics.json")):
        raise FormatError(path, summary_hint(p))


def settings_warning(path: str, meta: RunMetadata) -> None:
    """Where no client config lies beside the report or up to ``CLIENT_FILE_UP`` folders above, a warning definition
    saying what that loses (the model, when nothing else named it; the fixed output length a TPOT divides by)."""
    if client_config_path(path) is not None:
        return
    lost = ([] if meta.model else ["the model is not named"]) + [
        "whether every request was generated to one fixed length (ignore_eos) is unknown, so a TPOT divides by the "
        "file's re-tokenized output_len, which can under-count what the engine generated"]
    meta.definitions.insert(0, f"{WARNING_PREFIX}no {CLIENT_FILE} (the run's client settings) beside this file or up "
                               f"to {CLIENT_FILE_UP} folders above: {'; '.join(lost)}; keep the report in its run "
                               "folder")


def missing_metrics(lat: dict[str, Any]) -> dict[str, str]:
    """SLO metric → the ``successes.latency`` field this report lacks (module docstring)."""
    return {m: f"successes.latency.{f}" for m, f in LATENCY_FIELDS.items() if not isinstance(lat.get(f), dict)}


def _length_points(path: str, out: dict[str, Any]) -> list[tuple[float, float]]:
    """(percentile, tokens) of ``successes.output_len``'s min (p0), percentiles, median and max (p100), sorted.

    Raises:
        FormatError: a length that falls as the percentile rises (damaged file), naming both fields.
    """
    pts: dict[float, tuple[str, float]] = {}
    for key, value in out.items():
        pm = _PCT.match(key)
        p = percentile(path, pm.group(1), f"successes.output_len.{key}") if pm else \
            {"min": 0.0, "median": 50.0, "max": 100.0}.get(key)
        x = amount(path, value, f"successes.output_len.{key}", allow_none=True) if p is not None else None
        if x is not None:
            pts[p] = (key, x)  # type: ignore[index]
    ranked = sorted(pts.items())
    for (_, (ka, a)), (_, (kb, b)) in zip(ranked, ranked[1:]):
        if a > b * (1 + 1e-9):
            raise FormatError(path, f"{ka} {a:g} is above {kb} {b:g}; quantiles of one sample cannot fall as the "
                                    "percentile rises (damaged file)", "successes.output_len")
    return [(p, x) for p, (_, x) in ranked]


def tpot_from_e2e(path: str, succ: dict[str, Any], agg: AggregateRun) -> None:
    """Where a report has E2E, ``metadata.extra["tpot_from_e2e"]``: the output lengths per request (the client
    config's fixed length under ``ignore_eos``, else the counted ``output_len`` min, percentiles and max) and where
    they were read, so that a TPOT SLO is judged on (E2E − TTFT)/(output − 1) (``kvledger.ledgers.tpot_derived``), not
    on the file's ``time_per_output_token``, which disagrees with its own TTFT and E2E (kubecon NA 2025 baseline,
    1 req/s: 3.47 ms against (480.5 − 31.1)/(63.15 − 1) = 7.23 ms, below the 4.79 ms an H100 needs to read
    Llama-3.1-8B's weights once). Without TTFT statistics it is bounded with TTFT ≥ 0."""
    if "e2e" not in agg.metrics:
        return
    fixed = fixed_output_tokens(path)
    out = succ.get("output_len") if isinstance(succ.get("output_len"), dict) else {}
    if fixed is not None:
        points, mean = [(0.0, float(fixed)), (100.0, float(fixed))], float(fixed)
        where = f"{CLIENT_FILE}: every request generated to {fixed} tokens (ignore_eos)"
    else:
        points = _length_points(path, out)
        mean = amount(path, out.get("mean"), "successes.output_len.mean", allow_none=True)
        where = ("successes.output_len min, percentiles and max (the client's re-tokenized count)" if len(points) > 2
                 else "successes.output_len min … max (the client's re-tokenized count)")
    if not points or points[0][0] != 0.0 or points[-1][0] != 100.0:
        return  # without the min and max, no share of requests is bounded
    agg.metadata.extra["tpot_from_e2e"] = {"output_tokens": [points[0][1], points[-1][1]], "output_points": points,
                                           "output_mean": mean, "source": where, "counted_mean": out.get("mean")}
