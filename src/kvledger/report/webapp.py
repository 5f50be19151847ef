"""The ``kvledger ui`` web app (FastAPI): JSON endpoints over the Python API — the plan, and the serving/cost chain —
each with the report's figures as SVG.

``/api/plan`` builds the same plan ``kvledger plan --json`` prints for the same inputs (the
browser test checks the numbers shown against it); ``/api/serving`` runs the report's capacity
search, latency sweep and cost ledger (``kvledger.analyses.serving.decision_data``) on a small workload.
Bad input answers 400 with the one-paragraph message the CLI would print: numbers in the CLI's ranges, strict request
bodies (``webapp_requests``). Requests may name local files only inside the folder given to ``kvledger ui --data-dir``
(``webapp_inputs``).
"""

from __future__ import annotations

import hmac
from pathlib import Path
from typing import Any

from fastapi import Request  # at module level: FastAPI resolves the endpoints' (string) annotations here

from kvledger.report.webapp_answer import figure_json
from kvledger.report.webapp_choices import add_kv_dtypes_route, check_web_kv_dtype, choices
from kvledger.report.webapp_parallel import PARALLEL_FIELDS
from kvledger.report.webapp_plan import plan_payload

# at module level too: the endpoints' body models
from kvledger.report.webapp_requests import (
    ENGINE_FIELDS,
    SERVING_NUM_REQUESTS,
    TRAFFIC_FIELDS,
    WORKLOAD_FIELDS,
    PlanRequest,
    ServingRequest,
)

__all__ = ["create_app", "plan_payload", "serving_payload", "choices", "SERVING_NUM_REQUESTS"]


def serving_payload(model: str, gpu: str, slo: str, api: str | None, trace: str = "azure-conv", tp: int = 1,
                    max_model_len: str | None = None, kv_cache_dtype: str = "auto", utilization: float | None = None,
                    num_requests: int = SERVING_NUM_REQUESTS, monthly_tokens: float | None = None,
                    wddm: bool = False, client_latency: str | None = None, engine: str = "vllm",
                    stopped: Any = None, traffic: dict[str, Any] | None = None,
                    workload: dict[str, Any] | None = None, settings: dict[str, Any] | None = None,
                    kv_offloading_size: float | None = None, parallel: dict[str, Any] | None = None) -> dict[str, Any]:
    """Capacity, cost and the serving figures (``num_requests`` per simulation) under ``engine``'s rules (vllm, or
    sglang: ``simulate --policy sglang``); with ``monthly_tokens`` the volume-first decision leads the headline;
    ``wddm``, ``client_latency``, ``kv_offloading_size`` (the plan panel's host KV tier, GiB): as ``kvledger report``'s
    flags; ``traffic``: cost's flags by field name (``webapp_requests.TRAFFIC_FIELDS``); ``workload``: the synthetic
    workload's (``WORKLOAD_FIELDS``: lengths, a shared prefix, a document pool) and ``settings`` the engine's
    (``ENGINE_FIELDS``) and ``parallel`` its DP and EP (``PARALLEL_FIELDS``), as the report's flags; ``stopped()`` true
    (the client has gone) raises Gone at the next stage.
    Every number is range-checked first, as the CLI checks it."""
    from kvledger.analyses.serving.decision_data import ReportRequest, build_report_data
    from kvledger.report import webapp_requests as wreq
    from kvledger.report.figures_serving import serving_figures
    from kvledger.report.webapp_guard import stop_if
    from kvledger.report.webapp_parallel import check_serving_dp, serving_parallel
    from kvledger.report.webapp_tiers import serving_tier

    settings = wreq.given_settings(settings)  # the empty ones dropped, -q as the CLI reads it
    parallel = {k: v for k, v in (parallel or {}).items() if v is not None}
    wreq.check_serving_numbers(tp, utilization, num_requests, monthly_tokens, settings | parallel)  # ranges, first
    traffic = {k: v for k, v in (traffic or {}).items() if v is not None}
    wreq.check_traffic(traffic, monthly_tokens)  # cost's ranges and rules for its flags, by the request's field names
    policy = wreq.simulator_engine(engine)  # an engine the simulator has no rules for is refused, never run as vLLM
    client = wreq.web_client_latency(client_latency)  # refused here, before any simulation, as the CLI refuses it
    par, dp = serving_parallel(model, policy, tp, settings | parallel)  # the report's checks: fraction, EP (first)
    wl = {k: v for k, v in (workload or {}).items() if v is not None}
    flags = {"tp": tp, "kv_cache_dtype": kv_cache_dtype, **({"max_model_len": max_model_len} if max_model_len else {}),
             **({"wddm": True} if wddm else {}), **({"client_latency": client_latency.strip()} if client else {}),
             **({"policy": policy} if policy else {}),  # and the shared prefix, a SimRequestArgs field (report_request)
             **{k: wl.pop(k) for k in ("shared_prefix_tokens", "document_pool") if k in wl}, **settings, **par}
    req = ReportRequest(model=model, gpu=gpu, slo=slo, api=api, trace=trace, num_requests=num_requests, engine=flags,
                        utilization=utilization, monthly_tokens=monthly_tokens, with_engine_savings=False,
                        tier=serving_tier(kv_offloading_size, gpu, tp), **traffic, **wl)
    check_serving_dp(req, dp)  # DP ranks and DP attention as the report checks them, before any simulation

    def stage(_text: str) -> None:  # build_report_data calls it before each stage
        stop_if(stopped)

    data = build_report_data(req, progress=stage)
    headline = _serving_headline(data, num_requests, client)
    c = data.cost
    return {"headline": headline, "cost": c, "figures": {f.key: figure_json(f) for f in serving_figures(data)}}


def _serving_headline(data: Any, num_requests: int, client: Any) -> dict[str, Any]:
    """The serving panel's headline of the report data: the capacity sized on with its band, goodput, the cost totals
    and verdict, the answer and its caveats, in the app's words."""
    from kvledger.report.decision_view import not_steady_lines, sized_capacity, sized_run_figures
    from kvledger.report.webapp_answer import answer_caveats
    from kvledger.report.webapp_tiers import tier_shares
    from kvledger.report.webapp_words import in_app_words

    c = data.cost
    cs = c["simulation"]["capacity_search"]
    band = cs.get("error_band")
    return {"sizing_req_per_s": sized_capacity(cs),  # cost's capacity.sizing_req_per_s: the rate sized on
                "sizing_req_per_s_range": [band["low"], band["high"]] if band else None,
                "capacity_band": band["text"] + (f"; {band['elsewhere']}" if band.get("elsewhere") else "")
                if band else None,  # with Band.on_gpu's clause where its runs were on other GPUs only
                "capacity_warning": " ".join(not_steady_lines(cs)) or None,
                "goodput_req_per_s": sized_run_figures(cs)[0],  # at the capacity sized on
                **c["totals"], "verdict": c["verdict"], "answer": (c.get("headline") or [""])[0],
                "gpu_price": in_app_words(data.inputs["gpu_price_choice"]),  # "another provider": the field's
                "error_band": (c.get("error_band") or {}).get("text"),
                "secondary": in_app_words(c["secondary"]) if c.get("secondary") else None,  # the utilization priced
                "num_requests": num_requests, "cli_num_requests": SERVING_NUM_REQUESTS,
                "client_latency": client.note() if client is not None else None,  # simulate's line: what, and whence
                "kv_tier_hit_shares": tier_shares(data.kv_tiers),  # each KV tier's share at the capacity (or None)
                **answer_caveats(c)}  # as cost and the report state the decision: notes, break-even, what it rests on


def _add_error_handlers(app: Any, token: str | None) -> None:
    """The app's answers to bad input, a refused or a busy request, and the guard every POST passes first."""
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse

    from kvledger.errors import KvLedgerError
    from kvledger.report.webapp_guard import Busy, Gone, HostGuard, PostGuard, Refused
    from kvledger.report.webapp_words import in_app_words, request_errors

    @app.exception_handler(KvLedgerError)
    async def _bad_input(_request: Request, err: KvLedgerError) -> JSONResponse:
        return JSONResponse({"error": in_app_words(str(err))}, status_code=400)

    @app.exception_handler(RequestValidationError)
    async def _bad_param(_request: Request, err: RequestValidationError) -> JSONResponse:
        return JSONResponse({"error": request_errors(list(err.errors()))}, status_code=400)

    @app.exception_handler(Refused)
    async def _refused(_request: Request, err: Refused) -> JSONResponse:
        return JSONResponse({"error": str(err), "refused": True}, status_code=err.status)

    @app.exception_handler(Busy)
    async def _busy(_request: Request, err: Busy) -> JSONResponse:
        return JSONResponse({"error": str(err), "busy": True}, status_code=503, headers={"Retry-After": "5"})

    @app.exception_handler(Gone)
    async def _gone(_request: Request, err: Gone) -> JSONResponse:  # nobody reads it: the page aborted the request
        return JSONResponse({"error": str(err), "gone": True}, status_code=499)

    # every POST is checked before its body is read: a refused request does no work at all (a plain ASGI middleware:
    # Starlette's BaseHTTPMiddleware would hide a client's disconnect from the endpoints, which act on it)
    app.add_middleware(PostGuard, token=token)
    if token is None:  # loopback only: refuse a Host that is not this machine (DNS rebinding; webapp_guard)
        app.add_middleware(HostGuard)


def _plan(body: PlanRequest, data_dir: Path | None, stopped: Any) -> dict[str, Any]:
    """``/api/plan``'s answer: the names checked against the rule for local files, then the plan (Gone once
    ``stopped()``)."""
    from kvledger.report.webapp_inputs import check_web_gpu, check_web_model

    model, gpu = check_web_model(body.model, data_dir), check_web_gpu(body.gpu, data_dir)
    check_web_kv_dtype(body.kv_cache_dtype, body.engine, body.engine_version)  # the engine's own names, as the CLI's
    return plan_payload(model, gpu, body.engine, body.tp, body.max_model_len or None, body.kv_cache_dtype,
                        body.gpu_memory_utilization, body.wddm, body.engine_version, body.max_num_seqs,
                        body.quantization, stopped=stopped, kv_offloading_size=body.kv_offloading_size,
                        more=body.model_dump(include={"mem_fraction_static", *PARALLEL_FIELDS}))


def _serving(body: ServingRequest, data_dir: Path | None, stopped: Any) -> dict[str, Any]:
    """``/api/serving``'s answer: the names checked, then capacity and cost (Gone once ``stopped()``)."""
    from kvledger.errors import InputError
    from kvledger.report import webapp_inputs as wi

    model, gpu = wi.check_web_model(body.model, data_dir), wi.check_web_gpu(body.gpu, data_dir)
    check_web_kv_dtype(body.kv_cache_dtype, body.engine, body.engine_version)
    synthetic = body.prompt_lengths is not None or body.output_lengths is not None
    if synthetic and "trace" in body.model_fields_set:  # as report and cost refuse --trace with them
        raise InputError("give either --trace or a synthetic workload (--prompt-lengths/--output-lengths), not both")
    trace = body.trace if synthetic else wi.check_web_trace(body.trace, data_dir)  # with lengths, no trace is read
    workload = body.model_dump(include=set(WORKLOAD_FIELDS))
    for key in ("prompt_lengths", "output_lengths"):  # a trace:NAME:… form reads a trace: held to the trace rule
        workload[key] = wi.check_web_lengths(workload.get(key), data_dir)
    workload["document_pool"] = wi.check_web_pool(workload.get("document_pool"), data_dir)  # its lengths: the same
    return serving_payload(model, gpu, body.slo, body.api, trace, body.tp, body.max_model_len or None,
                           body.kv_cache_dtype, body.utilization, body.num_requests, body.monthly_tokens,
                           body.wddm, body.client_latency, body.engine, stopped=stopped,
                           traffic=body.model_dump(include=set(TRAFFIC_FIELDS)),
                           workload=workload, settings=body.model_dump(include=set(ENGINE_FIELDS)),
                           kv_offloading_size=body.kv_offloading_size,
                           parallel=body.model_dump(include=set(PARALLEL_FIELDS)))


def create_app(data_dir: Path | None = None, token: str | None = None):
    """The FastAPI application: ``/`` (the page), ``/api/choices`` and ``/api/kv_cache_dtypes`` by GET; ``/api/plan``
    and ``/api/serving`` by a JSON POST from the page only, through bounded work queues (``webapp_guard``). Each answer
    carries ``request``: the inputs it answers and the page's ``request_id``, so the page paints only the latest.

    Requests name bundled models, catalog GPUs and bundled traces; local files only inside ``data_dir``
    (``kvledger.report.webapp_inputs``: the rule and why). With ``token`` every request must carry it.
    """
    import json

    from fastapi import FastAPI
    from fastapi.responses import HTMLResponse

    from kvledger.report.jsonout import strict_json
    from kvledger.report.webapp_guard import Refused, WorkQueue, run_while_wanted
    from kvledger.report.webapp_page import PAGE

    app = FastAPI(title="kvledger", docs_url=None, redoc_url=None, openapi_url=None)
    queues = {"plan": WorkQueue("plan", running=2, waiting=8), "serving": WorkQueue("serving", running=1, waiting=2)}

    def _json(data: Any) -> Any:
        from fastapi.responses import Response

        return Response(strict_json(data), media_type="application/json")

    _add_error_handlers(app, token)

    @app.get("/", response_class=HTMLResponse)
    def page(request: Request) -> Any:
        if token is not None and not hmac.compare_digest(request.query_params.get("token", ""), token):
            return HTMLResponse("this kvledger server needs its token: open the URL `kvledger ui` printed", 403)
        return PAGE.replace("__KVLEDGER_TOKEN__", json.dumps(token or "")).replace(
            "__SERVING_NUM_REQUESTS__", str(SERVING_NUM_REQUESTS))

    @app.get("/api/choices")
    def api_choices(request: Request) -> Any:
        if token is not None and not hmac.compare_digest(request.headers.get("x-kvledger-token") or "", token):
            raise Refused(403, "this server needs its token: open the URL `kvledger ui` printed")
        return _json(choices(data_dir))
    add_kv_dtypes_route(app, token, _json)  # the engine's choices at the version typed: the form refills its list

    # async: a request still in line whose client has gone (the page aborted it for a newer one) leaves the line, and
    # a running simulation stops at its next stage (webapp_guard), so abandoned work does not make the latest busy
    @app.post("/api/plan")
    async def api_plan(body: PlanRequest, request: Request) -> Any:
        async with queues["plan"].wanted_slot(request.is_disconnected):
            return await run_while_wanted(request.is_disconnected,  # the JSON too is written in the worker thread
                                          lambda stopped: _json({"request": body.model_dump(),
                                                                 **_plan(body, data_dir, stopped)}))

    @app.post("/api/serving")
    async def api_serving(body: ServingRequest, request: Request) -> Any:
        async with queues["serving"].wanted_slot(request.is_disconnected):
            return await run_while_wanted(request.is_disconnected,
                                          lambda stopped: _json({"request": body.model_dump(),
                                                                 **_serving(body, data_dir, stopped)}))

    return app
