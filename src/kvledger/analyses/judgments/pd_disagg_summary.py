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
from kvledger.dynamics.disagg import FIRST_TOKEN_SOURCES
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.jsonable import json_fields, to_jsonable
from kvledger.strict_json import finite_rate
from kvledger.units import fmt_duration, fmt_rate

__all__ = ["DisaggReport", "analyse_disagg", "SAME_THROUGHPUT_TOLERANCE"]

SAME_THROUGHPUT_TOLERANCE = 0.02  # throughputs within 2 % are called the same


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


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.1%}"


def _ms(x: float | None) -> str:
    return "n/a" if x is None else fmt_duration(x)


def verdict(r: DisaggReport) -> list[str]:
    """Throughput, goodput per GPU, what each pool's knob moves, and the transfer cost — each sentence from the
    numbers."""
    co, best = r.colocated(), r.best_split()
    if co is None or best is None:
        return []
    out = []
    rel = best.throughput_req_per_s / co.throughput_req_per_s - 1.0 if co.throughput_req_per_s else 0.0
    offered = r.workload.get("offered_rate_req_per_s")
    if abs(rel) <= SAME_THROUGHPUT_TOLERANCE:
        out.append(f"Throughput: the same within {SAME_THROUGHPUT_TOLERANCE:.0%} ({co.label} "
                   f"{co.throughput_req_per_s:,.2f} "
                   f"req/s, best split {best.label} {best.throughput_req_per_s:,.2f} req/s). Disaggregation does not "
                   f"add "
                   "throughput here, as vLLM's documentation says it does not.")
    elif rel < 0:
        out.append(f"Throughput: the best split {best.label} serves {best.throughput_req_per_s:,.2f} req/s, {-rel:.1%} "
                   f"less "
                   f"than {co.label} ({co.throughput_req_per_s:,.2f} req/s): splitting the GPUs leaves one pool short.")
    else:
        why = (f"; the colocated deployment falls behind the offered {offered:,.2f} req/s" if offered and
               co.throughput_req_per_s < (1 - SAME_THROUGHPUT_TOLERANCE) * offered else "")
        out.append(f"Throughput: the best split {best.label} serves {best.throughput_req_per_s:,.2f} req/s, {rel:.1%} "
                   f"more "
                   f"than {co.label} ({co.throughput_req_per_s:,.2f} req/s) at this offered load{why}.")
    out.append(_goodput_sentence(r, co, best))
    if r.tuning:
        out.extend(_tuning_sentences(r.tuning, r.first_token))
    t = best.transfer
    if t and t["num_transfers"]:
        ttft = best.ttft_s["p50"]
        out.append(f"KV transfer ({r.link['name']}, {r.link['bytes_per_s_one_way'] / 1e9:,.0f} GB/s one way): "
                   f"{_ms(t['transfer_s']['mean'])} per request on average (of which wire {_ms(t['wire_s']['mean'])}, "
                   f"waiting for the link {_ms(t['link_wait_s']['mean'])}), p99 {_ms(t['transfer_s']['p99'])}"
                   + (f", against a median TTFT of {_ms(ttft)}." if ttft else "."))
    return out


def _goodput_sentence(r: DisaggReport, co: DeploymentResult, best: DeploymentResult) -> str:
    slo = r.slo["text"]
    a, b = co.goodput_req_per_s_per_gpu, best.goodput_req_per_s_per_gpu
    s = (f"Goodput per GPU under {slo} at the offered load: {co.label} {fmt_rate(a)} req/s/GPU ({co.attainment:.1%} "
         f"of requests good), best split {best.label} {fmt_rate(b)} ({best.attainment:.1%})")
    if a and abs(b / a - 1) <= SAME_THROUGHPUT_TOLERANCE:
        s += ": the same within 2 %."
    elif b > a:
        s += f": ×{b / a:.2f} for the split. The gain is in requests that meet the SLO, not in raw throughput."
    else:
        worst = max(best.num_missed, key=best.num_missed.get, default=None) if best.num_missed else None
        s += (f": colocated is ahead ×{a / b:.2f}" if b else ": no request of the split meets the SLO") + (
            f"; the split misses mostly on {worst} ({best.num_missed[worst]:,} "
            f"request{'' if best.num_missed[worst] == 1 else 's'})." if worst else ".")
    searched = [x for x in r.deployments if x.kind == "disaggregated" and x.max_rate_search is not None]
    if searched and co.max_rate_search is not None:
        top = max(searched, key=lambda x: x.max_rate_per_gpu or 0.0)
        a, b = co.max_rate_per_gpu or 0.0, top.max_rate_per_gpu or 0.0
        who = (f"{top.label} is ahead ×{b / a:.2f}" if a and b > (1 + SAME_THROUGHPUT_TOLERANCE) * a else
               f"{co.label} is ahead ×{a / b:.2f}" if b and a > (1 + SAME_THROUGHPUT_TOLERANCE) * b else
               "the same within 2 %" if a and b else "see the table")
        s += (f" Highest rate meeting {r.attainment_target:.0%} attainment (DistServe goodput), per GPU: {co.label} "
              f"{_rate(co.max_rate_per_gpu)}, best split {top.label} {_rate(top.max_rate_per_gpu)} req/s: {who}.")
    return s


def _rate(x: float | None) -> str:
    return "below the lowest rate tried" if x is None else fmt_rate(x)


def _tuning_sentences(rows: list[dict[str, Any]], first_token: str) -> list[str]:
    p, d, c, best, co = rows[1], rows[2], rows[4], rows[0], rows[3]
    why = ("the first token comes from the prefill pool" if first_token == "prefill" else
           "the decode pool streams the first token, but its queue did not change here")
    ttft_d = (f"left TTFT unchanged (identical in every request: {why})" if d["ttft_identical"] else
              f"moved TTFT p90 {_pct(d['ttft_p90_change'])}" + (" (the decode pool streams the first token, so its "
                                                               "queue is in TTFT)" if first_token == "decode" else ""))
    out = [
        f"Decode pool ({d['knob']}): {ttft_d}; ITL p99 {_ms(rows[0]['itl_p99_s'])} → {_ms(d['itl_p99_s'])} "
        f"({_pct(d['itl_p99_change'])}).",
        f"Prefill pool ({p['knob']}): TTFT p90 {_ms(rows[0]['ttft_p90_s'])} → {_ms(p['ttft_p90_s'])} "
        f"({_pct(p['ttft_p90_change'])}); ITL p99 {_pct(p['itl_p99_change'])} (the decode pool's steps carry no prompt "
        "chunks; ITL moves only through when requests reach it).",
        f"Colocated, the same budget change ({c['knob']}): TTFT p90 {_pct(c['ttft_p90_change'])}, ITL p99 "
        f"{_pct(c['itl_p99_change'])} — there prompt chunks and decodes share steps, so one budget sets both.",
    ]
    if best["goodput_req_per_s_per_gpu"] > co["goodput_req_per_s_per_gpu"]:
        g = c["goodput_req_per_s_per_gpu"]
        b, c0 = best["goodput_req_per_s_per_gpu"], co["goodput_req_per_s_per_gpu"]
        part = ("overtakes the split" if g > (1 + SAME_THROUGHPUT_TOLERANCE) * b else "closes the gap" if
                g >= (1 - SAME_THROUGHPUT_TOLERANCE) * b else "recovers part of the gap" if g > c0 else "does not help")
        out.append(f"With that smaller budget the colocated deployment reaches {fmt_rate(g)} req/s/GPU against the "
                   f"split's {fmt_rate(b)}: a smaller prompt chunk {part} (vLLM's docs: chunked prefill "
                   "with the right chunk size can also control tail ITL).")
    return out


def _notes(study: DisaggStudy, searched: bool) -> list[str]:
    out = [f"first token: {FIRST_TOKEN_SOURCES[study.first_token]}",
           "goodput here is benchmark goodput at the offered load: good requests ÷ (last finish − first arrival), ÷ "
           "GPUs "
           "(vLLM benchmarks/serve.py request_goodput; kvledger.ledgers.goodput)",
           ("step times: each pool's own plan priced as `kvledger simulate` prices it at that TP (the step cost "
            "line: the colocated pool's)" if getattr(study, "step_cost", None) is None
            else f"step times: {study.step_cost.name} in every pool (a fitted step cost, kvledger calibrate)")
           + "; KV pools: each pool's vLLM memory plan",
           "simplifications: prefill blocks freed at the first token (a connector holds them until read); transfers "
           "from "
           "one prefill replica queue on its link, the receiving link is not modelled; the decode pool runs without "
           "prefix caching; no per-block transfer inefficiency (small pages move slower than the link's peak)",
           "vLLM docs (features/disagg_prefill.md): disaggregated prefill does not improve throughput; DistServe "
           "(OSDI 2024) reports gains in goodput per GPU under tight TTFT and TPOT SLOs"]
    if study.link.latency_s == 1e-3:
        out.append("transfer latency 1 ms per request is an assumption (one connector round trip), not a measurement: "
                   "pass --transfer-latency with yours")
    if searched:
        out.append("max rate: bisection over the offered rate in [0.1, 1.5] × the rate given, to 2 % of it "
                   "(kvledger.ledgers.boundary.search_boundary); assumes attainment falls as load rises")
    return out
