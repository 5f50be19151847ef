"""The data behind ``kvledger report`` and ``kvledger ui``: one ``ReportData`` that chains the plan, the SLO capacity,
the cost ledger, a rate sweep and the engine comparisons.

Every section is the object an existing command prints with ``--json`` (the plan is ``plan
--json``, the cost is ``cost --simulate --json``, each sweep point is ``simulate --json``'s
summary), built by the same functions, so the report cannot disagree with the commands; the
equivalent command lines are stored under ``commands``. Curves over utilization and monthly
volume use the break-even formulas of ``kvledger.ledgers.breakeven`` on the same capacity.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from kvledger.analyses.serving.cost_curves import utilization_curve, volume_curve
from kvledger.analyses.serving.engine_compare import BASELINES, engine_savings, skipped_row
from kvledger.analyses.serving.report_data import ReportData
from kvledger.analyses.serving.report_price import pick_gpu_rate
from kvledger.analyses.serving.report_tiers import check_report_pool, tier_section
from kvledger.analyses.serving.report_workload import (
    CONTEXTS,
    plan_contexts,
    plan_view_settings,
    report_commands,
    report_synthetic,
    workload_contexts,
)
from kvledger.ledgers.host_bill import DEFAULT_TEAM_CAPABILITY
from kvledger.ranges import check_options

__all__ = ["ReportRequest", "ReportData", "CONTEXTS", "SWEEP_FRACTIONS", "build_plan_section", "build_report_data",
           "sim_args", "run_row"]

SWEEP_FRACTIONS = (0.25, 0.5, 0.75, 1.0, 1.25, 1.5)
"""Request rates of the latency sweep, as fractions of the SLO capacity sized on (the rate found, or the capacity bound
where that caps it: ``SimCapacity.sizing_req_per_s``)."""


@dataclass(frozen=True)
class ReportRequest:
    """What the user chose: model, GPU, engine settings, traffic, SLO, API row and the cost inputs.

    ``num_requests`` is the workload of every simulation (each capacity probe, each sweep point): ``trace``'s, or
    where ``prompt_lengths``/``output_lengths`` (and ``arrival_cv``) are given, that synthetic one, as ``cost
    --simulate`` takes it (``report_workload.report_synthetic``);
    ``engine`` holds vLLM engine flags by ``SimRequestArgs`` field name (tp, max_model_len,
    gpu_memory_utilization, kv_cache_dtype, max_num_seqs, engine_version, shared_prefix_tokens, document_pool, …);
    ``tier``: the KV tiers the plan sizes and the section at the capacity runs (``report_tiers``).
    """

    model: str
    gpu: str
    slo: str
    api: str | None = None
    trace: str = "azure-conv"
    prompt_lengths: str | None = None
    output_lengths: str | None = None
    arrival_cv: float | None = None
    num_requests: int = 2000
    seed: int = 0
    target: float = 0.9
    engine: dict[str, Any] = field(default_factory=dict)
    utilization: float | None = None
    max_utilization: float = 0.8
    engineer_months_per_month: float | None = None
    engineer_usd_per_month: float | None = None
    monthly_tokens: float | None = None
    monthly_requests: float | None = None
    monthly_input_tokens: float | None = None
    monthly_output_tokens: float | None = None
    peak_to_mean: float = 1.0
    gpu_provider: str | None = None
    instance: str | None = None
    gpu_usd_per_hour: float | None = None
    batch_share: float = 0.0
    cache_hit_rate: float = 0.0
    cache_write_rate: float = 0.0
    data_sovereignty: str = "not_required"
    model_control: str = "any"
    team_capability: str = DEFAULT_TEAM_CAPABILITY
    bench_files: tuple[str, ...] = ()
    with_engine_savings: bool = True
    with_sweep: bool = True
    tier: Any = None  # the KV tiers below HBM (``TierSettings``; None: none): report_tiers.py


def sim_args(req: ReportRequest, **over: Any):
    """SimRequestArgs for the request's deployment and workload (``over`` replaces fields, e.g. rate or policy)."""
    from kvledger.analyses.serving.sim_setup import SimRequestArgs

    base = dict(model=req.model, gpu=req.gpu, trace=req.trace, num_requests=req.num_requests, seed=req.seed)
    return SimRequestArgs(**{**base, **req.engine, **over})


def build_plan_section(req: ReportRequest) -> dict[str, Any]:
    """``kvledger plan MODEL --gpu GPU --context 1K,…,128K --json`` (with a synthetic workload's mean and max prompt +
    output among the contexts: ``plan_contexts``) for the request's engine settings (SGLang's plan
    under ``policy`` sglang, whose pool the simulator then runs: sim_setup)."""
    from kvledger.accounting.plan import build_plan
    from kvledger.accounting.settings import make_settings
    from kvledger.accounting.vllm_auto_len import read_max_model_len
    from kvledger.catalog.gpu_file import resolve_gpu
    from kvledger.catalog.models import load_model

    e, g = req.engine, resolve_gpu(req.gpu)
    engine = "sglang" if e.get("policy") == "sglang" else "vllm"
    mml, auto = read_max_model_len(str(e["max_model_len"]) if e.get("max_model_len") else None, engine,
                                   e.get("engine_version"))  # as the release reads it, as the simulation's plan
    settings = make_settings(engine=engine, engine_version=e.get("engine_version"), tp=e.get("tp") or 1,
                             max_model_len=mml, auto_max_model_len=auto or None, pp=e.get("pp") or 1,
                             contexts=plan_contexts(req), gpu_memory_utilization=e.get("gpu_memory_utilization"),
                             kv_cache_dtype=e.get("kv_cache_dtype") or "auto", quantization=e.get("quantization"),
                             max_num_seqs=e.get("max_num_seqs"), mem_fraction_static=e.get("mem_fraction_static"),
                             allreduce_link_share=e.get("allreduce_link_share"), wddm=bool(e.get("wddm")),
                             enable_expert_parallel=bool(e.get("enable_expert_parallel")),
                             data_parallel_size=e.get("data_parallel_size"), all2all_backend=e.get("all2all_backend"),
                             ep_size=e.get("ep_size"), enable_dp_attention=e.get("enable_dp_attention"),
                             moe_a2a_backend=e.get("moe_a2a_backend"))  # SGLang's EP and DP attention (dp_attention)
    from kvledger.analyses.plans import plan_document

    settings, prof = plan_view_settings(settings, e.get("gpu_profile"), g)  # plan --gpu-profile's roofline view
    p = build_plan(load_model(req.model), g, settings)
    doc = p.to_dict() if prof is None else plan_document(p, prof, e.get("allreduce_link_share") is not None)
    if req.tier is None:
        return doc
    from kvledger.analyses.serving.plan_pricing import PricingFlags, simulate_priced_tiers

    # plan --kv-offloading-size & co.'s kv_tiers (the tier rules checked before any simulation), priced with the
    # report's --gpu-profile and link share, as its runs are and as plan prices them (cli/plan_tiers.plan_tier_plan)
    flags = PricingFlags(e.get("gpu_profile"), None, None, None, e.get("allreduce_link_share"))
    return doc | {"kv_tiers": simulate_priced_tiers(p, req.tier, flags).to_dict()}


def _check_run(req: ReportRequest) -> None:
    """The probes' request count, the target, the trace and the GPU provider (also where --gpu-usd-per-hour sets the
    price), refused before any simulation (a trace of lengths only: the capacity search scales a trace's own
    arrivals)."""
    from kvledger.catalog.price_names import check_gpu_provider
    from kvledger.dynamics.workload.traces import require_arrivals
    from kvledger.ledgers.volume import refuse_utilization_above_peak

    check_gpu_provider(req.gpu_provider)
    refuse_utilization_above_peak(req.utilization, req.max_utilization, req.peak_to_mean or 1.0)
    check_options("report", {"num_requests": req.num_requests, "target": req.target,
                             "shared_prefix_tokens": req.engine.get("shared_prefix_tokens")})
    check_report_pool(req.engine.get("document_pool"), report_synthetic(req))
    if report_synthetic(req) is None:  # a synthetic workload draws its own arrivals
        require_arrivals(req.trace, "the report's SLO-capacity search replays a trace's own arrivals at scaled rates")


def _billed_packing(report: Any, setup: Any) -> Any:
    """The packing the bill rents: the volume's replicas (``Decision.packing``), else one replica's cheapest packing
    (as ``cost_summary`` prices it without a volume)."""
    from kvledger.ledgers.instances import pack

    decision = getattr(report, "decision", None)
    return decision.packing if decision is not None else pack(setup.gpu, 1, setup.num_gpus, setup.engine_replicas)


def _summary_row(sim: Any, slo: Any, rate: float) -> dict[str, Any]:
    """One row; ``rate``: the --rate it ran at (what its command line repeats; the run's metadata holds the rate of
    its rescaled arrivals, which can differ in the last bit)."""
    from kvledger.ledgers.goodput import goodput

    gp = goodput(sim.run, slo)
    return {"rate_req_per_s": rate, "summary": sim.result.summary.to_dict(),
            "engine": sim.result.config, "attainment": gp.attainment, "goodput_req_per_s": gp.goodput_req_per_s,
            "throughput_req_per_s": gp.throughput_req_per_s}


# the pool's share of the runs after the capacity search: the two overloaded sweep points, about 0.3 s of the 0.9 s
# (the pool also imports matplotlib meanwhile, about 0.3 s; docs/performance.md)
_IN_POOL = (1.25, 1.5)


def run_row(req: ReportRequest, rate: float, slo: Any, policy: str | None = None) -> dict[str, Any]:
    """One simulation's summary row at ``rate`` (picklable in and out: a process pool may run it); a baseline policy
    whose settings cannot admit a request (contiguous KV longer than the pool, or a static-batching reservation of a
    request's whole sequence that outgrows it; both refused before simulating) gives the row of why it was not run."""
    from kvledger.analyses.serving.sim_ledgers import simulate_run
    from kvledger.dynamics.engine.reservation_fit import ContiguousTooLargeError, StaticTooLongError

    # token times only when the SLO judges gaps (ITL), as the capacity probes: the summary's ITL distribution is
    # exact without them (dynamics/outputs/itl_gaps.py)
    try:
        sim = simulate_run(sim_args(req, rate=rate, **({"policy": policy} if policy else {})), report_synthetic(req),
                           record_token_times=slo.itl_s is not None)
    except (ContiguousTooLargeError, StaticTooLongError) as e:
        if policy is None:  # the engine's own run: the capacity search has refused it already
            raise
        return skipped_row(e)
    return _summary_row(sim, slo, rate)


def _runs_after_capacity(req: ReportRequest, cap: Any, slo: Any, pool: Any) -> dict[Any, dict[str, Any]]:
    """The summary row of each sweep point (by fraction) and engine comparison (by policy); with a ``pool``, the
    keys in ``_IN_POOL`` run there meanwhile. Placed by key, never by finishing order."""
    rate = cap.sizing_req_per_s  # the capacity sized on: the rate found, or the bound where it caps it
    jobs = {f: (rate * f, None) for f in SWEEP_FRACTIONS if f != 1.0 and req.with_sweep}
    jobs.update({p: (rate, p) for p, _ in BASELINES if req.with_engine_savings})
    later = {k: pool.submit(run_row, req, r, slo, p) for k, (r, p) in jobs.items() if pool is not None
             and k in _IN_POOL}
    rows = {k: run_row(req, r, slo, p) for k, (r, p) in jobs.items() if k not in later}
    return {**rows, **{k: f.result() for k, f in later.items()}}


def _sweep(base: dict[str, Any], runs: dict[Any, Any]) -> list[dict[str, Any]]:
    """The latency sweep: the capacity run is its 1.0× point."""
    return [{"fraction_of_capacity": f, **(base if f == 1.0 else runs[f])} for f in SWEEP_FRACTIONS]


def _no_trace_read(req: ReportRequest) -> dict[str, Any]:
    """``{"trace": None}`` where the request's synthetic lengths stand for the workload (no trace was read; the
    request's own trace is the default's), else nothing."""
    return {"trace": None} if req.prompt_lengths is not None or req.output_lengths is not None else {}


def _asked(req: ReportRequest) -> dict[str, Any]:
    """The request's fields as ``inputs`` states them: ``tier`` only where given."""
    return {k: v for k, v in asdict(req).items() if k != "tier" or v is not None}


def _self_host_setup(req: ReportRequest, rate: Any, num_gpus: int, people: Any) -> Any:
    """The self-hosted setup the cost section prices: ``--replicas N`` engines make one deployment unit, as cost's
    (``SelfHostSetup.engine_replicas``; ``num_gpus`` the unit's)."""
    from kvledger.ledgers.cost import SelfHostSetup

    return SelfHostSetup(rate, num_gpus, req.utilization, people.engineer_months_per_month,
                         people.engineer_usd_per_month, None, req.max_utilization, people.source,
                         engine_replicas=req.engine.get("replicas") or 1)


def _api_price(req: ReportRequest) -> Any:
    """The API row named, or None where the catalog has rows serving the model (the report's sections compare with an
    API: a model without one is refused before the simulations, in kvledger ui too)."""
    from kvledger.catalog.api_match import find_api_price, require_api_row

    api_price = find_api_price(req.api) if req.api else None
    if api_price is None:
        require_api_row(req.model)
    return api_price


def build_report_data(req: ReportRequest, progress: Any = None, pool: Any = None) -> ReportData:
    """Everything the report draws (module docstring).

    Args:
        progress: optional ``progress(stage_text)`` callback, called before each stage.
        pool: optional executor (``submit``): some of the runs after the capacity search go there (same data).

    Raises:
        InputError / UnknownNameError / FormatError: bad names, settings, SLOs or files, with the reason.
    """
    from kvledger.analyses.serving import sim_cache
    from kvledger.analyses.serving.cost_run import cost_payload
    from kvledger.analyses.serving.decision_inputs import decision_inputs
    from kvledger.analyses.serving.report_measured import measured_rows
    from kvledger.analyses.serving.sim_capacity import search_capacity
    from kvledger.ledgers.api_cost import ApiMix
    from kvledger.ledgers.cost_summary import DecisionFactors
    from kvledger.ledgers.decision import MonthlyVolume
    from kvledger.ledgers.host_bill import HostBill, people_cost
    from kvledger.ledgers.slo import parse_slo
    from kvledger.ledgers.volume import refuse_utilization_with_volume

    say = progress or (lambda _text: None)
    # the web app's and the API's ranges (kvledger.ranges): --replicas as cost's
    check_options("report", {"utilization": req.utilization, "replicas": req.engine.get("replicas")})
    slo, api_price = parse_slo(req.slo), _api_price(req)
    people = people_cost(req.team_capability, req.engineer_months_per_month, req.engineer_usd_per_month)
    vols = (req.monthly_requests, req.monthly_input_tokens, req.monthly_output_tokens, req.monthly_tokens)
    volume = MonthlyVolume(*vols, req.peak_to_mean) if any(v is not None for v in vols) else None
    refuse_utilization_with_volume(req.utilization, volume is not None)  # before any simulation, as cost refuses it
    _check_run(req)
    say("memory plan")
    plan = build_plan_section(req)
    rate, how, price_flags = pick_gpu_rate(req, plan["gpu"]["gpu_id"])  # price errors before the simulations
    say("SLO-capacity search")
    ran = sim_cache.stats()["run"]
    cap = search_capacity(sim_args(req), slo, req.target, synthetic=report_synthetic(req))  # cost's builder
    if sim_cache.stats()["run"] == ran:  # an identical request again: its runs are read back, no pool needed
        pool = None
    sim = cap.priced_run  # the run at the capacity sized on (sim_capacity.SizedFigures)
    setup = _self_host_setup(req, rate, sim.num_gpus, people)
    inputs, _ = decision_inputs(req.model, api_price, plan["gpu"]["gpu_id"], sim, HostBill(), people, req.peak_to_mean,
                                req.engine.get("quantization"))  # the FP8 API row's note reads the weights priced
    cost = cost_payload(sim.run, slo, setup, None, ApiMix(req.batch_share, req.cache_hit_rate, req.cache_write_rate),
                        DecisionFactors(req.data_sovereignty, req.model_control, req.team_capability), volume,
                        sim=sim, capacity=cap, inputs=inputs)
    say("latency sweep and engine comparisons")
    runs, base = _runs_after_capacity(req, cap, slo, pool), _summary_row(sim, slo, cap.sizing_req_per_s)
    wl = {"workload_contexts": w} if (w := workload_contexts(req)) else {}  # the answer's concurrency line states
    tiers = tier_section(sim_args(req, rate=cap.sizing_req_per_s), req.tier, report_synthetic(req), slo, sim, cap)
    return ReportData(inputs={**_asked(req), "slo_text": slo.describe(), **_no_trace_read(req), **wl,
                              "gpu_price_choice": how(_billed_packing(cost.report, setup))}, plan=plan, kv_tiers=tiers,
                      cost=cost.payload, rate_sweep=_sweep(base, runs) if req.with_sweep else None,
                      engine_savings=engine_savings(cap, base, runs) if req.with_engine_savings else None,
                      curves={"utilization": utilization_curve(cost.payload), "volume": volume_curve(cost.payload)},
                      measured=measured_rows(req.bench_files, slo), commands=report_commands(req, price_flags))
