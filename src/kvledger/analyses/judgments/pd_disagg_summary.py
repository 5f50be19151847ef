"""The P/D comparison as a report: colocated vs every split, the tuning runs (one knob, one pool), and a verdict in
plain words that claims only what the numbers show."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from kvledger.analyses.judgments.pd_disagg import (
    Deployment,
    DeploymentResult,
    DisaggStudy,
    evaluate,
    search_max_rate,
    splits_for,
)
from kvledger.analyses.judgments.pd_disagg_verdict import SAME_THROUGHPUT_TOLERANCE, verdict
from kvledger.dynamics.disagg import FIRST_TOKEN_SOURCES
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.jsonable import json_fields, to_jsonable
from kvledger.ledgers.boundary_widen import MAX_DOUBLINGS
from kvledger.strict_json import finite_rate

__all__ = ["DisaggReport", "analyse_disagg", "SAME_THROUGHPUT_TOLERANCE", "verdict"]


@json_fields(exclude=("deployments",), read={"workload": "workload_json"}, extra=("deployments",))  # deployments last
@dataclass
class DisaggReport:
    """The comparison: settings, one result per deployment, the tuning runs, the verdict and notes (JSON-ready)."""

    model: str
    gpu: str
    workload: dict[str, Any]
    num_gpus: int
    slo: dict[str, Any]
    attainment_target: float
    link: dict[str, Any]
    transfer_model: str
    first_token: str
    deployments: list[DeploymentResult]
    tuning: list[dict[str, Any]] = field(default_factory=list)
    verdict: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    step_cost: dict[str, Any] = field(default_factory=dict)
    """The colocated pool's step cost as ``simulate`` describes it (each pool is priced by its own plan alike)."""

    @property
    def workload_json(self) -> dict[str, Any]:
        """``workload`` as the JSON writes it: an infinite offered rate as null with ``"all_at_once": true``."""
        return finite_rate(self.workload, "offered_rate_req_per_s")

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)

    def best_split(self) -> DeploymentResult | None:
        """The disaggregated deployment with the highest goodput per GPU (then lowest TTFT p90), or None."""
        ds = [x for x in self.deployments if x.kind == "disaggregated"]
        return max(ds, key=lambda x: (x.goodput_req_per_s_per_gpu, -(x.ttft_s["p90"] or 0.0)), default=None)

    def colocated(self) -> DeploymentResult | None:
        return next((x for x in self.deployments if x.kind == "colocated"), None)


def analyse_disagg(study: DisaggStudy, specs: list[RequestSpec], *, num_gpus: int, tp: int = 1, prefill_tp: int = 1,
                   decode_tp: int = 1, splits: list[tuple[int, int]] | None = None, colocated: dict | None = None,
                   prefill: dict | None = None, decode: dict | None = None, tune: bool = True,
                   tune_prefill_max_num_batched_tokens: int | None = None, tune_decode_max_num_seqs: int | None = None,
                   load: Callable[[float], list[RequestSpec]] | None = None, rate_per_s: float | None = None,
                   workload: dict[str, Any] | None = None) -> DisaggReport:
    """Compare N/TP colocated replicas with each P:D split of ``num_gpus`` on ``specs``.

    Args:
        colocated / prefill / decode: vLLM settings per pool ({"max_num_batched_tokens": …, "max_num_seqs": …}).
        tune: also run the best split with one prefill knob and one decode knob turned, and the colocated
            deployment with the prefill knob (the budget) turned.
        tune_prefill_max_num_batched_tokens: the prefill pool's budget in the tuning run (default ¼ of its own).
        tune_decode_max_num_seqs: the decode pool's max_num_seqs in the tuning run (default 128, or ½ if ≤ 128).
        load, rate_per_s: with both, search each deployment's highest rate meeting the attainment target.

    Raises:
        InputError: GPU counts that do not divide, a model that does not fit, bad settings.
    """
    from kvledger.errors import InputError

    if num_gpus % tp:
        raise InputError(f"{num_gpus} GPUs do not divide into colocated replicas of TP {tp}")
    co, pre, dec = (_ov(x) for x in (colocated, prefill, decode))
    deps = [Deployment("colocated", num_gpus // tp, tp, overrides=co)]
    for p, d in splits or splits_for(num_gpus, prefill_tp, decode_tp):
        deps.append(Deployment("disaggregated", p, prefill_tp, d, decode_tp, pre, dec))
    results = [evaluate(study, dep, specs) for dep in deps]
    if load is not None and rate_per_s:
        for dep, res in zip(deps, results):
            res.max_rate_search = search_max_rate(study, dep, load, rate_per_s)
            b = res.max_rate_search["boundary_value"]
            res.max_rate_per_gpu = b / dep.num_gpus if b is not None else None
    link = study.link
    tr = (f"per-GPU KV bytes of the prompt (memory plan) ÷ {link.bytes_per_s / 1e9:,.1f} GB/s "
          f"+ {link.latency_s * 1e3:g} ms")
    rep = DisaggReport(study.model.name, study.gpu.name, workload or {"num_requests": len(specs)}, num_gpus,
                       study.slo.to_dict(), study.target, link.to_dict(), tr, study.first_token, results,
                       step_cost=study.priced(tp, co)[1])
    best = rep.best_split()
    if tune and best is not None:
        bdep = deps[results.index(best)]
        rep.tuning = _tuning(study, specs, deps[0], results[0], bdep, best, tune_prefill_max_num_batched_tokens,
                             tune_decode_max_num_seqs)
    rep.verdict = verdict(rep)
    rep.notes = _notes(study, bool(load is not None and rate_per_s))
    return rep


def _ov(d: dict | None) -> tuple[tuple[str, int | None], ...]:
    return tuple(sorted((k, v) for k, v in (d or {}).items() if v is not None))


def _tuning(study: DisaggStudy, specs, co_dep: Deployment, co_res: DeploymentResult, dep: Deployment,
            base: DeploymentResult, tune_mnbt: int | None, tune_mns: int | None) -> list[dict[str, Any]]:
    """Baseline, prefill budget turned, decode max_num_seqs turned (best split); colocated with the budget turned."""
    p_mnbt = base.settings["prefill"]["max_num_batched_tokens"]
    d_mns = base.settings["decode"]["max_num_seqs"]
    c_mnbt = co_res.settings["colocated"]["max_num_batched_tokens"]
    mnbt = tune_mnbt or max(256, p_mnbt // 4)
    mns = tune_mns or (128 if d_mns > 128 else max(1, d_mns // 2))
    p_dep = replace(dep, overrides=_ov({**dict(dep.overrides), "max_num_batched_tokens": mnbt}))
    d_dep = replace(dep, decode_overrides=_ov({**dict(dep.decode_overrides), "max_num_seqs": mns}))
    c_dep = replace(co_dep, overrides=_ov({**dict(co_dep.overrides), "max_num_batched_tokens": mnbt}))
    rows = [_row(base, "baseline", "—", None), _row(evaluate(study, p_dep, specs), "prefill pool",
            f"max_num_batched_tokens {p_mnbt:,} → {mnbt:,}", base),
            _row(evaluate(study, d_dep, specs), "decode pool", f"max_num_seqs {d_mns:,} → {mns:,}", base),
            _row(co_res, "baseline", "—", None),
            _row(evaluate(study, c_dep, specs), "colocated", f"max_num_batched_tokens {c_mnbt:,} → {mnbt:,}", co_res)]
    return rows


def _row(r: DeploymentResult, pool: str, knob: str, base: DeploymentResult | None) -> dict[str, Any]:
    row = {"deployment": r.label, "pool_changed": pool, "knob": knob, "ttft_p50_s": r.ttft_s["p50"],
           "ttft_p90_s": r.ttft_s["p90"], "itl_p50_s": r.itl_s["p50"], "itl_p99_s": r.itl_s["p99"],
           "tpot_p90_s": r.tpot_s["p90"], "throughput_req_per_s": r.throughput_req_per_s,
           "goodput_req_per_s_per_gpu": r.goodput_req_per_s_per_gpu}
    if base is not None:
        row["ttft_p90_change"] = _change(base.ttft_s["p90"], r.ttft_s["p90"])
        row["itl_p99_change"] = _change(base.itl_s["p99"], r.itl_s["p99"])
        row["ttft_identical"] = base.ttft_s == r.ttft_s
    return row


def _change(a: float | None, b: float | None) -> float | None:
    """Relative change b/a − 1 (None when either is missing or a is 0)."""
    return None if not a or b is None else b / a - 1.0


def _fitted_on(study: DisaggStudy) -> str:
    """What a given step cost was fitted on: the bundled measurements (--step-cost calibrated) or a profile."""
    bundled = str((study.step_cost_info or {}).get("scope", "")).startswith("model (bundled")
    return ("bundled measurements, kvledger.accounting.calibrated" if bundled else
            "a fitted step cost, kvledger calibrate")


def _notes(study: DisaggStudy, searched: bool) -> list[str]:
    out = [f"first token: {FIRST_TOKEN_SOURCES[study.first_token]}",
           "goodput here is benchmark goodput at the offered load: good requests ÷ (last finish − first arrival), ÷ "
           "GPUs "
           "(vLLM benchmarks/serve.py request_goodput; kvledger.ledgers.goodput)",
           ("step times: each pool's own plan priced as `kvledger simulate` prices it at that TP (the step cost "
            "line: the colocated pool's)" if getattr(study, "step_cost", None) is None
            else f"step times: {study.step_cost.name} in every pool ({_fitted_on(study)})")
           + "; KV pools: each pool's vLLM memory plan",
           "simplifications: prefill blocks freed at the first token (a connector holds them until read); transfers "
           "from "
           "one prefill replica queue on its link, the receiving link is not modelled; the decode pool runs without "
           "prefix caching; no per-block transfer inefficiency (small pages move slower than the link's peak)",
           "vLLM docs (features/disagg_prefill.md): disaggregated prefill does not improve throughput; DistServe "
           "(OSDI 2024) reports gains in goodput per GPU under tight TTFT and TPOT SLOs"]
    if getattr(study, "link_note", None):
        out.insert(0, study.link_note)
    if study.link.latency_s == 1e-3:
        out.append("transfer latency 1 ms per request is an assumption (one connector round trip), not a measurement: "
                   "pass --transfer-latency with yours")
    if searched:
        out.append("max rate: from 0.1 × the rate given up to 1.5 × it, the upper end doubled (at most "
                   f"{MAX_DOUBLINGS} times) while the target still holds there, then bisection to 2 % of the "
                   "bracket's low end (kvledger.ledgers.boundary.search_boundary); assumes attainment falls as load "
                   "rises; a rate marked ≥ met the target at the last doubling")
    return out
