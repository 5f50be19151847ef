"""The capacity finding's options (capacity.py ``capacity_options``) for a pool the ledger planned rather than one a log
printed: ``kvledger simulate`` explains its preemptions with the same re-planned options ``doctor`` gives, sized by a
request length it names (its workload's mean) instead of the one a log shows at saturation."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from typing import Any

from kvledger.accounting.plan import Plan
from kvledger.accounting.window_capacity import requests_held
from kvledger.analyses.doctor.capacity import capacity_options
from kvledger.analyses.doctor.capacity_replan import override_basis
from kvledger.analyses.doctor.context import DoctorContext, plan_with
from kvledger.evidence.vllm_log.restarts import parse_vllm_log

__all__ = ["plan_capacity_options"]


def plan_capacity_options(plan: Plan, tokens_per_request: float, held: Callable[[Plan], int] | None = None
                          ) -> list[dict[str, Any]]:
    """``capacity_options``' rows for ``plan``'s pool, each option's ``requests_of_observed_size`` counting requests of
    ``tokens_per_request`` tokens as ``plan`` counts them (``window_capacity.requests_held``: a hybrid layout's blocks
    per request, else its token slots ÷ that, rounded down). The first row, the pool as planned, is ``"as simulated"``.
    A block-count override is kept as the pool (its blocks × bytes per block the KV budget the options start from, as
    doctor does with a logged count); the options re-plan from there, and the first row's notes say so
    (``capacity_replan.override_basis``: vLLM itself keeps an override's count under any flag). ``held``: the count
    instead (simulate's, with a shared prefix cached once: ``pool_holds.shared_count``)."""
    kw = {f.name: getattr(plan.settings, f.name) for f in fields(plan.settings)}
    override = kw.pop("num_gpu_blocks_override", None)
    model_plan = plan
    if override:
        free = plan_with(plan.model, plan.gpu, kw)  # the ledger's own memory terms (TP's weights and the rest)
        model_plan = free if isinstance(free, Plan) else plan
    ctx = DoctorContext(parse_vllm_log("", source="simulate"), plan.model, "simulate", plan.gpu, "simulate --gpu", kw,
                        {}, 1, None, model_plan=model_plan, log_blocks_plan=plan if override else None, gpu_known=True)
    rows, _, _ = capacity_options(ctx, per_req=tokens_per_request,  # each plan's pool counted as plan counts a request
                                  held=held or (lambda p: requests_held(p, tokens_per_request)[0]))
    if rows:
        m = plan.memory
        rows[0] = {**rows[0], "action": "as simulated",
                   "detail": (f"the simulated pool: {m.num_gpu_blocks:,} blocks ("
                              + ("--num-gpu-blocks-override" if override else "the ledger's memory plan") + ")")}
        if override:  # the ratios' basis: the override read as KV memory (capacity_replan.override_basis)
            rows[0]["notes"] = [*rows[0]["notes"], override_basis(override, plan, model_plan if model_plan is not plan
                                                                  else None, f"--num-gpu-blocks-override {override}",
                                                                  kept=False)]
    return rows
