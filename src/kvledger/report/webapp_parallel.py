"""The web app's memory fraction and parallelism fields beyond TP, checked by the CLI's own checks (never a copy):
SGLang's ``mem_fraction_static`` (``--mem-fraction-static``; vLLM's is ``gpu_memory_utilization``, each refused under
the other engine by ``plan_checks.check_memory_fraction``), ``data_parallel_size`` (vLLM's ``--data-parallel-size``,
SGLang's ``--dp-size``), SGLang's ``enable_dp_attention`` (``--enable-dp-attention``), ``attn_dp_size``
(``--attn-dp-size``, SGLang 0.5.22 on: ``accounting/attn_dp.resolve_attn_dp_size``, the check plan and report share)
and ``ep_size`` (``--ep-size``, ``ep_flags.refuse_ep_flags``), vLLM's ``enable_expert_parallel``
(``--enable-expert-parallel``, its MoE DP ranks'): the plan as ``kvledger plan`` takes those flags, the serving panel
as ``kvledger report`` does (``report_parallel``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["PARALLEL_FIELDS", "WebDp", "plan_parallel", "serving_parallel", "check_serving_dp"]

#: both requests' parallelism fields, ``kvledger plan``'s and ``report``'s flags by the same name
PARALLEL_FIELDS = ("data_parallel_size", "enable_dp_attention", "attn_dp_size", "ep_size", "enable_expert_parallel")


@dataclass(frozen=True, slots=True)
class WebDp:
    """The DP fields as ``report_parallel`` reads the CLI's ``SimDataParallelFlags`` (the app has no all-to-all
    backend or pipeline-stage field: the engines' defaults)."""

    data_parallel_size: int | None = None
    enable_dp_attention: bool = False
    attn_dp_size: int | None = None
    moe_a2a_backend: str | None = None
    all2all_backend: str | None = None
    pp: int | None = None


def _engine(engine: str) -> str:
    from kvledger.accounting.settings import engine_name

    return engine_name(engine.strip().lower())


def plan_parallel(model: str, engine: str, tp: int, fields: dict[str, Any],
                  engine_version: str | None = None) -> dict[str, Any]:
    """``make_settings``' arguments of the fields (``PARALLEL_FIELDS`` and ``mem_fraction_static``), refused as
    ``kvledger plan`` refuses the flags: the other engine's memory fraction, an --ep-size the engine or model does not
    take, an --attn-dp-size off SGLang 0.5.22+ or beside a second DP size (read as --enable-dp-attention --dp-size N,
    as plan reads it: cli/plan_flags.plan_inputs); the rest in the plan's own checks (accounting/dp_attention.py)."""
    from kvledger.accounting.attn_dp import resolve_attn_dp_size
    from kvledger.accounting.plan_checks import check_memory_fraction

    name, ep = _engine(engine), fields.get("ep_size")
    check_memory_fraction(name, fields)
    if ep is not None:  # plan's refusal, in its words (analyses/ep_flags.py)
        from kvledger.analyses.ep_flags import refuse_ep_flags
        from kvledger.catalog.models import load_model

        refuse_ep_flags(name, tp, ep, None, load_model(model, allow_hub=False))
    dpa, dps = resolve_attn_dp_size(fields.get("attn_dp_size"), bool(fields.get("enable_dp_attention")),
                                    fields.get("data_parallel_size"), engine=name, engine_version=engine_version, tp=tp)
    return {"mem_fraction_static": fields.get("mem_fraction_static"),
            "data_parallel_size": dps, "enable_dp_attention": dpa or None,
            "ep_size": ep if name == "sglang" and ep != 1 else None,  # plan's: SGLang's, 1 its default
            "enable_expert_parallel": bool(fields.get("enable_expert_parallel"))}  # vLLM's, its DP ranks' experts


def serving_parallel(model: str, policy: str | None, tp: int, fields: dict[str, Any]) -> tuple[dict[str, Any], WebDp]:
    """(the report's engine settings of the fields, the ``WebDp`` to check the request with: ``check_serving_dp``),
    the memory fraction and --ep-size refused as ``kvledger report`` refuses them (``policy``: the simulator's, None
    for vLLM)."""
    from kvledger.accounting.plan_checks import check_memory_fraction
    from kvledger.analyses.serving.report_parallel import parallel_engine

    check_memory_fraction(policy or "vllm", fields)
    dp = WebDp(fields.get("data_parallel_size"), bool(fields.get("enable_dp_attention")), fields.get("attn_dp_size"))
    ep = {"enable_expert_parallel": True} if fields.get("enable_expert_parallel") else {}  # as report's flag
    return parallel_engine(model, policy, tp, fields.get("ep_size"), dp, fields.get("engine_version")) | ep, dp


def check_serving_dp(req: Any, dp: WebDp) -> None:
    """The serving request's DP ranks and DP attention checked as ``kvledger report`` checks them, before any
    simulation (``report_parallel.check_report_dp``)."""
    from kvledger.analyses.serving.report_parallel import check_report_dp

    check_report_dp(req, dp)
