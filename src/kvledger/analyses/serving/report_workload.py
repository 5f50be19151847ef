"""The workload of ``kvledger report`` (and ``kvledger ui``'s serving panel): a trace, or a synthetic workload named by
``cost --simulate``'s flags (``--prompt-lengths``, ``--output-lengths``, ``--arrival-cv``), handed to the simulation
builder cost uses (``SimRequestArgs`` with a ``sim_ledgers.SyntheticSpec``), so the report on a workload agrees with
cost on it; and the command lines the report prints, each carrying the same workload flags."""

from __future__ import annotations

import shlex
from typing import Any

from kvledger.analyses.serving.report_tiers import tier_flags_text
from kvledger.errors import InputError
from kvledger.ranges import check_options

__all__ = ["CONTEXTS", "report_synthetic", "workload_flags", "report_commands", "workload_contexts", "plan_contexts",
           "plan_view_settings"]

CONTEXTS = (1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)
"""Context lengths (tokens) of the report's concurrency figure and its plan command; 8K and 128K are the two the
report compares (``decision_data`` re-exports it)."""

PLAN_KEYS = ("engine_version", "tp", "max_model_len", "gpu_memory_utilization", "mem_fraction_static", "kv_cache_dtype",
             "quantization",
             "max_num_seqs", "wddm", "allreduce_link_share", "gpu_profile", "enable_expert_parallel",
             "data_parallel_size", "pp", "ep_size", "enable_dp_attention", "moe_a2a_backend")
"""The engine settings ``kvledger plan`` takes (the others are the simulator's)."""


def report_synthetic(req: Any) -> Any:
    """The synthetic workload of the ``decision_data.ReportRequest`` ``req``, or None for its trace; its lengths are
    read here, before any simulation.

    Raises:
        InputError: half a synthetic workload (cost's words), unreadable lengths (the flag named), or an arrival CV out
            of range.
    """
    from kvledger.analyses.serving.sim_ledgers import SyntheticSpec
    from kvledger.dynamics.workload.synthetic import parse_lengths

    prompt, output, cv = req.prompt_lengths, req.output_lengths, req.arrival_cv
    if prompt is None and output is None and cv is None:
        return None
    if prompt is None or output is None:
        raise InputError("a synthetic workload needs both --prompt-lengths and --output-lengths")
    check_options("report", {"arrival_cv": cv})
    for flag, text in (("--prompt-lengths", prompt), ("--output-lengths", output)):
        try:
            parse_lengths(text)
        except InputError as err:  # say which of the two flags (the parser knows only the text)
            raise InputError(f"{flag}: {err}") from None
    return SyntheticSpec(prompt, output, 1.0 if cv is None else cv)


def workload_contexts(req: Any) -> dict[str, int] | None:
    """``{"mean_tokens": …, "max_tokens": …}``: the mean (rounded up to a whole token) and the largest prompt + output
    of the report's synthetic requests (``num_requests`` drawn with ``seed``: the lengths every probe runs, whatever
    its rate; a document pool's documents in their prompts), whose concurrency the report states; None for a trace
    (the fixed 8K and 128K levels then)."""
    import math

    spec = report_synthetic(req)
    if spec is None:
        return None
    specs = spec.requests(req.num_requests, 1.0, req.seed)
    engine = getattr(req, "engine", None) or {}
    if (pool := engine.get("document_pool")) is not None:  # each prompt: a drawn document before its question
        from kvledger.dynamics.workload.document_pool import parse_document_pool, pool_rng, with_document_pool

        specs, _ = with_document_pool(list(specs), parse_document_pool(pool), engine.get("shared_prefix_tokens"),
                                      pool_rng(req.seed))  # the draw every simulation of the report makes
    contexts = [r.num_prompt_tokens + r.num_output_tokens for r in specs]
    return {"mean_tokens": math.ceil(sum(contexts) / len(contexts)), "max_tokens": max(contexts)}


def plan_contexts(req: Any) -> tuple[int, ...]:
    """The plan section's contexts: ``CONTEXTS`` and the workload's mean and max (``workload_contexts``), tokens."""
    extra = (workload_contexts(req) or {}).values()
    return tuple(sorted(set(CONTEXTS) | set(extra)))


def workload_flags(req: Any) -> str:
    """`` --trace NAME`` or `` --prompt-lengths P --output-lengths O`` (`` --arrival-cv X`` where given), then
    `` --num-requests N --seed S``: the workload as ``cost``, ``goodput`` and ``simulate`` take it."""
    if req.prompt_lengths is None and req.output_lengths is None and req.arrival_cv is None:
        head = f" --trace {shlex.quote(req.trace)}"
    else:
        head = "".join(f" --{k.replace('_', '-')} {shlex.quote(str(getattr(req, k)))}"
                       for k in ("prompt_lengths", "output_lengths", "arrival_cv") if getattr(req, k) is not None)
    return f"{head} --num-requests {req.num_requests} --seed {req.seed}"


def _k(tokens: int) -> str:
    """``8K`` for a whole number of 1,024 tokens, else the tokens as digits (``plan --context`` reads both)."""
    return f"{tokens // 1024}K" if tokens % 1024 == 0 else str(tokens)


def _flag(k: str, v: Any) -> str:
    """`` --name value`` for an engine setting; an on/off one (``wddm``) as the bare flag, or nothing when off."""
    name = f" --{k.replace('_', '-')}"
    return "" if v is None or v is False else name if v is True else f"{name} {shlex.quote(str(v))}"


def _bill_flags(req: Any) -> str:
    """The cost command's API mix, people, volume, API row, peak and decision factors, as given."""
    mix = "".join(f" --{k.replace('_', '-')} {getattr(req, k)!r}" for k in (
        "batch_share", "cache_hit_rate", "cache_write_rate", "engineer_months_per_month", "engineer_usd_per_month",
        "utilization", "monthly_tokens", "monthly_requests", "monthly_input_tokens", "monthly_output_tokens")
                  if getattr(req, k) is not None and (getattr(req, k) or k.startswith(("engineer", "monthly"))))
    mix += f" --api {shlex.quote(req.api)}" if req.api else ""
    mix += f" --peak-to-mean {req.peak_to_mean!r}" if req.peak_to_mean != 1.0 else ""
    return mix + "".join(f" --{k.replace('_', '-')} {getattr(req, k)}" for k in ("data_sovereignty", "model_control",
                                                                                 "team_capability"))


def _spelled(engine: dict[str, Any]) -> list[tuple[str, str, Any]]:
    """(setting, the flag's name, value) of the engine settings in order, SGLang's DP size as ``--dp-size`` (which
    every command takes) and its DP attention as the release spells it (``accounting/attn_dp.py``): ``--attn-dp-size
    N`` from 0.5.22, ``--enable-dp-attention --dp-size N`` before."""
    from kvledger.accounting.attn_dp import takes_attn_dp_size

    sg = engine.get("policy") == "sglang"
    n = engine.get("data_parallel_size") if sg and engine.get("enable_dp_attention") else None
    new = bool(n) and takes_attn_dp_size(engine.get("engine_version"))
    return [("enable_dp_attention", "attn_dp_size", n) if new and k == "enable_dp_attention" else
            (k, "dp_size" if sg and k == "data_parallel_size" else k, v)
            for k, v in engine.items() if not (new and k == "data_parallel_size")]


def report_commands(req: Any, gpu_price: str) -> dict[str, str]:
    """The kvledger command lines whose ``--json`` each section of the report equals (``gpu_price``: the cost
    command's price flags)."""
    eng = "".join(_flag(name, v) for _, name, v in _spelled(req.engine))
    plan_eng = "".join(_flag(name, v) for k, name, v in _spelled(req.engine) if k in PLAN_KEYS)
    plan_eng += " --engine sglang" if req.engine.get("policy") == "sglang" else ""
    tiers = tier_flags_text(getattr(req, "tier", None))
    plan_eng += tier_flags_text(getattr(req, "tier", None), simulator=False)  # plan sizes the tiers
    wl = workload_flags(req) + eng
    m, g, slo = shlex.quote(req.model), shlex.quote(req.gpu), shlex.quote(req.slo)
    return {
        "plan": f"kvledger plan {m} --gpu {g} --context {','.join(_k(c) for c in plan_contexts(req))}{plan_eng} --json",
        "cost": (f"kvledger cost --simulate {m} --gpu {g}{wl} --slo {slo} "
                 f"--max-utilization {req.max_utilization!r}{gpu_price}{_bill_flags(req)} --target {req.target:g} "
                 "--json"),
        "capacity": f"kvledger goodput --simulate {m} --gpu {g}{wl} --slo {slo} --target {req.target:g} --axis rate "
                    "--json",
        "sweep_point": f"kvledger simulate {m} --gpu {g}{wl} --rate RATE --json",
        # the comparison with vLLM's static and contiguous presets, where it is run (not under SGLang's rules)
        **({"engine_savings": f"kvledger simulate {m} --gpu {g}{wl} --rate RATE --policy static|contiguous --json"}
           if req.with_engine_savings else {}),
        # the KV tiers at the capacity (goodput --simulate with tier flags runs simulate's tier run), or the document
        # pool's expected hit shares (simulate's workload.document_pool)
        **({"kv_tiers": f"kvledger goodput --simulate {m} --gpu {g}{wl} --slo {slo} --rate RATE{tiers} --json"}
           if tiers else {"kv_tiers": f"kvledger simulate {m} --gpu {g}{wl} --rate RATE --json"}
           if req.engine.get("document_pool") is not None else {}),
    }


def plan_view_settings(settings: Any, gpu_profile: str | None, gpu: Any) -> tuple[Any, Any]:
    """(``settings`` with the fractions ``plan --gpu-profile`` prices its roofline view at, the ``GpuProfile`` read or
    None) (``profile_fractions.plan_view_fractions``), where the report was given ``--gpu-profile`` (its plan command
    then carries the flag: ``PLAN_KEYS``); without it, (``settings`` as they are, None)."""
    if gpu_profile is None:
        return settings, None
    from kvledger.accounting.profile_fractions import plan_view_fractions

    flops, bandwidth, share, prof = plan_view_fractions(gpu_profile, gpu, share=settings.allreduce_link_share)
    return settings.model_copy(update={"achievable_flops_fraction": flops, "achievable_bandwidth_fraction": bandwidth,
                                       "allreduce_link_share": share}), prof
