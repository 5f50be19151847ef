"""Benchmark stages known only by aggregates (inference-perf ``stage_<k>_lifecycle_metrics.json``): the same synthetic
workload per stage, and stage aggregates predicted vs measured.

A stage states its requested rate, how many requests it sent, over how long, and the quantiles
of the prompt and output lengths its client counted. ``stage_workload`` draws that many
requests with Poisson arrivals filling the stage (gaps drawn exponentially and rescaled to
the stage's send duration, as inference-perf's ``constant`` timer does in
``inference_perf/loadgen/load_timer.py``) and lengths by inverse-CDF interpolation of the
stated quantiles — seeded, so the same stage always gives the same workload. When the client's config states a
``shared_prefix`` prompt pool (``kvledger.calibration.stage_launch.client_prompt_pool``: inference-perf re-sends a
fixed pool of whole prompts in turn), each request re-sends one of that many prompts, as a shared prefix of the
stage's shortest prompt length, so an engine with prefix caching is replayed with the reuse it had; callers may give
the groups and their length instead.
Requests that failed at the client are dropped (the workload holds only the stage's successes) and counted.
``stage_run`` wraps it as a ``MeasuredRun`` whose targets are the stage's aggregates, which
``kvledger.calibration.fit`` fits and ``stage_comparison`` compares.

TPOT. The stage files' ``time_per_output_token`` does not agree with their own TTFT, E2E and
output length: on the kubecon baseline's 1 req/s stage it is 3.47 ms while (E2E mean − TTFT mean)
/ (output mean − 1) = (480.5 − 31.1)/(63.15 − 1) = 7.23 ms, and 3.47 ms per token is below what
reading Llama-3.1-8B's 16.06 GB of bf16 weights from an H100's 3.35 TB/s allows (4.79 ms). So the
TPOT compared and fitted here is that derived mean (no percentiles); the file's own field is
kept as ``tpot_file`` and shown, not trusted. When the client's config beside the stage file says every request was
generated to one length under ``ignore_eos`` (``kvledger.calibration.stage_launch.fixed_output_tokens``), that length
replaces the client's re-tokenized count, in the derivation and in the replayed workload.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from kvledger.calibration.compare import Comparison, MetricRow, rel_error
from kvledger.calibration.replay import MeasuredRun
from kvledger.calibration.stage_launch import client_loop, fixed_output_tokens, pool_prefix, stage_launch
from kvledger.calibration.stage_notes import FILE_TPOT, counted_output_note, tpot_note
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.dynamics.outputs.metrics import summarize_records
from kvledger.errors import FormatError
from kvledger.records import RunMetadata, RunRecords

__all__ = ["Stage", "looks_like_stage", "read_stage", "stage_workload", "stage_run", "pool_prefix", "stage_comparison"]

_FIELDS = {"ttft": "time_to_first_token", "tpot": "time_per_output_token", "e2e": "request_latency"}
_STATS = {"mean": "mean", "p50": "median", "p90": "p90", "p99": "p99"}


@dataclass(frozen=True)
class Stage:
    """One load stage's aggregates, s and req/s (field names of inference-perf's lifecycle report)."""

    path: str
    requested_rate: float
    count: int
    send_duration_s: float
    stats: dict[str, dict[str, float]]  # metric → {mean, p50, p90, p99}
    prompt_quantiles: list[tuple[float, float]]  # (quantile 0–1, tokens)
    output_quantiles: list[tuple[float, float]]
    requests_per_s: float
    output_tokens_per_s: float
    num_failed: int
    achieved_rate: float
    backend: str | None = None  # the server the benchmark names (bench_serving's ``backend``), when it names one
    #: the client's counted output length (successes.output_len: min, mean), kept where the replay generates the
    #: client config's fixed length instead (``fixed_output_tokens``); None otherwise
    counted_output: tuple[float, float] | None = None
    #: a run sent at request_rate inf under a client cap: a closed loop of this many clients (``requested_rate`` inf,
    #: ``achieved_rate`` the run's throughput), and where that number was read; None for an open-loop stage
    client_users: int | None = None
    client_users_source: str | None = None
    typical_e2e_s: float | None = None  # a per-request run's drain allowance (ledgers/fell_behind.py); None: aggregates


def _quantiles(d: dict[str, float]) -> list[tuple[float, float]]:
    out = []
    for k, v in d.items():
        if k == "min":
            out.append((0.0, v))
        elif k == "max":
            out.append((1.0, v))
        elif k == "median":
            out.append((0.5, v))
        elif k.startswith("p"):
            out.append((float(k[1:]) / 100.0, v))
    return sorted(out)


def looks_like_stage(path: str | Path) -> bool:
    """True for an inference-perf lifecycle report with a ``load_summary`` (one stage, or the summary of several)."""
    p = Path(path)
    if not p.is_file() or p.suffix != ".json":
        return False
    try:
        d = json.loads(p.read_text(encoding="utf-8-sig"))
    except (OSError, ValueError):
        return False
    return isinstance(d, dict) and "load_summary" in d and "successes" in d


def read_stage(path: str | Path) -> Stage:
    """The aggregates of one ``stage_<k>_lifecycle_metrics.json``.

    The file first goes through the evidence reader goodput uses (``evidence.inference_perf.read_lifecycle``), so
    an impossible aggregate (a negative or non-finite latency, p50 above p99, a mean outside [min, max]) is refused
    with the same message here as there; the rate, send time and length quantiles only read here are checked too.

    Raises:
        FormatError: not an inference-perf stage file (a missing field is named), or a damaged value (named).
    """
    from kvledger.evidence._io import amount, load_document, positive
    from kvledger.evidence.inference_perf import read_lifecycle

    p = str(path)
    read_lifecycle(load_document(path))
    try:
        d = json.loads(Path(path).read_text(encoding="utf-8-sig"))
        load, ok = d["load_summary"], d["successes"]
        lat = ok["latency"]
        stats = {m: {s: float(lat[f][k]) for s, k in _STATS.items()} for m, f in _FIELDS.items()}
        positive(p, load["requested_rate"], "load_summary.requested_rate")
        amount(p, load["send_duration"], "load_summary.send_duration")
        for key in ("prompt_len", "output_len"):
            for q, v in ok[key].items():
                amount(p, v, f"successes.{key}.{q}")
        stats["tpot_file"] = stats.pop("tpot")
        fixed = fixed_output_tokens(path)  # ignore_eos with one output length: generated length known exactly
        out_mean = float(fixed if fixed is not None else ok["output_len"]["mean"])
        derived = (stats["e2e"]["mean"] - stats["ttft"]["mean"]) / (out_mean - 1) if out_mean > 1 else None
        stats["tpot"] = {"mean": derived, "p50": None, "p90": None, "p99": None}
        outputs = [(0.0, float(fixed)), (1.0, float(fixed))] if fixed is not None else _quantiles(ok["output_len"])
        return Stage(p, float(load["requested_rate"]), int(load["count"]), float(load["send_duration"]), stats,
                     _quantiles(ok["prompt_len"]), outputs,
                     float(ok["throughput"]["requests_per_sec"]), float(ok["throughput"]["output_tokens_per_sec"]),
                     int((d.get("failures") or {}).get("count") or 0), float(load.get("achieved_rate", 0.0)),
                     counted_output=(float(ok["output_len"]["min"]), float(ok["output_len"]["mean"]))
                     if fixed is not None else None)
    except (OSError, ValueError) as e:
        raise FormatError(p, f"cannot read it as JSON ({e})") from None
    except (KeyError, TypeError) as e:
        from kvledger.evidence.sidecars import sidecar_hint

        hint = sidecar_hint(p, None)  # a summary or Prometheus report: what it is and which file to give instead
        raise FormatError(p, hint or f"not an inference-perf stage lifecycle report: missing {e}") from None


def _draw(q: list[tuple[float, float]], u: np.ndarray) -> np.ndarray:
    qs, vs = np.array([a for a, _ in q]), np.array([b for _, b in q])
    return np.maximum(np.rint(np.interp(u, qs, vs)), 1).astype(int)


def stage_workload(stage: Stage, seed: int, *, prefix_groups: int = 0, prefix_tokens: int = 0) -> list[RequestSpec]:
    """``stage.count`` requests over the stage's send duration (module docstring); with ``prefix_groups`` > 0 each
    request's first ``prefix_tokens`` tokens are one of that many shared system prompts."""
    rng = np.random.default_rng(seed)
    n = max(stage.count - stage.num_failed, 1)  # failed requests dropped: their load on the engine is not known
    gaps = rng.exponential(1.0, n)
    t = np.concatenate([[0.0], np.cumsum(gaps[1:])])
    if n > 1 and t[-1] > 0:
        t *= stage.send_duration_s / t[-1]
    prompt = _draw(stage.prompt_quantiles, rng.random(n))
    output = _draw(stage.output_quantiles, rng.random(n))
    groups = rng.integers(0, max(prefix_groups, 1), n)
    out = []
    for i in range(n):
        seg = (int(groups[i]),) if prefix_groups > 0 and prompt[i] >= prefix_tokens > 0 else ()
        out.append(RequestSpec(f"s{i}", float(t[i]), int(prompt[i]), int(output[i]), prefix_segments=seg,
                               segment_tokens=prefix_tokens if seg else 512))
    return out


def stage_run(stage: Stage, label: str, seed: int = 0, client_concurrency: int | None = None,
              max_requests: int | None = None, **prefix: int) -> MeasuredRun:
    """The stage as a fit/validation target: its synthetic workload and its aggregates.

    When the client could not send at the requested rate (achieved < 95% of requested), its cap on requests in
    flight bound the load: the stage is replayed as that many client slots (``client_concurrency``, else the cap its
    client config states: ``stage_launch.client_loop``; ``metadata.extra["client_loop"]`` says which, or warns when
    none is known), paced: each request at its scheduled time (count ÷ requested rate) or when a slot frees.
    ``max_requests`` keeps only the stage's first requests (a shorter window of the same load, for fitting).
    A launch record beside the stage file (``kvledger.calibration.stage_launch``) names the model, TP and scheduler
    limits of the engine measured: they become the run's metadata and ``engine_hints``; without one, the model is the
    Deployment's (the manifests' ``MODEL_ID``), else the client config's, as the lifecycle reader takes it. Where
    the model was read is ``metadata.extra["model_source"]``. Without ``prefix`` (``prefix_groups``,
    ``prefix_tokens``), the client config's prompt pool sets them (``pool_prefix``; ``metadata.extra["prompt_pool"]``
    says so)."""
    launch = stage_launch(stage.path) if Path(stage.path).is_file() else None
    model, source = (launch.model, f"{launch.path} model") if launch and launch.model else (None, None)
    extra: dict[str, Any] = {"launch_record": launch.path, "record_file": launch.path} if launch and launch.path else {}
    hints, hardware = (launch.engine_kwargs if launch else {}), None
    where, facts = None, {}
    if not hints and Path(stage.path).is_file():  # no launch record: the Deployment's manifests, if kept beside
        from kvledger.evidence.k8s_manifests import manifest_facts

        where, facts = manifest_facts(stage.path)
        hints, hardware = facts.get("engine_kwargs") or {}, facts.get("accelerator")
        if facts.get("vllm_version"):
            extra["vllm_version"] = facts["vllm_version"]
        if hints or hardware:
            extra["record_file"] = str(where)
    if model is None and Path(stage.path).is_file():  # the engine's model (the Deployment's), else the client's
        from kvledger.evidence.inference_perf import client_config_model

        client, client_source = client_config_model(stage.path) or (None, None)
        model, source = (facts["deployed_model"], f"{where} MODEL_ID") if facts.get("deployed_model") else \
            (client, client_source)
        if facts.get("deployed_model") and client and client != model:
            source += f"; the client's config names {client}, the name it sent, not the model the engine served"
    if model is not None:
        extra["model_source"] = source
    if stage.backend is not None:
        extra["backend"] = stage.backend
    if not prefix:
        prefix, pool_note = pool_prefix(stage)
        if pool_note:
            extra["prompt_pool"] = pool_note
    meta = RunMetadata(source=stage.path, source_format="inference-perf-lifecycle", request_rate=stage.requested_rate,
                       model=model, hardware=hardware, num_gpus=hints.get("tensor_parallel_size"), extra=extra)
    capped, loop_note = client_loop(stage, client_concurrency, label)
    if loop_note:
        extra["client_loop"] = loop_note
    paced = capped is not None and math.isfinite(stage.requested_rate)  # the schedule: its count at its rate
    reqs = stage_workload(replace(stage, send_duration_s=stage.count / stage.requested_rate) if paced else stage, seed,
                          **prefix)
    return MeasuredRun(label, stage.path, reqs[:max_requests] if max_requests else reqs, RunRecords([], meta),
                       engine_hints=hints, target_stats=stage.stats,
                       concurrency=capped, num_dropped=stage.num_failed, paced=paced)


def _tokens_per_chunk(stage: Stage) -> float | None:
    """The stage's mean ITL ÷ mean TPOT where it reaches ``compare.MULTI_TOKEN_CHUNKS`` (several tokens a streamed
    chunk: the file's ITL is per chunk), else None."""
    from kvledger.calibration.compare import MULTI_TOKEN_CHUNKS

    itl, tpot = (stage.stats.get(m, {}).get("mean") for m in ("itl", "tpot"))
    ratio = itl / tpot if itl and tpot else None
    return ratio if ratio is not None and ratio >= MULTI_TOKEN_CHUNKS else None


def stage_comparison(label: str, stage: Stage, predicted: RunRecords, run: MeasuredRun | None = None,
                     prefix_caching: bool | None = None) -> Comparison:
    """Rows for TTFT, ITL (where the stage states it), TPOT, E2E (mean, p50, p90, p99) and throughput: the stage's
    aggregates against the replay (``run``: the replayed stage, whose note on how its client loop was replayed is
    kept; ``prefix_caching``: the replayed engine's, for the prompt pool's note, ``pool_prefix``)."""
    p = summarize_records(predicted)
    rows = []
    derived = "tpot_file" in stage.stats  # inference-perf: TPOT derived from E2E and TTFT (module docstring)
    per_chunk = _tokens_per_chunk(stage) if not derived else None
    for m, name in (("ttft", "TTFT"), ("itl", "ITL"), ("tpot", "TPOT"), ("e2e", "E2E"),
                    ("tpot_file", FILE_TPOT)):
        if m not in stage.stats or (m == "itl" and per_chunk is not None):
            continue
        ps = getattr(p, "tpot_s" if m == "tpot_file" else f"{m}_s")
        for s in _STATS:
            a, b = stage.stats[m][s], getattr(ps, s)
            if a is None:
                continue
            if m == "tpot" and derived:
                note = "(E2E mean − TTFT mean)/(output mean − 1) of the stage"
            elif m == "tpot_file":
                note = "inference-perf's time_per_output_token: inconsistent with its TTFT and E2E"
            else:
                note = ""
            rows.append(MetricRow(f"{name} {s}", "s", a, b, rel_error(b, a), note))
    rows.append(MetricRow("throughput", "req/s", stage.requests_per_s, p.throughput_req_per_s,
                          rel_error(p.throughput_req_per_s, stage.requests_per_s), "as each side defines it"))
    rows.append(MetricRow("output throughput", "tokens/s", stage.output_tokens_per_s, p.throughput_output_tok_per_s,
                          rel_error(p.throughput_output_tok_per_s, stage.output_tokens_per_s)))
    n = stage.client_users or 0
    loop = (f"paced under a cap of {n:,} in flight (each request at its time at the run's "
            "rate, or when a slot frees), through" if math.isfinite(stage.requested_rate)
            else f"a closed loop of {n:,} clients, each sending its next request when its previous "
            "one finishes, through")
    notes: list[Any] = ["aggregates only: the replay is a synthetic workload with the stage's rate, count, duration "
                        "and length quantiles, not the measured requests" if stage.client_users is None else
                        f"aggregates only: the replay is {loop} a synthetic workload with the run's completed count "
                        "and length quantiles, not the measured requests"]
    if derived:
        notes.append(tpot_note(stage))
    if per_chunk is not None:
        notes.append(f"ITL: the stage's mean gap between chunks is {per_chunk:.1f} × its mean TPOT, so the server "
                     "likely streamed several tokens a chunk (multi-step scheduling or a stream interval): its gaps "
                     "are then per chunk, not per token, and ITL is not compared (TPOT is)")
    if count_note := counted_output_note(stage):
        notes.append(count_note)
    if pool_note := pool_prefix(stage, prefix_caching)[1]:
        notes.append(pool_note)
    said = run.measured.metadata.extra if run is not None and run.measured is not None else {}
    notes += [said[k] for k in ("client_loop", "drawn_lengths", "multi_turn") if k in said]  # load, lengths, sessions
    if stage.num_failed:
        share = stage.num_failed / max(stage.count, 1)
        notes.append(f"{stage.num_failed:,} of the stage's {stage.count:,} requests ({share:.0%}) failed at the client "
                     "and are dropped: the replay sends only the successes"
                     + ("; WARNING: so many failed that the engine's real load is unknown: this stage's "
                        "latencies are not comparable" if share > 0.1 else ""))
    return Comparison(label, rows, stage.count - stage.num_failed, p.num_finished, None, notes)
