"""The ``kvledger ui`` web app (FastAPI): JSON endpoints over the Python API — the plan, and the serving/cost chain — each with the report's figures as SVG.

``/api/plan`` builds the same plan ``kvledger plan --json`` prints for the same inputs (the
browser test checks the numbers shown against it); ``/api/serving`` runs the report's capacity
search, latency sweep and cost ledger (``kvledger.analyses.serving.decision_data``) on a small workload.
Bad input answers 400 with the one-paragraph message the CLI would print. Requests may name local files only
inside the folder given to ``kvledger ui --data-dir`` (``webapp_inputs``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["create_app", "plan_payload", "serving_payload", "choices"]


def choices() -> dict[str, Any]:
    """What the form offers: bundled models, catalog GPUs, API price rows, traces, engines, KV dtypes."""
    from kvledger.catalog.gpus import gpu_catalog
    from kvledger.catalog.models import bundled_models
    from kvledger.catalog.prices import api_prices

    return {"models": [m.hf_id for m in bundled_models()],
            "gpus": [{"id": g.gpu_id, "name": g.name} for g in gpu_catalog().values() if g is not None],
            "apis": [p.key for p in api_prices()],
            "traces": ["azure-conv", "azure-code", "mooncake", "arxiv"],
            "engines": ["vllm", "sglang", "trtllm"], "kv_cache_dtypes": ["auto", "fp8"]}


def _figure_json(f: Any) -> dict[str, Any]:
    from kvledger.report.figure import svg_of

    return {"title": f.title, "caption": f.caption, "svg": svg_of(f.fig), "headers": f.headers, "rows": f.rows, "sources": f.sources}


def plan_payload(model: str, gpu: str, engine: str = "vllm", tp: int = 1, max_model_len: str | None = None,
                 kv_cache_dtype: str = "auto", gpu_memory_utilization: float | None = None) -> dict[str, Any]:
    """The plan (as ``plan --json`` with ``--context 1K,…,128K``), the headline numbers and the three KV figures."""
    from kvledger.accounting.plan import build_plan, plan_to_dict
    from kvledger.accounting.settings import make_settings
    from kvledger.analyses.serving.decision_data import CONTEXTS
    from kvledger.catalog.gpu_file import resolve_gpu
    from kvledger.catalog.models import load_model
    from kvledger.report.figures_kv import kv_figures
    from kvledger.units import parse_tokens

    settings = make_settings(engine=engine.lower(), tp=tp, contexts=CONTEXTS, kv_cache_dtype=kv_cache_dtype,
                             max_model_len=parse_tokens(max_model_len, what="max_model_len") if max_model_len else None,
                             gpu_memory_utilization=gpu_memory_utilization)
    plan = plan_to_dict(build_plan(load_model(model, allow_hub=False), resolve_gpu(gpu), settings))
    conc = {r["context_tokens"]: r for r in plan["concurrency"]}
    m = plan["memory"]
    rng = m.get("ranges", {}).get("available_kv_bytes")
    headline = {"kv_bytes_per_token": plan["kv"]["bytes_per_token_per_gpu"], "available_kv_gib": m["available_kv_bytes"] / 2**30,
                "available_kv_gib_range": [x / 2**30 for x in rng] if rng else None,
                "num_gpu_blocks": m["num_gpu_blocks"], "max_model_len": m["max_model_len"],
                "max_concurrency_8k": conc[8192]["max_concurrency"], "max_concurrency_128k": conc[131072]["max_concurrency"],
                "verdict": (plan.get("advice") or {}).get("message")}
    return {"plan": plan, "headline": headline, "figures": {f.key: _figure_json(f) for f in kv_figures(plan)}}


def serving_payload(model: str, gpu: str, slo: str, api: str | None, trace: str = "azure-conv", tp: int = 1,
                    max_model_len: str | None = None, kv_cache_dtype: str = "auto", utilization: float | None = None,
                    num_requests: int = 300, monthly_tokens: float | None = None) -> dict[str, Any]:
    """Capacity, cost and the serving figures for a small workload (``num_requests`` per simulation; vLLM rules); with
    ``monthly_tokens`` the volume-first decision (both monthly bills) leads the headline."""
    from kvledger.analyses.serving.decision_data import ReportRequest, build_report_data
    from kvledger.errors import range_error
    from kvledger.report.figures_serving import serving_figures

    if not 10 <= num_requests <= 5000:
        raise range_error("requests per simulation", num_requests, "[10, 5,000] in the web app")
    engine = {"tp": tp, "kv_cache_dtype": kv_cache_dtype, **({"max_model_len": max_model_len} if max_model_len else {})}
    req = ReportRequest(model=model, gpu=gpu, slo=slo, api=api, trace=trace, num_requests=num_requests, engine=engine,
                        utilization=utilization, monthly_tokens=monthly_tokens, with_engine_savings=False)
    data = build_report_data(req)
    c = data["cost"]
    cs = c["simulation"]["capacity_search"]
    headline = {"capacity_req_per_s": cs["boundary_rate_req_per_s"], "goodput_req_per_s": cs["goodput_at_boundary_req_per_s"],
                **c["totals"], "verdict": c["verdict"], "answer": (c.get("headline") or [""])[0],
                "gpu_price": data["inputs"]["gpu_price_choice"], "error_band": (c.get("error_band") or {}).get("text")}
    return {"headline": headline, "cost": c, "figures": {f.key: _figure_json(f) for f in serving_figures(data)}}


def create_app(data_dir: Path | None = None):
    """The FastAPI application: ``/`` (the page), ``/api/choices``, ``/api/plan``, ``/api/serving``.

    Requests name bundled models, catalog GPUs and bundled traces; local files only inside ``data_dir``
    (``kvledger.report.webapp_inputs``: the rule and why).
    """
    from fastapi import FastAPI, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import HTMLResponse, JSONResponse

    from kvledger.accounting.settings import reason_in_words
    from kvledger.errors import KvLedgerError
    from kvledger.report.jsonout import strict_json
    from kvledger.report.webapp_inputs import check_web_gpu, check_web_model, check_web_trace
    from kvledger.report.webapp_page import PAGE

    app = FastAPI(title="kvledger", docs_url=None, redoc_url=None, openapi_url=None)

    @app.exception_handler(KvLedgerError)
    async def _bad_input(_request: Request, err: KvLedgerError) -> JSONResponse:
        return JSONResponse({"error": str(err)}, status_code=400)

    @app.exception_handler(RequestValidationError)
    async def _bad_param(_request: Request, err: RequestValidationError) -> JSONResponse:
        msgs = [f"{e['loc'][-1]} {reason_in_words(e)}, got {e.get('input')!r}" for e in err.errors()]
        return JSONResponse({"error": "invalid parameter: " + "; ".join(msgs)}, status_code=400)

    def _json(data: Any) -> Any:
        from fastapi.responses import Response

        return Response(strict_json(data), media_type="application/json")

    @app.get("/", response_class=HTMLResponse)
    def page() -> str:
        return PAGE

    @app.get("/api/choices")
    def api_choices() -> Any:
        return _json(choices())

    @app.get("/api/plan")
    def api_plan(model: str, gpu: str, engine: str = "vllm", tp: int = 1, max_model_len: str | None = None,
                 kv_cache_dtype: str = "auto", gpu_memory_utilization: float | None = None) -> Any:
        model, gpu = check_web_model(model, data_dir), check_web_gpu(gpu, data_dir)
        return _json(plan_payload(model, gpu, engine, tp, max_model_len or None, kv_cache_dtype, gpu_memory_utilization))

    @app.get("/api/serving")
    def api_serving(model: str, gpu: str, slo: str, api: str | None = None, trace: str = "azure-conv", tp: int = 1,
                    max_model_len: str | None = None, kv_cache_dtype: str = "auto", utilization: float | None = None,
                    num_requests: int = 300, monthly_tokens: float | None = None) -> Any:
        model, gpu, trace = check_web_model(model, data_dir), check_web_gpu(gpu, data_dir), check_web_trace(trace, data_dir)
        return _json(serving_payload(model, gpu, slo, api, trace, tp, max_model_len or None, kv_cache_dtype, utilization,
                                     num_requests, monthly_tokens))

    return app
