"""The data behind ``kvledger report`` and ``kvledger ui``: one ``ReportData`` that chains the plan, the SLO capacity,
the cost ledger, a rate sweep and the engine comparisons.

Every section is the object an existing command prints with ``--json`` (the plan is ``plan
--json``, the cost is ``cost --simulate --json``, each sweep point is ``simulate --json``'s
summary), built by the same functions, so the report cannot disagree with the commands; the
equivalent command lines are stored under ``commands``. Curves over utilization and monthly
volume use the break-even formulas of ``kvledger.ledgers.breakeven`` on the same capacity.
"""

from __future__ import annotations

import shlex
from dataclasses import asdict, dataclass, field
from typing import Any

from kvledger.analyses.serving.cost_curves import utilization_curve, volume_curve
from kvledger.analyses.serving.report_data import ReportData
from kvledger.ranges import check_options

__all__ = ["ReportRequest", "ReportData", "CONTEXTS", "SWEEP_FRACTIONS", "build_plan_section", "build_report_data",
           "sim_args"]

CONTEXTS = (1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)
"""Context lengths (tokens) of the concurrency figure; 8K and 128K are the two the report compares."""
SWEEP_FRACTIONS = (0.25, 0.5, 0.75, 1.0, 1.25, 1.5)
"""Request rates of the latency sweep, as fractions of the SLO capacity found."""


@dataclass(frozen=True)
class ReportRequest:
    """What the user chose: model, GPU, engine settings, traffic, SLO, API row and the cost inputs.

    ``num_requests`` is the workload of every simulation (each capacity probe, each sweep point);
    ``engine`` holds vLLM engine flags by ``SimRequestArgs`` field name (tp, max_model_len,
    gpu_memory_utilization, kv_cache_dtype, max_num_seqs, engine_version, …).
    """

    model: str
    gpu: str
    slo: str
    api: str | None = None
    trace: str = "azure-conv"
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
    gpu_usd_per_hour: float | None = None
    batch_share: float = 0.0
    cache_hit_rate: float = 0.0
    cache_write_rate: float = 0.0
    data_sovereignty: str = "not_required"
    model_control: str = "any"
    team_capability: str = "some"
    bench_files: tuple[str, ...] = ()
    with_engine_savings: bool = True
    with_sweep: bool = True


def sim_args(req: ReportRequest, **over: Any):
    """SimRequestArgs for the request's deployment and workload (``over`` replaces fields, e.g. rate or policy)."""
    from kvledger.analyses.serving.sim_setup import SimRequestArgs

    base = dict(model=req.model, gpu=req.gpu, trace=req.trace, num_requests=req.num_requests, seed=req.seed)
    return SimRequestArgs(**{**base, **req.engine, **over})


def _cli_engine_flags(req: ReportRequest) -> str:
    return "".join(f" --{k.replace('_', '-')} {shlex.quote(str(v))}" for k, v in req.engine.items() if v is not None)


def build_plan_section(req: ReportRequest) -> dict[str, Any]:
    """``kvledger plan MODEL --gpu GPU --context 1K,…,128K --json`` for the request's engine settings."""
    from kvledger.accounting.plan import build_plan, plan_to_dict
    from kvledger.accounting.settings import make_settings
    from kvledger.catalog.gpu_file import resolve_gpu
    from kvledger.catalog.models import load_model
    from kvledger.units import parse_tokens

    e = req.engine
    mml = e.get("max_model_len")
    settings = make_settings(engine_version=e.get("engine_version"), tp=e.get("tp") or 1,
                             max_model_len=parse_tokens(str(mml), what="--max-model-len") if mml else None,
                                 contexts=CONTEXTS,
                             gpu_memory_utilization=e.get("gpu_memory_utilization"),
                             kv_cache_dtype=e.get("kv_cache_dtype") or "auto", max_num_seqs=e.get("max_num_seqs"))
    return plan_to_dict(build_plan(load_model(req.model), resolve_gpu(req.gpu), settings))


def _pick_gpu_rate(req: ReportRequest, gpu_id: str) -> tuple[Any, str, str]:
    """(GPU rate, how it was chosen, the cost command's flags for it): the user's price, the named provider's row, or
    the cheapest row listed for the GPU (stated as such)."""
    from kvledger.analyses.serving.cost_run import cheapest_gpu_row, gpu_rate
    from kvledger.ledgers.cost import GpuRate

    if req.gpu_usd_per_hour is not None:
        return (
            gpu_rate(gpu_id, None, None, req.gpu_usd_per_hour),
            "given (--gpu-usd-per-hour)",
            f" --gpu-usd-per-hour {req.gpu_usd_per_hour!r}",
        )
    row, num_rows = cheapest_gpu_row(gpu_id, req.gpu_provider)
    flags = f" --gpu-provider {shlex.quote(row.provider)} --instance {shlex.quote(row.instance_type)}"
    scope = f"{req.gpu_provider}'s" if req.gpu_provider else "the"
    how = (
        f"cheapest of {scope} {num_rows} row(s) for {gpu_id} in gpu_prices.csv: {row.provider} "
        f"{row.instance_type}, "
        f"${row.usd_per_gpu_hour:.2f}/GPU-h" + ("" if req.gpu_provider else "; pass --gpu-provider to choose another")
    )
    return GpuRate.from_catalog(row), how, flags


def _summary_row(sim: Any, slo: Any) -> dict[str, Any]:
    from kvledger.ledgers.goodput import goodput

    gp = goodput(sim.run, slo)
    return {"rate_req_per_s": sim.run.metadata.request_rate, "summary": sim.result.summary.to_dict(),
            "engine": sim.result.config, "attainment": gp.attainment, "goodput_req_per_s": gp.goodput_req_per_s,
            "throughput_req_per_s": gp.throughput_req_per_s}


def _sweep(req: ReportRequest, cap: Any, slo: Any) -> list[dict[str, Any]]:
    from kvledger.analyses.serving.sim_ledgers import simulate_run

    rows = []
    for f in SWEEP_FRACTIONS:
        rate = cap.rate_req_per_s * f
        # token times only when the SLO judges gaps (ITL), as the capacity probes: the summary's ITL distribution is
        # exact without them (dynamics/outputs/itl_gaps.py)
        sim = cap.run if f == 1.0 else simulate_run(sim_args(req, rate=rate), record_token_times=slo.itl_s is not None)
        rows.append({"fraction_of_capacity": f, **_summary_row(sim, slo)})
    return rows


def _engine_savings(req: ReportRequest, cap: Any, slo: Any) -> dict[str, Any]:
    """Continuous vs static batching and paged vs contiguous KV on the same requests at the capacity rate."""
    from kvledger.analyses.serving.sim_ledgers import simulate_run

    base = _summary_row(cap.run, slo)
    out = {"rate_req_per_s": cap.rate_req_per_s, "engine": {"label": "vLLM v1 rule (continuous batching, paged KV)",
                                                            **base}}
    for key, policy, label in (("static", "static", "static batching (a batch runs until its longest member ends)"),
                               ("contiguous", "contiguous", "contiguous KV (max_model_len reserved per request)")):
        sim = simulate_run(sim_args(req, rate=cap.rate_req_per_s, policy=policy),
                           record_token_times=slo.itl_s is not None)
        out[key] = {"label": label, **_summary_row(sim, slo)}
    out["ratios"] = _ratios(out)
    return out


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else a / b


def _ratios(s: dict[str, Any]) -> list[dict[str, Any]]:
    e = s["engine"]
    rows = []
    for key, name in (("static", "continuous ÷ static batching"), ("contiguous", "paged ÷ contiguous KV")):
        o = s[key]
        rows.append({"comparison": name, "baseline": o["label"],
                     "throughput_ratio": _ratio(e["summary"]["throughput_tok_per_s"],
                                                o["summary"]["throughput_tok_per_s"]),
                     "goodput_ratio": _ratio(e["goodput_req_per_s"], o["goodput_req_per_s"]),
                     "ttft_p90_ratio": _ratio(e["summary"]["ttft_s"]["p90"], o["summary"]["ttft_s"]["p90"])})
    return rows


def _measured(req: ReportRequest, slo: Any) -> list[dict[str, Any]]:
    """Each benchmark run given: its offered rate, attainment, goodput and latency percentiles (same definitions as the
    simulator)."""
    import numpy as np

    from kvledger.evidence import read_runs
    from kvledger.ledgers.columns import columns_from
    from kvledger.ledgers.goodput import goodput
    from kvledger.records import RunRecords

    out = []
    for path in req.bench_files:
        for run in read_runs(path):
            gp = goodput(run, slo)
            row = {"file": str(path), "label": run.metadata.extra.get("run_label"),
                   "rate_req_per_s": run.metadata.request_rate,
                   "concurrency": run.metadata.concurrency, "attainment": gp.attainment,
                       "goodput_req_per_s": gp.goodput_req_per_s,
                   "throughput_req_per_s": gp.throughput_req_per_s, "estimate": gp.estimate}
            if isinstance(run, RunRecords):
                cols = columns_from(run)
                for name, v in (("ttft_s", cols.ttft_s()), ("tpot_s", cols.tpot_s())):
                    v = v[cols.ok & ~np.isnan(v)]
                    row[name] = {f"p{q}": float(np.percentile(v, q)) for q in (50, 90, 99)} if v.size else None
            else:  # percentiles as the file states them (per-request distributions only)
                for name, metric in (("ttft_s", "ttft"), ("tpot_s", "tpot")):
                    ms = run.metrics.get(metric)
                    got = {} if ms is None or ms.weighting != "request" else ms.percentiles_s
                    row[name] = {f"p{q}": got[float(q)] for q in (50, 90, 99)} if all(float(q) in got for q in (50, 90,
                        99)) else None
            out.append(row)
    return out


def build_report_data(req: ReportRequest, progress: Any = None) -> ReportData:
    """Everything the report draws (module docstring).

    Args:
        progress: optional ``progress(stage_text)`` callback, called before each stage.

    Raises:
        InputError / UnknownNameError / FormatError: bad names, settings, SLOs or files, with the reason.
    """
    from kvledger.analyses.serving.cost_run import cost_payload
    from kvledger.analyses.serving.decision_inputs import decision_inputs
    from kvledger.analyses.serving.sim_capacity import search_capacity
    from kvledger.catalog.api_match import find_api_price
    from kvledger.ledgers.api_cost import ApiMix
    from kvledger.ledgers.cost import SelfHostSetup
    from kvledger.ledgers.cost_summary import DecisionFactors
    from kvledger.ledgers.decision import MonthlyVolume
    from kvledger.ledgers.host_bill import HostBill, people_cost
    from kvledger.ledgers.slo import parse_slo

    say = progress or (lambda _text: None)
    check_options("report", {"utilization": req.utilization})  # the web app's and the API's ranges: kvledger.ranges
    slo, api_price = parse_slo(req.slo), find_api_price(req.api) if req.api else None
    people = people_cost(req.team_capability, req.engineer_months_per_month, req.engineer_usd_per_month)
    vols = (req.monthly_requests, req.monthly_input_tokens, req.monthly_output_tokens, req.monthly_tokens)
    volume = MonthlyVolume(*vols, req.peak_to_mean) if any(v is not None for v in vols) else None
    check_options("report", {"num_requests": req.num_requests, "target": req.target})
    say("memory plan")
    plan = build_plan_section(req)
    rate, how, price_flags = _pick_gpu_rate(req, plan["gpu"]["gpu_id"])  # price errors before the simulations
    say("SLO-capacity search")
    cap = search_capacity(sim_args(req), slo, req.target)
    setup = SelfHostSetup(rate, cap.run.num_gpus, req.utilization, people.engineer_months_per_month,
                          people.engineer_usd_per_month, None, req.max_utilization)
    inputs, _ = decision_inputs(req.model, api_price, rate, plan["gpu"]["gpu_id"], cap.run, HostBill(), people)
    cost = cost_payload(cap.run.run, slo, setup, None, ApiMix(req.batch_share, req.cache_hit_rate,
                                                              req.cache_write_rate),
                        DecisionFactors(req.data_sovereignty, req.model_control, req.team_capability), volume,
                        sim=cap.run, capacity=cap, inputs=inputs)
    sweep = savings = None
    if req.with_sweep:
        say("latency sweep")
        sweep = _sweep(req, cap, slo)
    if req.with_engine_savings:
        say("engine comparisons")
        savings = _engine_savings(req, cap, slo)
    return ReportData(inputs={**asdict(req), "slo_text": slo.describe(), "gpu_price_choice": how}, plan=plan,
                      cost=cost.payload, rate_sweep=sweep, engine_savings=savings,
                      curves={"utilization": utilization_curve(cost.payload), "volume": volume_curve(cost.payload)},
                      measured=_measured(req, slo), commands=_commands(req, price_flags))


def _commands(req: ReportRequest, gpu_price: str) -> dict[str, str]:
    """The kvledger command lines whose ``--json`` each section equals."""
    eng = _cli_engine_flags(req)
    plan_eng = "".join(f" --{k.replace('_', '-')} {v}" for k, v in req.engine.items()
                       if v is not None and k in ("engine_version", "tp", "max_model_len", "gpu_memory_utilization",
                                                  "kv_cache_dtype", "max_num_seqs"))
    wl = f" --trace {shlex.quote(req.trace)} --num-requests {req.num_requests} --seed {req.seed}{eng}"
    mix = "".join(f" --{k.replace('_', '-')} {getattr(req, k)!r}" for k in ("batch_share", "cache_hit_rate",
                                                                            "cache_write_rate",
                                                                             "engineer_months_per_month",
                                                                                 "engineer_usd_per_month",
                                                                             "utilization", "monthly_tokens",
                                                                                 "monthly_requests",
                                                                             "monthly_input_tokens",
                                                                                 "monthly_output_tokens")
                  if getattr(req, k) is not None and (getattr(req, k) or k.startswith(("engineer", "monthly"))))
    mix += f" --api {shlex.quote(req.api)}" if req.api else ""
    mix += f" --peak-to-mean {req.peak_to_mean!r}" if req.peak_to_mean != 1.0 else ""
    mix += "".join(f" --{k.replace('_', '-')} {getattr(req, k)}" for k in ("data_sovereignty", "model_control",
                                                                           "team_capability"))
    m, g = shlex.quote(req.model), shlex.quote(req.gpu)
    return {
        "plan": f"kvledger plan {m} --gpu {g} --context {','.join(f'{c // 1024}K' for c in CONTEXTS)}{plan_eng} --json",
        "cost": (f"kvledger cost --simulate {m} --gpu {g}{wl} --slo {shlex.quote(req.slo)} "
                 f"--max-utilization {req.max_utilization!r}{gpu_price}{mix} --target {req.target:g} --json"),
        "capacity": f"kvledger goodput --simulate {m} --gpu {g}{wl} --slo {shlex.quote(req.slo)} --target "
                    f"{req.target:g} --axis rate --json",
        "sweep_point": f"kvledger simulate {m} --gpu {g}{wl} --rate RATE --json",
        "engine_savings": f"kvledger simulate {m} --gpu {g}{wl} --rate RATE --policy static|contiguous --json",
    }

