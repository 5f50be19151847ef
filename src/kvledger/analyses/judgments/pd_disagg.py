"""Prefill/decode disaggregation against a colocated deployment of the same GPU count: latency percentiles, goodput per
GPU under one SLO, KV-transfer time, and which pool each latency follows.

For a fixed number of GPUs N, every deployment serves the same requests: N/TP colocated
replicas (``kvledger.dynamics.simulator.simulate``) and each split into P prefill and D decode
replicas (``kvledger.dynamics.disagg.simulate_disagg``), each pool sized by its own vLLM memory
plan at its own TP and settings, KV crossing a link from the GPU catalog. Goodput is benchmark
goodput at the offered rate (good requests ÷ duration, ``kvledger.ledgers.goodput``), divided by
N; with ``search`` also DistServe's goodput, the highest rate meeting the attainment target
(``kvledger.ledgers.boundary.search_boundary``), per GPU. The tuning runs turn one knob on one
pool and show what moves: TTFT follows the prefill pool, ITL the decode pool.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from kvledger.analyses.serving.from_plan import engine_config_from_plan
from kvledger.analyses.serving.plan_pricing import PricingFlags, priced_settings, simulate_step_cost
from kvledger.dynamics.disagg import FIRST_TOKEN_SOURCES, Pool, simulate_disagg
from kvledger.dynamics.engine.kv_transfer import KVLink, transfer_from_plans
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.dynamics.engine.router import make_router
from kvledger.dynamics.outputs.metrics import summarize_records
from kvledger.dynamics.simulator import simulate
from kvledger.errors import InputError, UnknownNameError
from kvledger.jsonable import to_jsonable
from kvledger.ledgers.goodput import goodput_of_records
from kvledger.ledgers.slo import SLO
from kvledger.ranges import ATTAINMENT_TARGET
from kvledger.records import RunRecords

__all__ = ["DEFAULT_SLO", "DEFAULT_TRANSFER_LATENCY_S", "Deployment", "DeploymentResult", "DisaggStudy", "splits_for",
           "run_deployment", "evaluate", "search_max_rate"]

DEFAULT_SLO = "ttft=200ms,tpot=50ms"  # DistServe blog Fig. 1's illustrative SLO (P90 TTFT 200 ms, P90 TPOT 50 ms)
DEFAULT_TRANSFER_LATENCY_S = 1e-3  # assumption: one connector round trip per transfer (handshake + completion notice)


@dataclass(frozen=True)
class Deployment:
    """One way to use the N GPUs.

    Attributes:
        kind: "colocated" or "disaggregated".
        replicas: colocated replicas (colocated), or prefill replicas.
        decode_replicas: decode replicas (disaggregated), else 0.
        tp / decode_tp: TP of the (prefill or colocated) replicas and of the decode replicas.
        overrides / decode_overrides: vLLM settings for the plan (max_num_batched_tokens, max_num_seqs; None = default).
    """

    kind: str
    replicas: int
    tp: int = 1
    decode_replicas: int = 0
    decode_tp: int = 1
    overrides: tuple[tuple[str, int | None], ...] = ()
    decode_overrides: tuple[tuple[str, int | None], ...] = ()

    @property
    def num_gpus(self) -> int:
        return self.replicas * self.tp + self.decode_replicas * self.decode_tp

    @property
    def label(self) -> str:
        if self.kind == "colocated":
            return f"colocated {self.replicas}×TP{self.tp}" if self.tp > 1 else f"colocated ×{self.replicas}"
        p = f"{self.replicas}P" + (f"(TP{self.tp})" if self.tp > 1 else "")
        d = f"{self.decode_replicas}D" + (f"(TP{self.decode_tp})" if self.decode_tp > 1 else "")
        return f"{p}:{d}"


def splits_for(num_gpus: int, prefill_tp: int = 1, decode_tp: int = 1) -> list[tuple[int, int]]:
    """Every (prefill replicas P, decode replicas D) with P × prefill_tp + D × decode_tp = num_gpus and P, D ≥ 1,
    fewest prefill replicas first.

    Raises:
        InputError: no split exists (e.g. 1 GPU, or TPs that cannot add up to the count).
    """
    out = [(p, (num_gpus - p * prefill_tp) // decode_tp) for p in range(1, num_gpus // prefill_tp + 1)
           if num_gpus - p * prefill_tp >= decode_tp and (num_gpus - p * prefill_tp) % decode_tp == 0]
    if not out:
        gpus = f"{num_gpus} GPU" + ("" if num_gpus == 1 else "s")
        raise InputError(f"{gpus} cannot be split into ≥ 1 prefill replica of TP {prefill_tp} and ≥ 1 decode replica "
                         f"of "
                         f"TP {decode_tp}; give more GPUs (--num-gpus) or smaller TPs")
    return out


@dataclass
class DeploymentResult:
    """What one deployment gave on the workload (times in s, rates in req/s or tok/s; LatencyStats dicts)."""

    label: str
    kind: str
    num_gpus: int
    prefill_gpus: int
    decode_gpus: int
    ttft_s: dict[str, Any]
    itl_s: dict[str, Any]
    tpot_s: dict[str, Any]
    e2e_s: dict[str, Any]
    throughput_req_per_s: float
    throughput_output_tok_per_s: float
    goodput_req_per_s: float
    goodput_req_per_s_per_gpu: float
    attainment: float
    num_missed: dict[str, int]
    num_finished: int
    num_rejected: int
    num_preemptions: int
    transfer: dict[str, Any] | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    max_rate_per_gpu: float | None = None
    max_rate_search: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


class DisaggStudy:
    """The fixed inputs of a comparison (model, GPU, base plan settings, link, SLO) and a cache of memory plans.

    Args:
        model, gpu: ``ModelSpec`` and ``GpuSpec``.
        settings: base ``PlanSettings`` (TP and the two scheduler limits are replaced per pool).
        link: the KV link (``link_note``: why it was chosen, or a warning; kv_link_nodes.py). slo: the SLO.
        target: attainment target for the max-rate search, fraction.
        first_token: key of ``kvledger.dynamics.disagg.FIRST_TOKEN_SOURCES``. router: for every pool.
        step_cost: a step-cost model for every pool (e.g. a ``kvledger calibrate`` profile's), described by
        ``step_cost_info``; None → each pool's plan priced as ``simulate`` prices it (``plan_pricing``: the roofline
        at the GPU profile's or given fractions, with the engine's host term) under ``pricing``.
    """

    def __init__(self, model, gpu, settings, link: KVLink, slo: SLO, *, target: float = 0.9,
                 first_token: str = "prefill",
                 router: str = "round_robin", step_cost: Any = None, pricing: PricingFlags | None = None,
                 step_cost_info: dict[str, Any] | None = None, link_note: str | None = None) -> None:
        self.model, self.gpu, self.pricing, self.link_note = model, gpu, pricing, link_note
        self.settings = settings if pricing is None else priced_settings(settings, gpu, pricing, model)
        self.step_cost, self.step_cost_info = step_cost, step_cost_info
        self.link, self.slo, self.target = link, slo, target
        if first_token not in FIRST_TOKEN_SOURCES:
            raise UnknownNameError("first-token source", first_token, FIRST_TOKEN_SOURCES,
                                   hint=f"Known: {', '.join(FIRST_TOKEN_SOURCES)}.")
        ATTAINMENT_TARGET.check("attainment target", target)
        make_router(router)  # an unknown router fails here, before any run
        self.first_token, self.router = first_token, router
        self._plans: dict[tuple, Any] = {}
        self._costs: dict[tuple, tuple[Any, dict[str, Any]]] = {}

    def plan(self, tp: int, overrides: tuple[tuple[str, int | None], ...] = ()):
        """The vLLM memory plan at TP ``tp`` with ``overrides`` (cached). Raises InputError when the model does not
        fit."""
        from kvledger.accounting.plan import build_plan
        from kvledger.accounting.settings import make_settings
        from kvledger.analyses.plans import require_kv_pool

        key = (tp, overrides)
        if key not in self._plans:
            # every field, those model_dump leaves out too (model_runner, the TensorRT-LLM backend and logits dtype)
            base = {f.name: getattr(self.settings, f.name) for f in fields(self.settings)}
            s = make_settings(**{**base, "tp": tp, **{k: v for k, v in overrides if v is not None}})
            p = build_plan(self.model, self.gpu, s, with_advice=False)
            require_kv_pool(p)
            self._plans[key] = p
        return self._plans[key]

    def priced(self, tp: int, overrides: tuple[tuple[str, int | None], ...] = ()) -> tuple[Any, dict[str, Any]]:
        """(step cost, its description as ``simulate`` gives it) of a pool at ``tp`` and ``overrides`` (cached): the
        study's ``step_cost`` if given, else the plan's as ``simulate`` prices it."""
        if self.step_cost is not None:
            return self.step_cost, dict(self.step_cost_info or {"name": getattr(self.step_cost, "name", "given"),
                                                                 "source": "given"})
        key = (tp, overrides)
        if key not in self._costs:
            self._costs[key] = simulate_step_cost(self.plan(tp, overrides), self.pricing)
        return self._costs[key]

    def pool(self, tp: int, overrides: tuple, replicas: int, decode: bool = False) -> Pool:
        """A pool of ``replicas`` engines sized by the plan at ``tp`` and ``overrides``, priced by ``priced`` (a
        decode pool runs without prefix caching: it receives whole prompts)."""
        p = self.plan(tp, overrides)
        cfg, _ = engine_config_from_plan(p, enable_prefix_caching=False if decode else None)
        return Pool(cfg, self.priced(tp, overrides)[0], replicas, tp, self.router)


def run_deployment(study: DisaggStudy, dep: Deployment, specs: list[RequestSpec]) -> tuple[RunRecords, dict[str, Any]]:
    """Simulate one deployment; returns its records (metadata.num_gpus set) and extras (transfer figures, settings)."""
    if dep.kind == "colocated":
        pool = study.pool(dep.tp, dep.overrides, dep.replicas)
        res = simulate(specs, pool.config, pool.cost, num_replicas=dep.replicas, router=study.router,
                       model=study.model.name, hardware=study.gpu.name)
        res.records.metadata.num_gpus = dep.num_gpus
        return res.records, {"transfer": None, "num_preemptions": res.summary.num_preemptions,
                             "settings": {"colocated": _engine_dict(pool)}}
    pre = study.pool(dep.tp, dep.overrides, dep.replicas)
    dec = study.pool(dep.decode_tp, dep.decode_overrides, dep.decode_replicas, decode=True)
    tr = transfer_from_plans(study.plan(dep.tp, dep.overrides), study.plan(dep.decode_tp, dep.decode_overrides),
                             study.link)
    res = simulate_disagg(specs, pre, dec, tr, first_token=study.first_token, model=study.model.name,
                          hardware=study.gpu.name)
    return res.records, {"transfer": res.transfer, "num_preemptions": res.summary.num_preemptions,
                         "settings": {"prefill": _engine_dict(pre), "decode": _engine_dict(dec)}}


def _engine_dict(pool: Pool) -> dict[str, Any]:
    c = pool.config
    return {"replicas": pool.num_replicas, "tp": pool.gpus_per_replica, "num_gpu_blocks": c.num_gpu_blocks,
            "block_size": c.block_size, "max_num_batched_tokens": c.max_num_batched_tokens,
                "max_num_seqs": c.max_num_seqs,
            "enable_prefix_caching": c.enable_prefix_caching}


def evaluate(study: DisaggStudy, dep: Deployment, specs: list[RequestSpec]) -> DeploymentResult:
    """Run ``dep`` on ``specs`` and measure it: latency percentiles, throughput, goodput per GPU under the study's
    SLO."""
    run, extra = run_deployment(study, dep, specs)
    s = summarize_records(run)
    g = goodput_of_records(run, study.slo)
    good = g.goodput_req_per_s or 0.0
    dec_gpus = dep.decode_replicas * dep.decode_tp
    return DeploymentResult(
        dep.label, dep.kind, dep.num_gpus, dep.num_gpus - dec_gpus if dec_gpus else 0, dec_gpus,
        s.ttft_s.to_dict(), s.itl_s.to_dict(), s.tpot_s.to_dict(), s.e2e_s.to_dict(),
        s.throughput_req_per_s, s.throughput_output_tok_per_s, good, good / dep.num_gpus, g.attainment,
            dict(g.num_missed),
        s.num_finished, s.num_rejected, extra["num_preemptions"], extra["transfer"], extra["settings"])


def search_max_rate(study: DisaggStudy, dep: Deployment, load, rate_per_s: float) -> dict[str, Any]:
    """DistServe goodput: the highest request rate from 0.1 × ``rate_per_s`` up whose attainment meets the target and
    whose queue did not keep growing (``queue_growth.probe_queue_grew``: a load not sustained is a miss).

    ``load(rate)`` returns the workload at that mean rate (the same trace, gaps rescaled). The high end starts at
    1.5 × ``rate_per_s`` and doubles while the target still holds there (``ledgers.boundary_widen``, at most
    ``MAX_DOUBLINGS`` times); then bisection to 2 % of the bracket's low end (``ledgers.boundary.search_boundary``).
    The result's ``boundary_per_gpu`` is req/s per GPU; ``boundary_is_lower_bound`` is true when the target held at
    the last doubling (the boundary is then at least that rate, not that rate).
    """
    from kvledger.analyses.serving.probe_length import probe_too_short, short_notes
    from kvledger.analyses.serving.queue_growth import QUEUE_CHECK, probe_queue_grew
    from kvledger.ledgers.boundary import search_boundary, unsustained_note
    from kvledger.ledgers.boundary_widen import MAX_DOUBLINGS, widen_upward
    from kvledger.ledgers.goodput import goodput

    short: dict[float, Any] = {}  # the rate's run was too short to show its load (probe_length.probe_too_short)
    runs: dict[float, RunRecords] = {}  # one simulation per rate: the widening's probes are reused by the bisection

    def run_at(rate: float) -> RunRecords:
        if rate not in runs:
            run, _ = run_deployment(study, dep, load(rate))
            run.metadata.request_rate = rate
            short[rate] = probe_too_short(run, "open loop")
            runs[rate] = run
        return runs[rate]

    def grew(rate: float, run: RunRecords) -> bool | None:  # a load the deployment does not sustain: a miss
        return probe_queue_grew(run, "open loop")

    def meets(rate: float) -> bool:  # as search_boundary judges a point
        run = run_at(rate)
        return goodput(run, study.slo).attainment >= study.target and not grew(rate, run) and short[rate] is None

    lo, hi = 0.1 * rate_per_s, 1.5 * rate_per_s
    w = widen_upward(meets, hi)
    kw = dict(queue_grew=grew, too_short=lambda rate: short[rate] is not None)
    if w.good is None:  # 1.5 × misses: bisect [0.1, 1.5] × the rate
        res = search_boundary(run_at, study.slo, study.target, lo, hi, tol=0.02 * rate_per_s, max_evals=12, **kw)
    elif w.capped:  # the target holds at the last doubling: both ends meet, the boundary is a lower bound
        res = search_boundary(run_at, study.slo, study.target, lo, w.good, tol=0.02 * rate_per_s, max_evals=2, **kw)
    else:
        res = search_boundary(run_at, study.slo, study.target, lo, w.bad, tol=0.02 * w.good, max_evals=12,
                              known=(w.good, w.bad), **kw)
    if w.good is not None:
        res.notes.append(f"bracket widened: the target held at {', '.join(f'{v:g}' for v in w.tried[:-1])} req/s"
                         + (f", not at {w.tried[-1]:g}" if not w.capped else f" and {w.tried[-1]:g}, the last of "
                            f"{MAX_DOUBLINGS} doublings: the boundary is at least {w.good:g} req/s"))
    res.notes.extend(unsustained_note(res.points, "request_rate", study.target, QUEUE_CHECK))
    res.notes.extend(short_notes({p.value: p for p in res.points}, short, study.target, "request_rate"))
    return {**res.to_dict(), "boundary_is_lower_bound": w.capped}
