"""The web app's plan panel (``/api/plan``): the same plan ``kvledger plan --json`` prints for the same inputs, its
headline numbers and the three KV figures as SVG."""

from __future__ import annotations

from typing import Any

from kvledger.report.webapp_answer import figure_json

__all__ = ["plan_payload"]


def _fits(plan: dict[str, Any]) -> bool:
    """Whether the engine starts and serves max_model_len: the plan's verdict ("fits"), not a pool alone (a pool too
    small for one max_model_len request still has blocks, and the engine refuses to start)."""
    advice = plan.get("advice")
    return advice["verdict"] == "fits" if advice else plan["memory"]["num_gpu_blocks"] > 0


def plan_payload(model: str, gpu: str, engine: str = "vllm", tp: int = 1, max_model_len: str | None = None,
                 kv_cache_dtype: str = "auto", gpu_memory_utilization: float | None = None,
                 wddm: bool = False, engine_version: str | None = None,
                 max_num_seqs: int | None = None, quantization: str | None = None,
                 stopped: Any = None, kv_offloading_size: float | None = None,
                 more: dict[str, Any] | None = None) -> dict[str, Any]:
    """The plan (as ``plan --json`` with ``--context 1K,…,128K``, and ``--wddm`` when ``wddm``; ``engine_version``,
    ``max_num_seqs`` and ``quantization`` as those flags, ``-q`` the last), the headline numbers and the three KV
    figures. ``stopped()`` true (the client has gone) raises Gone before the plan and before each figure: the plan's
    own arithmetic, once started, runs to its end (a worker thread cannot be stopped from outside);
    ``kv_offloading_size``: a host KV tier, GiB (``webapp_tiers``), the plan's ``kv_tiers``; ``more``: SGLang's
    mem_fraction_static and the DP and EP fields (``webapp_parallel``), as plan's flags of those names."""
    from kvledger.accounting.plan import build_plan
    from kvledger.accounting.settings import make_settings
    from kvledger.accounting.vllm_auto_len import read_max_model_len
    from kvledger.analyses.serving.decision_data import CONTEXTS
    from kvledger.catalog.gpu_file import resolve_gpu
    from kvledger.catalog.models import load_model
    from kvledger.errors import command_named
    from kvledger.report.figures_kv import kv_figures
    from kvledger.report.webapp_guard import stop_if
    from kvledger.report.webapp_parallel import plan_parallel
    from kvledger.report.webapp_requests import check_plan_numbers
    from kvledger.report.webapp_tiers import host_tier_section

    more = {k: v for k, v in (more or {}).items() if v is not None}
    check_plan_numbers(tp, gpu_memory_utilization, max_num_seqs, more)  # `kvledger plan`'s ranges, in its words
    with command_named("ui"):  # a refusal names the flags, which in_app_words turns into the app's fields
        more = plan_parallel(model, engine, tp, {"gpu_memory_utilization": gpu_memory_utilization, **more},
                             engine_version or None)
        mml, auto = read_max_model_len(max_model_len, engine, engine_version or None)  # as `plan` reads it
        settings = make_settings(engine=engine.lower(), tp=tp, contexts=CONTEXTS, kv_cache_dtype=kv_cache_dtype,
                                 max_model_len=mml, auto_max_model_len=auto or None,
                                 gpu_memory_utilization=gpu_memory_utilization, wddm=wddm,
                                 engine_version=engine_version or None, max_num_seqs=max_num_seqs,
                                 quantization=quantization.strip().lower() if quantization else None, **more)
    stop_if(stopped)
    p = build_plan(load_model(model, allow_hub=False), resolve_gpu(gpu), settings)
    with command_named("ui"):
        tiers = host_tier_section(p, kv_offloading_size)
    plan = p.to_dict() | ({"kv_tiers": tiers} if tiers else {})
    headline = _headline(plan, tiers)
    figures = {}
    for f in kv_figures(plan):  # drawing them is most of the time: a request abandoned meanwhile stops here
        stop_if(stopped)
        figures[f.key] = figure_json(f)
    return {"plan": plan, "headline": headline, "figures": figures}


def _headline(plan: dict[str, Any], tiers: dict[str, Any] | None) -> dict[str, Any]:
    """The plan panel's headline numbers of ``plan`` (``plan --json``'s document), the host KV tier's tokens with
    ``tiers``."""
    conc = {r["context_tokens"]: r for r in plan["concurrency"]}
    m = plan["memory"]

    def within(ctx: int, key: str = "max_concurrency") -> Any:  # above max_model_len: no request the engine accepts
        return conc[ctx][key] if conc[ctx]["within_max_model_len"] else None

    rng, blocks = (m.get("ranges", {}).get(k) for k in ("available_kv_bytes", "num_gpu_blocks"))
    headline = {"kv_bytes_per_token_per_gpu": plan["kv"]["bytes_per_token_per_gpu"],
                "available_kv_gib": m["available_kv_bytes"] / 2**30,
                "available_kv_gib_range": [max(0.0, x) / 2**30 for x in rng] if rng else None,
                "num_gpu_blocks": m["num_gpu_blocks"], "max_model_len": m["max_model_len"],
                "num_gpu_blocks_range": list(blocks) if blocks and blocks[0] != blocks[1] else None,
                "max_concurrency_8k": within(8192), "max_concurrency_128k": within(131072),
                "max_concurrency_8k_range": within(8192, "max_concurrency_range"),
                "max_concurrency_128k_range": within(131072, "max_concurrency_range"),
                "pool": m["num_gpu_blocks"] > 0, "fits": _fits(plan),
                "verdict": (plan.get("advice") or {}).get("message"),
                "startup": (m.get("startup") or {}).get("message"),  # vLLM under wddm: does it start (plan prints it)
                "host_kv_tier_tokens": next((t["capacity_tokens"] for t in tiers["tiers"] if t["name"] == "host_dram"),
                                            None) if tiers else None}
    return headline
