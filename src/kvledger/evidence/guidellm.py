"""Reader for GuideLLM ``benchmarks.json``: the current schema (``metadata.version: 2``) and the older v0.2–v0.4 one.

Each ``benchmarks[]`` entry is one run (a rate or concurrency level; docs/formats.md §4).
Requests sit in ``requests.{successful, errored, incomplete}``; they may be empty or a
reservoir sample (``sample_size``), in which case only the ``metrics`` summaries remain.
Timestamps are epoch **seconds**; fields ending in ``_ms`` are milliseconds. Traps:
GuideLLM ``inter_token_latency_ms`` is canonical TPOT, while ``time_per_output_token_ms``
*includes the first token*; per-token metrics are summarised token-weighted; percentile
keys are ``p001`` = 0.1 %, ``p01`` = 1 %, ``p05`` = 5 %, ``p999`` = 99.9 %.

Measured window: with warmup or cooldown (GuideLLM 0.5 ``config.warmup``/``cooldown``) the
request lists also hold the warmup and cooldown requests, while the ``metrics`` summarise only
those that overlap the benchmark's ``start_time`` … ``end_time`` (GuideLLM
``GenerativeRequestsAccumulator.get_within_range``: request end ≥ start_time and request start
≤ end_time). The reader keeps the same requests. ``incomplete`` requests (cancelled when the run
stopped) are not failures: they are left out, with a count in the notes.
"""

from __future__ import annotations

from typing import Any

from kvledger.errors import FormatError
from kvledger.evidence._io import Document, count, latency_s, number
from kvledger.evidence.aggregate import AggregateRun, MetricSummary
from kvledger.evidence.guidellm_fields import model_of, sampled
from kvledger.evidence.metadata_keys import CAP_FIELD_KEY
from kvledger.records import RequestRecord, RunMetadata, RunRecords

__all__ = ["FORMAT", "read", "GUIDELLM_PERCENTILES"]

FORMAT = "guidellm"
GUIDELLM_PERCENTILES = {"p001": 0.1, "p01": 1.0, "p05": 5.0, "p10": 10.0, "p25": 25.0, "p50": 50.0, "p75": 75.0,
                        "p90": 90.0, "p95": 95.0, "p99": 99.0, "p999": 99.9}
_METRICS = {  # GuideLLM metric → (canonical, seconds per unit, note)
    "time_to_first_token_ms": ("ttft", 1e-3, "time to first token per request"),
    "inter_token_latency_ms": ("tpot", 1e-3, "GuideLLM inter_token_latency_ms = (last − first token)/(output − 1), "
                                             "i.e. canonical TPOT; time_per_output_token_ms (first token included) is "
                                             "not used"),
    "request_latency": ("e2e", 1.0, "GuideLLM request_latency = request end − request start, s (slightly longer than "
                                    "to the last token)"),
}
_STATUSES = ("successful", "errored", "incomplete")
_WINDOW_DURATION = "duration = the benchmark's measured window (its 'duration'), s"


def read(doc: Document, *, aggregate_samples: bool = False) -> list[RunRecords | AggregateRun]:
    """One run per benchmark: RunRecords when requests were kept, else an AggregateRun; with ``aggregate_samples`` a
    benchmark whose lists keep only a sample of its requests is an AggregateRun too (a replay needs the run's load,
    which a sample's arrivals are not).

    Raises:
        FormatError: no benchmarks, NaN, negative latencies, naming ``benchmarks[i]`` and the field.
    """
    obj = doc.value
    benches = obj.get("benchmarks")
    if not isinstance(benches, list) or not benches:
        raise FormatError(doc.path, "no benchmarks in the file ('benchmarks' is missing or empty)", "benchmarks")
    version = obj.get("metadata", {}).get("version") if isinstance(obj.get("metadata"), dict) else None
    model = model_of(obj)
    return [_bench(doc.path, b, i, version, model, aggregate_samples) for i, b in enumerate(benches)]


def _bench(path: str, b: Any, i: int, version: Any, model: str | None,
           aggregate_samples: bool) -> RunRecords | AggregateRun:
    where = f"benchmarks[{i}]."
    if not isinstance(b, dict):
        raise FormatError(path, "expected a benchmark object", where.rstrip("."))
    meta = RunMetadata(source=path, source_format=FORMAT, model=model or model_of(b))
    cfg = b.get("config") if isinstance(b.get("config"), dict) else b.get("args", {})
    strategy = cfg.get("strategy") if isinstance(cfg, dict) and isinstance(cfg.get("strategy"), dict) else {}
    rate = strategy.get("rate")
    cap_key = next((k for k in ("streams", "max_concurrency") if strategy.get(k)), None)
    conc = strategy.get(cap_key) if cap_key else None
    meta.request_rate = float(rate) if isinstance(rate, (int, float)) and not isinstance(rate, bool) else None
    if strategy.get("type_") == "synchronous" and conc is None:  # one request at a time (scheduler/strategy.py,
        conc = 1  # SynchronousStrategy: processing_requests_limit 1)
        meta.definitions.append("synchronous strategy: one request at a time, read as a client cap of 1 in flight")
    meta.concurrency = conc if isinstance(conc, int) and strategy.get("type_") in ("concurrent",
                                                                                   "synchronous") else None
    meta.duration_s = latency_s(path, b.get("duration"), f"{where}duration", allow_none=True)
    meta.extra = {"run_label": f"benchmark {i} ({strategy.get('type_', '?')}" + (f" @ {rate} req/s)" if rate else ")"),
                  "schema_version": version, "strategy": strategy}
    if meta.concurrency is not None:  # the cap as the file names it: its strategy's streams or max_concurrency
        meta.extra[CAP_FIELD_KEY] = (f"strategy.{cap_key}" if cap_key else
                                     "synchronous strategy (one request at a time), cap")
    meta.definitions.append(f"GuideLLM schema version {version if version is not None else '1 (pre-metadata layout)'}")
    reqs = b.get("requests") if isinstance(b.get("requests"), dict) else {}
    kept = {s: list(enumerate(reqs.get(s) or [])) for s in _STATUSES}
    totals = _totals(path, b, where)
    if aggregate_samples and sampled(kept, totals):
        meta.definitions.append("the request lists keep a sample of the run's requests: replayed from the aggregates")
        kept = {s: [] for s in _STATUSES}
    if any(kept.values()):
        window = _window(path, b, where)
        kept, done_inside = _measured(path, kept, window, meta, where)
        if kept["successful"] or kept["errored"]:
            return _records(path, kept, totals, meta, window, done_inside, where)
        meta.definitions.append("no successful or errored request inside the measured window: aggregates only")
    else:
        meta.definitions.append("no per-request records kept (empty request lists): aggregates only; goodput can "
                                "only be bounded")
    meta.definitions.append(_WINDOW_DURATION)
    return _aggregate(path, b, totals, meta, where)


def _totals(path: str, b: dict[str, Any], where: str) -> dict[str, int | None]:
    src = b.get("metrics", {}).get("request_totals") if isinstance(b.get("metrics"), dict) else None
    if not isinstance(src, dict):
        src = b.get("request_totals") if isinstance(b.get("request_totals"), dict) else {}
    return {s: count(path, src.get(s), f"{where}request_totals.{s}", allow_none=True) for s in _STATUSES}


def _window(path: str, b: dict[str, Any], where: str) -> tuple[float, float] | None:
    """The measured window (epoch s): the benchmark's ``start_time``/``end_time``, None when either is missing."""
    lo = number(path, b.get("start_time"), f"{where}start_time", allow_none=True)
    hi = number(path, b.get("end_time"), f"{where}end_time", allow_none=True)
    if lo is None or hi is None:
        return None
    if hi < lo:
        raise FormatError(path, f"end_time {hi} is before start_time {lo}: the measured window is negative", where)
    return lo, hi


def _timings(path: str, r: Any, where: str) -> dict[str, Any]:
    """A request's ``info.timings`` (v2 layout; {} where it has none, as in the older layout's top-level times).

    Raises:
        FormatError: the request is not an object.
    """
    if not isinstance(r, dict):
        raise FormatError(path, "expected a request object", where)
    info = r.get("info")
    timings = info.get("timings") if isinstance(info, dict) else None
    return timings if isinstance(timings, dict) else {}


def _span(path: str, r: Any, where: str) -> tuple[float | None, float | None]:
    """(request start, request end) in epoch s as GuideLLM's window test reads them (None where not stated)."""
    timings = _timings(path, r, where)

    def first(*keys: str) -> Any:
        return next((x for x in (r.get(k, timings.get(k)) for k in keys) if x is not None), None)

    start = number(path, first("request_start_time", "request_start", "start_time"), f"{where}request_start_time",
                   allow_none=True)
    end = number(path, first("request_end_time", "request_end", "resolve_end", "end_time", "last_token_iteration",
                             "last_token_time"), f"{where}request_end_time", allow_none=True)
    return start, end


def _measured(path: str, kept: dict[str, list[tuple[int, Any]]], window: tuple[float, float] | None,
              meta: RunMetadata, where: str) -> tuple[dict[str, list[tuple[int, Any]]], int]:
    """The successful and errored requests GuideLLM's metrics summarise (incomplete ones left out, counted), and how
    many of the successful ones end inside the window (the completions its requests_per_second counts)."""
    out: dict[str, list[tuple[int, Any]]] = {"successful": [], "errored": [], "incomplete": []}
    before = after = inside_incomplete = done_inside = 0
    for status in _STATUSES:
        for j, r in kept[status]:
            start, end = _span(path, r, f"{where}requests.{status}[{j}].")
            if window is None or end is None:
                inside = True
            else:
                inside = end >= window[0] and (start <= window[1] if start is not None else end <= window[1])
            if status == "incomplete":
                inside_incomplete += inside
            elif inside:
                out[status].append((j, r))
                if status == "successful" and window is not None and end is not None and window[0] <= end <= window[1]:
                    done_inside += 1
            elif end is not None and end < window[0]:
                before += 1
            else:
                after += 1
    if window is not None and (before or after):
        lo, hi = window
        n_ok, n_all = len(out["successful"]), len(kept["successful"])
        meta.definitions.append(
            f"measured window {where}start_time … end_time = {hi - lo:.1f} s: kept, as GuideLLM's metrics do, the "
            f"requests that end at or after its start and start at or before its end ({n_ok} of {n_all} successful, "
            f"{len(out['errored'])} of {len(kept['errored'])} errored); left out {before} that ended before it "
            f"(warmup) and {after} that started after it (cooldown)")
    if kept["incomplete"]:
        n = len(kept["incomplete"])
        meta.definitions.append(f"{n} incomplete request(s) (cancelled when the run stopped; {inside_incomplete} "
                                "inside the measured window) left out: not failures, not counted")
    return out, done_inside


def _records(path: str, kept: dict[str, list[tuple[int, Any]]], totals: dict[str, int | None], meta: RunMetadata,
             window: tuple[float, float] | None, done_inside: int, where: str) -> RunRecords:
    """The kept requests as records; ``done_inside``: the successful ones that end inside the window (``_measured``)."""
    raw = []
    for status in ("successful", "errored"):
        for j, r in kept[status]:
            raw.append(_one(path, r, status, f"{where}requests.{status}[{j}]"))
    t0 = min(a for a, _ in raw)
    records = [_shift(rec, t0) for _, rec in raw]
    meta.time_origin = f"first request start, Unix epoch {t0} s"
    meta.definitions.append(
        "arrival = request start; TTFT/E2E to the first/last token iteration (epoch s); no per-chunk times, so no ITL "
        "SLO (itl_max, itl_mean, itl_pQ) can be judged per request; a request's mean ITL as GuideLLM reports it "
        "(inter_token_latency_ms = (last − first token)/(output − 1)) is its TPOT here: write tpot=… for it")
    last = max((rec.finish_s for _, rec in raw if rec.finish_s is not None), default=t0)
    if window is not None and (t0 < window[0] or last > window[1]):
        meta.duration_s = None
        meta.definitions.append(_span_duration(done_inside, window, last - t0))
    else:
        meta.definitions.append(_WINDOW_DURATION)
    ok_kept, fail_kept = len(kept["successful"]), len(kept["errored"])
    ok_total, fail_total = totals["successful"], totals["errored"] or 0
    if ok_total is not None and (ok_total > ok_kept or fail_total > fail_kept):
        meta.extra["sample_weights"] = {"ok": ok_total / ok_kept if ok_kept else 0.0,
                                        "failed": fail_total / fail_kept if fail_kept else 0.0}
        meta.definitions.append(f"requests were reservoir-sampled (kept {ok_kept} of {ok_total} successful, "
                                f"{fail_kept} of {fail_total} failed): counts are scaled up, so goodput is an estimate")
    return RunRecords(records, meta)


def _span_duration(done_inside: int, window: tuple[float, float], span: float) -> str:
    """The note for a run whose kept requests run past the measured window: its duration is their span."""
    width = window[1] - window[0]
    text = (f"duration = last finish − first start of the kept requests ({span:.1f} s), not the {width:.1f} s "
            "measured window they run past")
    if width > 0:
        text += (f"; GuideLLM's requests_per_second counts the {done_inside} completions inside the window: "
                 f"{done_inside} ÷ {width:.1f} s = {done_inside / width:.4f} req/s")
    return text


def _shift(rec: RequestRecord, t0: float) -> RequestRecord:
    sh = lambda x: None if x is None else x - t0  # noqa: E731
    return RequestRecord(rec.request_id, rec.arrival_s - t0, rec.num_prompt_tokens, rec.num_output_tokens,
                         sh(rec.first_token_s), sh(rec.finish_s), None, error=rec.error)


def _one(path: str, r: Any, status: str, where: str) -> tuple[float, RequestRecord]:
    timings = _timings(path, r, where)

    def pick(*keys: str) -> Any:
        return next((x for x in (timings.get(k, r.get(k)) for k in keys) if x is not None), None)

    start = number(path, pick("request_start", "request_start_time", "start_time"), f"{where}request_start")
    first = number(path, pick("first_token_iteration", "first_token_time"), f"{where}first_token_iteration",
                   allow_none=True)
    last = number(path, pick("last_token_iteration", "last_token_time", "request_end", "request_end_time", "end_time"),
                  f"{where}last_token_iteration", allow_none=True)
    for name, t in (("first token", first), ("last token", last)):
        if t is not None and t < start:
            raise FormatError(path, f"{name} time {t} is before the request start {start}: negative latency", where)
    n_in = count(path, r.get("prompt_tokens") or 0, f"{where}prompt_tokens")
    n_out = count(path, r.get("output_tokens") or 0, f"{where}output_tokens")
    rid = str(r.get("request_id") or where)
    err = None
    if status != "successful":
        info = r.get("info") if isinstance(r.get("info"), dict) else {}
        err = f"{status}: {info.get('error') or r.get('error') or 'no detail'}"
    return start, RequestRecord(rid, start, n_in, n_out, first if err is None else None, last, None, error=err)


def _aggregate(path: str, b: dict[str, Any], totals: dict[str, int | None], meta: RunMetadata,
               where: str) -> AggregateRun:
    agg = AggregateRun(meta, duration_s=meta.duration_s)
    agg.num_completed = totals["successful"]
    agg.num_failed = totals["errored"] or 0
    meta.definitions.append("errored requests counted as failed; incomplete ones (cancelled when the run stopped: "
                            f"{totals['incomplete'] or 0}) left out, not failures")
    metrics = b.get("metrics") if isinstance(b.get("metrics"), dict) else {}
    for name, (canon, scale, note) in _METRICS.items():
        succ = metrics.get(name, {}).get("successful") if isinstance(metrics.get(name), dict) else None
        if isinstance(succ, dict):
            agg.metrics[canon] = _summary(path, succ, canon, scale, note, agg.num_completed,
                                          f"{where}metrics.{name}.successful")
    for attr, name in (("total_input_tokens", "prompt_token_count"), ("total_output_tokens", "output_token_count")):
        succ = metrics.get(name, {}).get("successful") if isinstance(metrics.get(name), dict) else None
        if isinstance(succ, dict) and succ.get("total_sum") is not None:
            setattr(agg, attr, int(round(number(path, succ["total_sum"],
                                                f"{where}metrics.{name}.successful.total_sum"))))
    return agg


def _summary(path: str, d: dict[str, Any], canon: str, scale: float, note: str, n_ok: int | None,
             where: str) -> MetricSummary:
    c = count(path, d.get("count"), f"{where}.count", allow_none=True)
    weighting = "request" if c is None or n_ok is None or c == n_ok else "token"
    m = MetricSummary(canon, weighting, count=c, source_field=where.split("metrics.")[-1], note=note)
    m.mean_s = latency_s(path, d.get("mean"), f"{where}.mean", scale, allow_none=True)
    m.min_s = latency_s(path, d.get("min"), f"{where}.min", scale, allow_none=True)
    m.max_s = latency_s(path, d.get("max"), f"{where}.max", scale, allow_none=True)
    if d.get("median") is not None:
        m.percentiles_s[50.0] = latency_s(path, d["median"], f"{where}.median", scale)
    pcts = d.get("percentiles") if isinstance(d.get("percentiles"), dict) else {}
    for key, value in pcts.items():
        if key in GUIDELLM_PERCENTILES and value is not None:
            m.percentiles_s[GUIDELLM_PERCENTILES[key]] = latency_s(path, value, f"{where}.percentiles.{key}", scale)
    if weighting == "token":
        m.note += f"; summarised over {c} values for {n_ok} requests (token-weighted), so only min/max bound requests"
    return m
