"""A candidate's SLO capacity by simulation — the highest request rate at which the target share of requests meets the
SLO — for a colocated engine or a disaggregated prefill/decode unit.

Colocated: :func:`kvledger.analyses.serving.sim_boundary.search_sim_boundary` on the request rate, the same search,
probes and seeded workload as ``kvledger goodput --simulate --target`` and ``kvledger cost --simulate``.
Disaggregated: the same bracket-then-bisect on the rate (doubling from 1 req/s, or halving; then
``kvledger.ledgers.boundary.search_boundary`` to 1 % of the bracket's top), each probe one run of
``kvledger.analyses.judgments.pd_disagg.run_deployment`` (prefill and decode pools each sized by its own vLLM plan, KV
sent over the GPU's NVLink — PCIe where the catalog lists none — plus a 1 ms connector latency) on the same seeded
requests at that rate; its capacity band: ``disagg_band``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from kvledger.analyses.search.disagg_band import disagg_band, disagg_view
from kvledger.analyses.search.screen import sim_args
from kvledger.analyses.search.spec import Candidate, SearchSpec

__all__ = ["Probed", "bracket_start", "colocated_capacity", "disagg_capacity", "LOAD_FRACTIONS", "operating_point"]

_MAX_DOUBLINGS, _MAX_HALVINGS = 12, 10
LOAD_FRACTIONS = (0.25, 0.5, 0.75)
"""Besides the boundary, each feasible candidate is simulated at these fractions of its boundary rate: the operating
points (tokens/s per user against output tokens/s per GPU as the load falls) that the Pareto frontier is drawn from."""


@dataclass
class Probed:
    """A capacity search's outcome: boundary rate (req/s; None when no rate meets the target), the probes as
    [rate, attainment] pairs, notes, and the run at the boundary with its goodput under the SLO."""

    boundary: float | None
    first_failing: float | None
    probes: list[list[float]]
    notes: list[str]
    run: Any = None
    gp: Any = None
    workload: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    points: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    rejections: Any = None  # the workload's requests the engine refuses (serving.rejections.Rejections), None: none
    search: Any = None  # a colocated engine's rate search (sim_boundary.SimBoundary): its capacity band's probes
    idle_edge: Any = None
    """``serving.idle_edge.IdleEdge``: the target met only within sampling noise even near idle (no capacity)."""
    sized: Any = None
    """Where the capacity bound caps ``boundary``: the run of the same workload and seed at the bound
    (``sim_capacity.SizedRun``), which the candidate is priced on, as ``cost --simulate`` prices; else None."""

    @property
    def priced(self) -> tuple[float, Any, Any]:
        """(offered req/s, records, goodput) of the run priced: the boundary probe, or the run at the bound."""
        if self.sized is None:
            return self.boundary, self.run, self.gp
        return self.sized.rate_req_per_s, self.sized.run.run, self.sized.result


def operating_point(rate: float, run: Any, gp: Any, num_gpus: int) -> dict[str, Any]:
    """One load's figures: offered rate (req/s), attainment, good output tokens/s per GPU and tokens/s per user
    (1 ÷ the median TPOT of the completed requests with more than one output token)."""
    import numpy as np

    from kvledger.ledgers.columns import columns_from

    cols = columns_from(run)
    tpot = cols.tpot_s()[cols.ok & (cols.num_output_tokens > 1)]
    p50 = float(np.median(tpot)) if tpot.size else None
    return {"rate_req_per_s": rate, "attainment": gp.attainment, "tpot_p50_s": p50, "tok_per_s_per_user": 1.0 / p50
            if p50 else None, "output_tok_per_s_per_gpu": (gp.goodput_output_tok_per_s or 0.0) / num_gpus}


def drain_note(rate: float, num_requests: int, gp: Any) -> list[str]:
    """A note when the boundary run's goodput (good requests ÷ first arrival → last finish) is below
    ``kvledger.analyses.serving.sim_capacity.DRAIN_NOTE_SHARE`` of the good rate it sustained while requests arrived
    (offered rate × attainment), which is what the cost is priced at (``ledgers/sustained_rate.py``), as ``cost
    --simulate`` says."""
    from kvledger.analyses.serving.sim_capacity import DRAIN_NOTE_SHARE

    sustained = rate * gp.attainment
    if not gp.goodput_req_per_s or gp.goodput_req_per_s >= DRAIN_NOTE_SHARE * sustained:
        return []
    return [f"the boundary run's goodput ({gp.goodput_req_per_s:,.3f} good req/s) is "
            f"{gp.goodput_req_per_s / sustained:.0%} of the {sustained:,.3f} good req/s it sustained while its "
            f"{num_requests:,} requests arrived, the rate the cost is priced at: the drain after the last arrival is "
            "not capacity a steady stream loses"]


def _points(b: float, at: Any, num_gpus: int, target: float, skip: Any = None,
            skipped: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Operating points at LOAD_FRACTIONS × b and at b (``at(rate)`` → (RunRecords, GoodputResult)); loads that miss the
    target (attainment that is not monotone in load) are left out, and so are those ``skip(rate)`` decides by bound
    (their evidence appended to ``skipped``)."""
    pts = []
    for f in LOAD_FRACTIONS:
        ev = skip(f * b) if skip is not None else None
        if ev is None:
            pts.append(operating_point(f * b, *at(f * b), num_gpus))
        elif skipped is not None:
            skipped.append({"rate_req_per_s": f * b, **ev})
    pts.append(operating_point(b, *at(b), num_gpus))
    return [p for p in pts if p["attainment"] >= target and p["tok_per_s_per_user"] is not None]


def _workload_info(name: str, specs: list[Any]) -> dict[str, Any]:
    n = len(specs)
    return {"trace": name, "num_requests": n, "prompt_tokens_mean": sum(s.num_prompt_tokens for s in specs) / n,
            "output_tokens_mean": sum(s.num_output_tokens for s in specs) / n}


def bracket_start(capacity_bound_req_per_s: float | None) -> float:
    """Where a candidate's rate search starts: the smallest power of two req/s at or above its capacity bound (a probe
    there usually misses, early-stopped, and halving finds the bracket), or 1 req/s without one.

    A power of two keeps every probe on the grid that ``goodput --simulate --target`` and ``cost --simulate`` walk
    (doubling from 1 req/s, then bisecting): both find the same bracket [2^(j−1), 2^j], bisect it through the same
    midpoints and so stop at the same boundary rate and the same goodput. A start at the bound itself (rounded to 3
    significant figures, as before) bisected another bracket and stopped at another rate within the 1% tolerance
    (a fresh-user trial: search 18.20 good req/s at 21.0023 req/s, goodput --simulate 18.158 at 21).
    """
    if capacity_bound_req_per_s is None or not math.isfinite(capacity_bound_req_per_s) \
            or capacity_bound_req_per_s <= 0:
        return 1.0
    return 2.0 ** math.ceil(math.log2(capacity_bound_req_per_s) - 1e-12)


def colocated_capacity(spec: SearchSpec, cand: Candidate, slo: Any, start: float = 1.0,
                       skip: Any = None, guess: bool = False) -> Probed:
    """The rate search of ``goodput --simulate --target`` for one colocated engine (see the module docstring), its
    doubling or halving from ``start`` req/s; ``skip(rate)``: the evidence that a lighter operating point cannot reach
    the frontier (then it is not simulated), or None; ``guess``: ``start`` is a capacity bound, so the bracket is
    guessed to be [start/2, start] and the end its first midpoint implies is not simulated (same boundary:
    ``kvledger.analyses.serving.sim_bracket``)."""
    from kvledger.analyses.serving.sim_boundary import search_sim_boundary

    sb = search_sim_boundary(sim_args(spec, cand), slo, spec.target, "request_rate", synthetic=spec.synthetic,
                             start=start, guess=guess)
    probes = [[p.value, p.attainment] for p in sb.probes]
    b = sb.boundary.boundary_value
    out = Probed(b, sb.boundary.first_failing_value, probes, list(sb.notes) + list(sb.boundary.notes),
                 extra=_counted_out((p.value for p in sb.probes if p.queue_grew),
                                    (p.value for p in sb.probes if p.too_short), sb.sessions_limit),
                 rejections=sb.rejections,
                 idle_edge=sb.idle_edge, search=sb)
    if b is not None and sb.boundary_run is not None:
        out.run = sb.boundary_run.run
        out.gp = next(g for g, p in zip(sb.goodputs, sb.probes) if p.value == b)
        wl = sb.boundary_run.setup.workload_info
        out.workload = {k: wl[k] for k in ("trace", "num_requests", "prompt_tokens_mean", "output_tokens_mean")}
        out.points = _points(b, lambda r: _colocated_at(spec, cand, slo, sb, r), cand.num_gpus, spec.target,
                             skip, out.skipped)
        out.notes += _boundary_notes(out, sb.boundary_run.run.metadata.request_rate or b, b)
    return out


def _counted_out(grew: Any, short: Any, limit: Any = None) -> dict[str, Any]:
    """``queue_grew_req_per_s`` / ``too_short_req_per_s``: probed rates whose queue grew / too short to show their load
    (or too few sessions to carry it), counted as misses, sorted; ``sessions_limit``; each left out when none."""
    got = {"queue_grew_req_per_s": sorted(grew), "too_short_req_per_s": sorted(short), "sessions_limit": limit}
    return {k: v for k, v in got.items() if v}


def _boundary_notes(out: Probed, offered: float, rate: float) -> list[str]:
    """The boundary probe's notes: its ``not steady`` warning (``_steadiness``) or, when it held, the drain-tail note
    at its ``offered`` rate (a probe whose queue grew did not sustain "the good rate while they arrived")."""
    steady = _steadiness(out.run, rate, out.workload["num_requests"])
    return steady or drain_note(offered, out.workload["num_requests"], out.gp)


def _steadiness(run: Any, rate: float, num_requests: int) -> list[str]:
    """The ``not steady`` warning of the capacity probe, as ``goodput --simulate --target`` gives it
    (``queue_growth.boundary_steadiness``): its queue still growing at its last arrival, or a probe too short to
    tell, makes the capacity optimistic."""
    from kvledger.analyses.serving.queue_growth import boundary_steadiness

    return boundary_steadiness(run, rate, num_requests)[1]


def _colocated_at(spec: SearchSpec, cand: Candidate, slo: Any, sb: Any, rate: float) -> tuple[Any, Any]:
    """(records, goodput) of one colocated run at ``rate``: the boundary run itself, or a new simulation, keeping token
    times only where the SLO judges gaps, as the probes (a point reads first-token and finish times alone)."""
    from kvledger.analyses.serving.sim_ledgers import simulate_run
    from kvledger.ledgers.goodput import goodput

    if rate == sb.boundary.boundary_value:
        return sb.boundary_run.run, next(g for g, p in zip(sb.goodputs, sb.probes) if p.value == rate)
    run = simulate_run(replace(sim_args(spec, cand), rate=rate), spec.synthetic,
                       record_token_times=slo.itl_s is not None).run
    return run, goodput(run, slo)


def _requests(spec: SearchSpec, rate: float) -> list[Any]:
    from kvledger.dynamics.workload.traces import load_trace

    if spec.synthetic is not None:
        return spec.synthetic.requests(spec.num_requests, rate, spec.seed)
    return load_trace(spec.trace, num_requests=spec.num_requests, rate=rate, seed=spec.seed)


def _study(spec: SearchSpec, cand: Candidate, slo: Any) -> tuple[Any, Any, str]:
    from kvledger.accounting.gpu_profile_search import choice_for_gpu
    from kvledger.accounting.settings import make_settings
    from kvledger.analyses.judgments.pd_disagg import DEFAULT_TRANSFER_LATENCY_S, Deployment, DisaggStudy
    from kvledger.analyses.serving.plan_pricing import PricingFlags
    from kvledger.catalog.gpu_file import resolve_gpu
    from kvledger.catalog.models import load_model
    from kvledger.dynamics.engine.kv_link_nodes import pair_link
    from kvledger.dynamics.engine.kv_transfer import nic_bytes_per_s
    from kvledger.units import parse_duration_s

    gpu, nic = resolve_gpu(cand.gpu_id), nic_bytes_per_s(spec.inter_node_link)  # a pool's TP group and the KV link
    settings = make_settings(engine_version=spec.engine_version, max_model_len=spec.max_model_len,
                             gpu_memory_utilization=spec.gpu_memory_utilization, kv_cache_dtype=cand.kv_cache_dtype,
                             quantization=spec.quantization, mamba_ssm_cache_dtype=spec.mamba_ssm_cache_dtype or "auto",
                             cpu_overhead_s=parse_duration_s(spec.cpu_overhead, what="--cpu-overhead")
                             if spec.cpu_overhead else 0.0, wddm=spec.wddm, inter_node_link_bytes_per_s=nic)
    # priced as the colocated candidates' simulate runs are (screen.py: the GPU's --gpu-profile choice, the GEMM mode
    # and the all-reduces' link share; plan_pricing)
    pricing = PricingFlags(gpu_profile=choice_for_gpu(spec.gpu_profile, gpu.name), gemm_efficiency=spec.gemm_efficiency,
                           allreduce_link_share=spec.allreduce_link_share)
    link, _ = pair_link(gpu, "auto", cand.tp, cand.decode_tp, DEFAULT_TRANSFER_LATENCY_S, nic)  # the NIC across nodes
    study = DisaggStudy(load_model(spec.model), gpu, settings, link, slo, target=spec.target, pricing=pricing)
    ov = (("max_num_batched_tokens", cand.max_num_batched_tokens), ("max_num_seqs", cand.max_num_seqs))
    dep = Deployment("disaggregated", cand.prefill_replicas, cand.tp, cand.decode_replicas, cand.decode_tp, ov, ov)
    return study, dep, link.name


def disagg_capacity(spec: SearchSpec, cand: Candidate, slo: Any) -> Probed:
    """The same rate search for a disaggregated unit (see the module docstring)."""
    from kvledger.analyses.judgments.pd_disagg import run_deployment
    from kvledger.analyses.search.latency import latency_s
    from kvledger.analyses.serving.probe_length import probe_too_short, short_notes
    from kvledger.analyses.serving.probe_sample import workload_sample_note
    from kvledger.analyses.serving.queue_growth import QUEUE_CHECK, probe_queue_grew
    from kvledger.ledgers.boundary import search_boundary, unsustained_note
    from kvledger.ledgers.goodput import goodput_of_records
    from kvledger.record_columns import with_arrivals_earlier

    study, dep, link_kind = _study(spec, cand, slo)
    runs: dict[float, Any] = {}
    grew: dict[float, bool | None] = {}  # the rate's run did not sustain its load (queue_growth.probe_queue_grew)
    short: dict[float, Any] = {}  # the rate's run was too short to show its load (probe_length.probe_too_short)
    order: list[float] = []
    d = latency_s(spec)  # --client-latency: every TTFT and E2E grows by d (analyses/serving/client_latency.py)

    def run_at(rate: float) -> Any:
        if rate not in runs:
            run, _ = run_deployment(study, dep, _requests(spec, rate))
            run = with_arrivals_earlier(run, d) if d > 0 else run
            run.metadata.request_rate = rate
            runs[rate] = (run, goodput_of_records(run, slo))
            grew[rate] = probe_queue_grew(run, "open loop")
            short[rate] = probe_too_short(run, "open loop", d)
            order.append(rate)
        return runs[rate][0]

    def meets(rate: float) -> bool:  # the attainment target, at a load the unit sustains (as colocated probes)
        run_at(rate)
        return runs[rate][1].attainment >= spec.target and not grew[rate] and short[rate] is None

    lo, hi = _bracket(meets)
    res = search_boundary(run_at, slo, spec.target, lo, hi, axis="request_rate", tol=hi / 100.0, max_evals=30,
                          queue_grew=lambda rate, run: grew[rate], too_short=lambda rate: short[rate] is not None)
    res.notes.extend(unsustained_note(res.points, "request_rate", spec.target, QUEUE_CHECK))
    res.notes.extend(short_notes({r: g for r, (_, g) in runs.items()}, short, spec.target, "request_rate"))
    b = res.boundary_value
    out = Probed(b, res.first_failing_value, [[r, runs[r][1].attainment] for r in order],
                 [f"each probe: one simulation of {spec.num_requests:,} requests with seed {spec.seed} (same workload "
                  f"at every rate) on {dep.label}: {cand.num_gpus} GPUs"] + list(res.notes),
                 extra={**_counted_out((r for r in order if grew[r]), (r for r in order if short[r])),
                        "kv_link": f"{link_kind}: {study.link.bytes_per_s / 1e9:,.0f} GB/s one way per GPU "
                                   f"({study.link.source}), "
                        f"+ {study.link.latency_s * 1e3:g} ms per transfer (assumption)"})
    if b is not None:  # its band, from the search's probes alone (before the operating points run)
        out.extra["error_band"] = disagg_band(spec, cand, slo, disagg_view(runs, order, float(b), spec.target))
        out.run, out.gp = runs[float(b)]
        out.workload = _workload_info(spec.synthetic.label if spec.synthetic else spec.trace, _requests(spec, b))
        out.points = _points(b, lambda r: (run_at(r), runs[r][1]), cand.num_gpus, spec.target)
        out.notes += _boundary_notes(out, b, b) + workload_sample_note(spec.trace, spec.synthetic, out.workload)
    return out


def _bracket(meets: Any) -> tuple[float, float]:
    """[lo, hi] with lo meeting and hi missing (``meets(rate)``), doubling from 1 req/s or halving from it."""
    lo, hi = 1.0, 2.0
    if meets(1.0):
        for _ in range(_MAX_DOUBLINGS):
            if not meets(hi):
                break
            lo, hi = hi, hi * 2
        return lo, hi
    hi, lo = 1.0, 0.5
    for _ in range(_MAX_HALVINGS):
        if meets(lo):
            break
        hi, lo = lo, lo / 2
    return lo, hi
