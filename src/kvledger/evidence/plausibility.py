"""Whether a run read from a file can be physically true, checked once for every reader at the boundary.

Refused (``FormatError``): a request's TTFT or E2E longer than the whole run it belongs to (the usual cause: latencies
written in milliseconds where the format wants seconds; vLLM's per-request arrays are seconds) and an aggregate
latency longer than the run. Repaired and said: a stated duration shorter than the requests' own timeline (first start
to last finish), which would inflate every rate, is replaced by that timeline. Warned (a ``WARNING_PREFIX`` line in
``metadata.definitions``, which goodput, validate and their ``--json`` carry): completed/failed counts that contradict
the per-request arrays, and a TPOT below the time a GPU needs to read the model's weights once
(``evidence.weight_floor``), the physical floor inference-perf's own TPOT field was found to break.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from kvledger.errors import FormatError
from kvledger.evidence.aggregate import AggregateRun
from kvledger.evidence.weight_floor import tpot_floor_warning
from kvledger.records import WARNING_PREFIX, RunRecords

__all__ = ["check_run", "SLACK_SHARE", "SLACK_S"]

#: a latency may exceed the stated duration, or the timeline the duration, by this share plus SLACK_S before it is
#: judged impossible (two clocks read a few ms apart, a duration rounded in the file)
SLACK_SHARE = 0.05
SLACK_S = 0.05
#: the file's key of the stated duration, for the formats whose duration spans every request the file holds (vLLM's
#: and SGLang's clients time the run from before the first send to after the last response); others state a window
#: their kept requests may run past (GuideLLM) or time the run otherwise, so only these are judged against it
_DURATION_KEY = {"vllm-bench-serve": "duration", "sglang-bench-serving": "duration"}
#: the file's keys of the per-request TTFT and E2E, per format
_ARRAY_KEYS = {"vllm-bench-serve": ("ttfts", "latencies"), "sglang-bench-serving": ("ttfts", "latencies")}


def check_run(run: RunRecords | AggregateRun) -> None:
    """Refuse, repair or warn as the module docstring says; ``run.metadata`` takes the notes.

    Raises:
        FormatError: a latency longer than the run, naming the file, the key and both figures.
    """
    if isinstance(run, RunRecords):
        _check_records(run)
    else:
        _check_aggregate(run)
    warning = tpot_floor_warning(run)
    if warning:
        run.metadata.definitions.append(WARNING_PREFIX + warning)


def _duration_key(meta: Any) -> str:
    return f"'{_DURATION_KEY[meta.source_format]}'"


def _times(run: RunRecords) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """arrival, first token, finish (NaN where unknown), ok, one entry per request."""
    c = run.columns
    if c is not None:
        return c.arrival_s, c.first_token_s, c.finish_s, c.ok
    recs = run.records
    nan = math.nan
    return (np.array([r.arrival_s for r in recs], dtype=float),
            np.array([nan if r.first_token_s is None else r.first_token_s for r in recs], dtype=float),
            np.array([nan if r.finish_s is None else r.finish_s for r in recs], dtype=float),
            np.array([r.ok for r in recs], dtype=bool))


def _check_records(run: RunRecords) -> None:
    meta = run.metadata
    if not len(run.records) or meta.source_format not in _DURATION_KEY or meta.extra.get("shared_clock") is False:
        _check_counts(run)
        return
    arrival, first, finish, ok = _times(run)
    duration = meta.duration_s
    if duration:  # a stated 0 is no duration at all: ledgers.goodput.run_duration_s takes the records' span, saying so
        sent_s = float(arrival.max() - arrival.min())
        if sent_s <= duration * (1 + SLACK_SHARE) + SLACK_S:  # else the duration is wrong, not the latencies
            _refuse_long_latency(run, arrival, first, finish, duration)
        span = run.span_s
        if duration < span * (1 - SLACK_SHARE) - SLACK_S:
            meta.duration_s = span
            meta.extra["duration_replaced_s"] = duration  # the file's own figure, for the duration's source line
            meta.definitions.append(
                f"{WARNING_PREFIX}{meta.source}: the file's {_duration_key(meta)} {duration:,.3f} s is shorter than "
                f"its requests' own timeline, first start to last finish {span:,.3f} s (the starts alone span "
                f"{sent_s:,.3f} s), which no run can be; the timeline is used as the duration (every per-second "
                "figure divides by it)")
    _check_counts(run, ok)


def _refuse_long_latency(run: RunRecords, arrival: np.ndarray, first: np.ndarray, finish: np.ndarray,
                         duration: float) -> None:
    meta = run.metadata
    limit = duration * (1 + SLACK_SHARE) + SLACK_S
    keys = _ARRAY_KEYS.get(meta.source_format, ("TTFT", "E2E"))
    for name, key, t in (("TTFT", keys[0], first), ("E2E latency", keys[1], finish)):
        lat = t - arrival
        if not np.isfinite(lat).any():
            continue
        i = int(np.nanargmax(lat))
        if lat[i] > limit:
            rid = run.columns.request_id(i) if run.columns is not None else run.records[i].request_id
            raise FormatError(meta.source, f"request {rid}'s {name} is {lat[i]:,.3f} s, longer than the whole run "
                              f"({_duration_key(meta)}: {duration:,.3f} s), which no request can be. Were the "
                              f"latencies written in milliseconds where this format wants seconds ({lat[i]:,.3f} ms "
                              f"would be {lat[i] / 1e3:.3f} s)? Rewrite them in seconds", key)


def _check_counts(run: RunRecords, ok: np.ndarray | None = None) -> None:
    """Warn when the file's ``completed``/``failed`` counts contradict its per-request records."""
    extra = run.metadata.extra
    said = {k: extra.get(k) for k in ("completed", "failed")}
    if not any(isinstance(v, int) and not isinstance(v, bool) for v in said.values()):
        return
    if ok is None:
        ok = _times(run)[3]
    n_ok = int(np.count_nonzero(ok))
    have = {"completed": n_ok, "failed": len(ok) - n_ok}
    wrong = [k for k, v in said.items() if isinstance(v, int) and not isinstance(v, bool) and v != have[k]]
    if not wrong:
        return
    stated = ", ".join(f"{k}: {said[k]}" for k in said if said[k] is not None)
    run.metadata.definitions.append(
        f"{WARNING_PREFIX}{run.metadata.source}: the file's counts ({stated}) contradict its per-request arrays: "
        f"{len(ok):,} requests, {have['failed']:,} with an error entry, so {n_ok:,} completed and "
        f"{have['failed']:,} failed; the arrays are used (were the counts or the errors edited?)")


def _check_aggregate(agg: AggregateRun) -> None:
    duration = agg.duration_s
    if not duration or agg.metadata.source_format not in _DURATION_KEY:
        return
    limit = duration * (1 + SLACK_SHARE) + SLACK_S
    for name, m in agg.metrics.items():
        values = [v for v in (m.mean_s, m.max_s, *m.percentiles_s.values()) if v is not None]
        if values and max(values) > limit:
            raise FormatError(agg.metadata.source, f"the {name.upper()} summary reaches {max(values):,.3f} s, longer "
                              f"than the whole run ({_duration_key(agg.metadata)}: {duration:,.3f} s), which no "
                              "request can be. Were these written in another unit than the key says?",
                              m.source_field or name)
