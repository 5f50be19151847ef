"""Measured runs as replayable workloads, and their replay through the simulator with every step's shape kept (what the
fit needs).

A measured run is replayable when it has, per request, an arrival time, prompt and output
lengths, and the measured first-token and finish times. ``load_measured`` reads one from any
file the benchmark readers know (``kvledger.evidence.read``), LLMServingSim's bench
``requests.jsonl`` (``kvledger.evidence.llmservingsim``), or DistServe's bundled vLLM runs
(``distserve:vllm-100-1`` or an ``.exp`` path; ``kvledger.dynamics.workload.distserve_runs``). Files
with only aggregates are refused with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from kvledger.accounting.fitted_cost import NUM_GPU_TERMS, step_features
from kvledger.accounting.stepcost import StepCostModel, StepShape
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.dynamics.simulator import EngineConfig, SimResult, simulate
from kvledger.errors import FormatError, InputError, running
from kvledger.records import RunRecords

__all__ = ["MeasuredRun", "load_measured", "measured_from_records", "replayable", "StepTable", "replay",
           "replay_recorded"]

DISTSERVE_PREFIX = "distserve:"


@dataclass
class MeasuredRun:
    """One measured run ready to replay: its workload and its measured outcome, request by request.

    Attributes:
        label: how tables name it (file stem or bundled name).
        source: the file (or bundled name) it came from.
        requests: the workload (arrival times from 0, lengths), in arrival order.
        measured: the measured records, ``requests[i]`` ↔ ``measured.records[i]``.
        engine_hints: launch settings the source states (vLLM names), for the user's information.
        target_stats: for a run known only by aggregates (a benchmark stage): metric ("ttft", "tpot", "e2e") →
            {"mean", "p50", "p90", "p99"} in s; ``requests`` is then a synthetic workload like the stage's and
            ``measured`` holds no record.
        concurrency: when the client capped the requests in flight (a closed loop), that cap; None for open loop.
        paced: the capped client also kept a request rate: no request is sent before its own ``arrival_s``
            (``ClosedLoop.paced``).
        num_dropped: requests of the record left out (failed, or without a first-token or finish time).
        sessions: the run's sessions when its records name them (``session_replay.session_loop``): the workload
            replayed instead of ``requests``' arrivals (each turn after its previous one, the history re-sent).
    """

    label: str
    source: str
    requests: list[RequestSpec]
    measured: RunRecords
    engine_hints: dict = field(default_factory=dict)
    target_stats: dict | None = None
    concurrency: int | None = None
    num_dropped: int = 0
    paced: bool = False
    sessions: object = None


def measured_from_records(run: RunRecords, label: str) -> MeasuredRun:
    """A replayable run from per-request records (only requests that finished; arrivals shifted to start at 0); a
    vLLM or SGLang file that keeps no send times gets them drawn as its client sent (``send_times``), said in
    ``metadata.extra["client_loop"]``.

    Raises:
        InputError: no finished request with a first-token time.
    """
    from kvledger.calibration.send_times import drawn_send_times

    run, cap, paced, sent = drawn_send_times(run)  # a file without send times: sent as its client sent them
    if sent:  # a copy of the record's extra: the reader's own run keeps its metadata as read
        run = replace(run, metadata=replace(run.metadata, extra={**run.metadata.extra, "client_loop": sent}))
    ok = [r for r in run.records if r.ok and r.first_token_s is not None and r.finish_s is not None
          and r.num_prompt_tokens >= 1 and r.num_output_tokens >= 1]
    if not ok:
        raise InputError(f"{label}: no finished request with arrival, first-token and finish times; cannot replay it")
    ok.sort(key=lambda r: r.arrival_s)
    t0 = ok[0].arrival_s
    from kvledger.records import RequestRecord

    recs = [RequestRecord(r.request_id, r.arrival_s - t0, r.num_prompt_tokens, r.num_output_tokens,
                          first_token_s=r.first_token_s - t0, finish_s=r.finish_s - t0,
                          chunk_times_s=None if r.chunk_times_s is None else r.chunk_times_s - t0) for r in ok]
    specs = [RequestSpec(r.request_id, r.arrival_s, r.num_prompt_tokens, r.num_output_tokens) for r in recs]
    meta, loop = run.metadata, None
    pairs = meta.extra.get("sessions")
    if isinstance(pairs, list) and len(pairs) == len(run.records):  # a multi-turn run: its sessions, not arrivals
        from kvledger.calibration.session_replay import session_loop

        key_of = {id(r): k for r, k in zip(run.records, pairs)}
        loop, turns, said = session_loop(recs, [key_of[id(r)] for r in ok])
        specs, meta = turns or specs, replace(meta, extra={**meta.extra, "client_loop": said})
    return MeasuredRun(label, meta.source, specs, RunRecords(recs, meta),
                       dict(meta.extra.get("engine_kwargs") or {}), num_dropped=len(run.records) - len(ok),
                       concurrency=cap, paced=paced, sessions=loop)


def load_measured(path: str) -> MeasuredRun:
    """The replayable run in ``path`` (module docstring for what is read).

    Raises:
        FormatError / InputError: unreadable file, several runs in one file, or aggregates only (with why that cannot
        be replayed).
    """
    if path.startswith(DISTSERVE_PREFIX) or path.endswith(".exp"):
        from kvledger.dynamics.workload.distserve_runs import DISTSERVE_VLLM_SETTINGS, load_distserve_run

        d = load_distserve_run(path[len(DISTSERVE_PREFIX):] if path.startswith(DISTSERVE_PREFIX) else path)
        return MeasuredRun(d.name, path, list(d.requests), d.measured, dict(DISTSERVE_VLLM_SETTINGS))
    from kvledger.evidence.llmservingsim import looks_like_llmservingsim, read_llmservingsim

    p = Path(path)
    if looks_like_llmservingsim(p):
        run = read_llmservingsim(p)  # the folder given, or its requests.jsonl: labelled by the file read
        return measured_from_records(run, _label(Path(run.metadata.source)))
    if not p.exists():
        raise InputError(f"{path}: no such file (give a benchmark file with per-request times, an aggregate one "
                         "(vLLM/SGLang bench_serving, AIPerf), an inference-perf stage report, an LLMServingSim "
                         "requests.jsonl, or a bundled DistServe run such as distserve:vllm-100-1)")
    from kvledger.evidence.read import read_runs

    runs = read_runs(p)
    per_request = [r for r in runs if isinstance(r, RunRecords)]
    if not per_request:
        raise FormatError(path, "holds only aggregate statistics (percentiles or means per run), no per-request "
                                "arrival and token times, so it cannot be replayed request by request; calibrate on a "
                                "per-request file, or compare stage aggregates with benchmarks/validate_all.py's sweep")
    if len(runs) > 1:  # ``calibration.targets.load_targets`` reads each run of such a file
        raise FormatError(path, f"holds {len(runs)} runs; read them with load_targets (one target per run)")
    return replayable(per_request[0], path, _label(p))


def replayable(run: RunRecords, path: str, label: str) -> MeasuredRun:
    """One per-request run of the file ``path`` as a replayable run labelled ``label`` (``measured_from_records``).

    Raises:
        FormatError: its requests carry no common clock (llmperf's per-request files), so no arrival can be replayed.
        InputError: no finished request (``measured_from_records``).
    """
    if run.metadata.extra.get("shared_clock") is False:
        what = "an llmperf per-request file" if "llmperf" in run.metadata.source_format else "a file"
        raise FormatError(path, f"this is {what} whose requests carry no common clock (each is timed on its own), "
                                "so their arrival "
                                f"times cannot be replayed; give {running()} a benchmark file that records when each "
                                "request was sent (any per-request format `kvledger goodput --help` names but "
                                "llmperf's, e.g. inference-perf's per_request_lifecycle_metrics.json)")
    return measured_from_records(run, label)


def _label(p: Path) -> str:
    """A run's name: an LLMServingSim ``<model>/<engine>/requests.jsonl`` by its two folders (``Llama-3.1-8B/vllm``),
    a folder by its whole name, another file by its name without the suffix. The folders are read off the resolved
    path, so that a run typed as ``myrun`` or ``.`` is named ``t7/myrun`` as from anywhere else (not ``/myrun``,
    ``/``)."""
    if p.name == "requests.jsonl":
        try:
            p = p.resolve()
        except (OSError, RuntimeError):
            pass
        return "/".join(x for x in (p.parent.parent.name, p.parent.name) if x)
    return p.name if p.is_dir() else p.stem


class _Recorder:
    """A step-cost model that prices steps with ``inner`` and keeps each step's features and GPU/CPU split."""

    def __init__(self, inner: StepCostModel) -> None:
        self.inner, self.name = inner, getattr(inner, "name", "recorded")
        self.features: list[tuple[float, ...]] = []

    def step_time_s(self, shape: StepShape) -> float:
        self.features.append(step_features(shape))
        return self.inner.step_time_s(shape)

    def decode_steps_s(self, num_seqs: int, kv_tokens: int, num_steps: int) -> np.ndarray:
        raise RuntimeError("the recorder runs with fast_forward=False; decode stretches are not expected")


@dataclass
class StepTable:
    """Every step of one replay: GPU-term features (``GPU_TERMS`` order), start and end times, s."""

    features: np.ndarray  # (n_steps, NUM_GPU_TERMS)
    start_s: np.ndarray
    end_s: np.ndarray


def _workload(run: MeasuredRun):
    if run.sessions is not None:
        return run.sessions
    if run.concurrency is None:
        return run.requests
    from kvledger.dynamics.workload.closed_loop import ClosedLoop

    return ClosedLoop(run.requests, run.concurrency, paced=run.paced)


def _client_view(res: SimResult, cost: StepCostModel) -> SimResult:
    """The records as the client saw them: each arrival moved ``cost.frontend_s`` earlier (TTFT and E2E grow by it)."""
    return with_frontend(res, float(getattr(cost, "frontend_s", 0.0) or 0.0))


def with_frontend(res: SimResult, d: float) -> SimResult:
    """``res`` with each arrival moved ``d`` s earlier: engine-side records as a client ``d`` s of frontend latency
    away sees them (TTFT and E2E grow by ``d``; ``res`` itself is changed)."""
    if d <= 0:
        return res
    from kvledger.record_columns import with_arrivals_earlier

    res.records = with_arrivals_earlier(res.records, d)
    return res


def replay(run: MeasuredRun, config: EngineConfig, cost: StepCostModel) -> SimResult:
    """Simulate the run's workload (fast path on); records as the client saw them (``frontend_s`` added)."""
    return _client_view(simulate(_workload(run), config, cost), cost)


def replay_recorded(run: MeasuredRun, config: EngineConfig, cost: StepCostModel) -> tuple[SimResult, StepTable]:
    """Simulate step by step (no fast path: one priced step per step) and return the steps' features and times.

    The records are engine-side (no ``frontend_s``)."""
    rec = _Recorder(cost)
    res = simulate(_workload(run), config, rec, record_steps=True, fast_forward=False)
    rows = res.steps[0].rows
    start = np.fromiter((r[1] for r in rows), np.float64, len(rows))
    dur = np.fromiter((r[2] for r in rows), np.float64, len(rows))
    feats = np.array(rec.features, dtype=np.float64).reshape(-1, NUM_GPU_TERMS)
    if len(feats) != len(rows):
        raise RuntimeError(f"recorded {len(feats)} priced steps for {len(rows)} logged steps")
    return res, StepTable(feats, start, start + dur)
