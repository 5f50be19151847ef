"""A benchmark's aggregate-only run as a load stage (``kvledger.calibration.sweep.Stage``): what ``validate`` and
``calibrate`` compare when a vLLM or SGLang ``bench_serving`` (or AIPerf, GenAI-Perf) file keeps no per-request times.

A run sent at a finite request rate is replayed at that rate (open loop). A run sent at ``request_rate: inf`` under a
client cap on requests in flight — ``vllm bench serve --max-concurrency N``, SGLang ``bench_serving
--max-concurrency N``, AIPerf ``--concurrency N`` — is replayed as what it was: a closed loop of N clients, each
sending its next request when its previous one finishes (``kvledger.dynamics.workload.closed_loop.ClosedLoop``), N
being the file's ``max_concurrency`` (``RunMetadata.concurrency``), else ``--client-concurrency``. A run sent at a
finite rate under such a cap is replayed paced (``ClosedLoop.paced``): each request at its time at that rate, or
later when all N slots are taken, as those clients send it.
"""

from __future__ import annotations

import math
from typing import Any

from kvledger.calibration.sweep import Stage
from kvledger.errors import FormatError, InputError
from kvledger.evidence.metadata_keys import cap_source

__all__ = ["aggregate_stage", "closed_loop_users", "CLIENT_CAP_HINT"]

#: how a run's client cap is named on the command line and in each benchmark client
CLIENT_CAP_HINT = ("pass --client-concurrency N, the N of `vllm bench serve --max-concurrency N`, SGLang "
                   "`bench_serving --max-concurrency N` or AIPerf `--concurrency N`")


def _finite_rate(rate: Any) -> bool:
    return rate is not None and math.isfinite(rate) and rate > 0


def closed_loop_users(agg: Any, client_concurrency: int | None) -> tuple[int, str] | None:
    """The client cap on requests in flight of a run, and where it was read: the file's ``max_concurrency``
    (``metadata.concurrency``), else ``client_concurrency`` (``--client-concurrency``); None with no cap known (a run
    with a finite rate is then an open loop; without one, ``aggregate_stage`` refuses it).

    Raises:
        InputError: ``client_concurrency`` below 1.
    """
    if client_concurrency is not None and client_concurrency < 1:
        raise InputError(f"--client-concurrency must be a whole number ≥ 1 (the client's cap on requests in flight), "
                         f"got {client_concurrency}")
    meta = agg.metadata
    stated = meta.concurrency
    if stated:
        other = (f"; --client-concurrency {client_concurrency:,} not used" if client_concurrency
                 and client_concurrency != stated else "")
        return int(stated), f"{cap_source(meta)}{other}"
    if client_concurrency:
        return int(client_concurrency), f"--client-concurrency {client_concurrency:,}"
    return None


def _no_cap(agg: Any, label: str) -> FormatError:
    """The refusal of a run sent without a finite rate whose client cap is unknown: what is missing, how to give it."""
    meta = agg.metadata
    sent = "states no request rate" if meta.request_rate is None else "was sent at request_rate inf"
    count = (agg.num_completed or 0) + (agg.num_failed or 0)
    return FormatError(meta.source, f"{label}: the run {sent} and the file states no client cap on "
                                    "requests in flight (max_concurrency), so the load it was under is unknown: a run "
                                    "at request_rate inf is replayed as a closed loop of N clients, each sending its "
                                    f"next request when its previous one finishes; {CLIENT_CAP_HINT} (if the client "
                                    f"had no cap and sent every request at once, N = its {count:,} requests)")


def _check_ramp(agg: Any, label: str) -> None:
    """Refuse a run whose rate ramped (``vllm bench serve --ramp-up-strategy``; ``metadata.extra["ramp_up"]``): its
    aggregates keep no arrival times and a stage has one rate, so neither an open nor a closed loop replays it.

    Raises:
        FormatError: naming the ramp and what to run instead.
    """
    ramp = agg.metadata.extra.get("ramp_up")
    if not isinstance(ramp, dict):
        return
    raise FormatError(agg.metadata.source, f"{label}: the run's request rate ramped ({ramp.get('strategy')}) from "
                                           f"{ramp.get('start_rps'):g} to {ramp.get('end_rps'):g} req/s (vllm bench "
                                           "serve --ramp-up-strategy), and without --save-detailed the file keeps no "
                                           "per-request send times, so the ramp cannot be replayed: rerun with "
                                           "--save-detailed (its start_times are replayed as sent), or compare a run "
                                           "at one --request-rate")


def _check_counts(agg: Any, label: str) -> None:
    """Refuse a run with nothing to rebuild its load from, naming each missing figure.

    Raises:
        FormatError: no completed request, or no input or output token total.
    """
    meta = agg.metadata
    if not agg.num_completed:
        failed = f" ({agg.num_failed:,} failed)" if agg.num_failed else ""
        raise FormatError(meta.source, f"{label}: no request completed{failed}: there is nothing to replay and compare")
    missing = [what for what, v in (("input", agg.total_input_tokens), ("output", agg.total_output_tokens)) if not v]
    if missing:
        raise FormatError(meta.source, f"{label}: the file states no {' and no '.join(missing)} token total "
                                       f"(total_{'_tokens, total_'.join(missing)}_tokens, or the mean "
                                       f"{' and '.join(missing)} length), so the lengths of the requests to replay are "
                                       "unknown; an aggregate run needs them to be compared")


def aggregate_stage(agg: Any, label: str, users: tuple[int, str] | None) -> Stage:
    """A benchmark's aggregate-only run (``kvledger.evidence.aggregate.AggregateRun``: vLLM or SGLang ``bench_serving``
    without per-request details) as a stage: its request rate, request count (completed + failed), the send time
    they imply at that rate (count / rate), its TTFT/TPOT/E2E summaries (and ITL's where it states one: SGLang's
    ``bench_serving`` keeps only a median ITL and no TPOT), and lengths at the quantiles of the run's own
    ``input_lens``/``output_lens`` where the file keeps them (``extra["input_len_quantiles"]``), else uniform in
    SGLang's
    ``random_input_len·random_range_ratio … random_input_len`` when the run states them, else fixed at its means.
    Under a client cap (``users``, the run's ``closed_loop_users``: ``Stage.client_users``) the stage is a closed loop,
    paced at its rate where it has one; without a finite rate, its send time is the run's duration and its throughputs
    the file's.

    Raises:
        FormatError: a ramped rate (``_check_ramp``), no completed count or no token totals (``_check_counts``), or
        neither a finite request rate nor a client cap (``users`` None; ``_no_cap`` says what to give).
    """
    meta = agg.metadata
    _check_ramp(agg, label)
    _check_counts(agg, label)
    finite = _finite_rate(meta.request_rate)
    if users is None and not finite:
        raise _no_cap(agg, label)
    done, failed = agg.num_completed, agg.num_failed or 0
    rate = float(meta.request_rate) if finite else math.inf
    stated_ratio = meta.extra.get("random_range_ratio")  # 0.0 is a ratio (lengths from 1), not a missing one
    ratio = 1.0 if stated_ratio is None else float(stated_ratio)

    def lengths(stated: str, mean: float) -> list[tuple[float, float]]:
        kept = meta.extra.get(f"{stated.split('_')[1]}_len_quantiles")  # the run's own lengths (vllm_bench reader)
        if isinstance(kept, list) and kept:
            return [(float(q), float(v)) for q, v in kept]
        top = meta.extra.get(stated)
        if isinstance(top, (int, float)) and top > 0 and ratio < 1.0:
            return [(0.0, max(1.0, top * ratio)), (1.0, float(top))]
        return [(0.0, mean), (1.0, mean)]

    stats: dict[str, dict[str, float | None]] = {}
    for m in ("ttft", "tpot", "e2e", "itl"):
        ms = agg.metrics.get(m)
        if m == "itl" and ms is None:
            continue
        pct = ms.percentiles_s if ms is not None else {}
        stats[m] = {"mean": None if ms is None else ms.mean_s, "p50": pct.get(50.0), "p90": pct.get(90.0),
                    "p99": pct.get(99.0)}
    dur = meta.duration_s or ((done + failed) / rate if finite else None)
    req_s, out_s = meta.extra.get("request_throughput"), meta.extra.get("output_throughput")
    if not dur and not (req_s and out_s):
        raise FormatError(meta.source, f"{label}: the file states neither the run's duration nor its throughput, so "
                                       "the throughput the closed loop of its clients drew is unknown")
    send = (done + failed) / rate if finite else float(dur or done / req_s)
    return Stage(meta.source, rate, done + failed, send, stats,
                 lengths("random_input_len", agg.total_input_tokens / done),
                 lengths("random_output_len", agg.total_output_tokens / done),
                 float(req_s or done / dur), float(out_s or agg.total_output_tokens / dur), failed,
                 rate if users is None else float(req_s or done / dur),
                 meta.extra.get("backend") if isinstance(meta.extra.get("backend"), str) else None,
                 client_users=None if users is None else users[0], client_users_source=None if users is None
                 else users[1])
