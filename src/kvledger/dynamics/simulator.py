"""The simulator's entry point: ``simulate(workload, config, cost) -> SimResult`` for one or several replicas of a
vLLM-like engine.

A pure-Python discrete-event simulation of vLLM v1's scheduler (scheduler.py; async
scheduling in replica.py) or SGLang's (sglang_scheduler.py), block pool and prefix caching
(block_pool.py, kv_manager.py) or SGLang's radix cache (radix_cache.py), priced step by step
by a ``StepCostModel``. Deterministic: the same
inputs give byte-identical output; there is no wall-clock time and no hidden RNG.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from kvledger.accounting.step_split import gpu_time_split
from kvledger.accounting.stepcost import StepCostModel
from kvledger.dynamics.cluster import run_cluster
from kvledger.dynamics.early_stop import MissRule
from kvledger.dynamics.engine.config import EngineConfig
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.dynamics.engine.reservation_fit import check_static_fit
from kvledger.dynamics.engine.router import make_router
from kvledger.dynamics.outputs.itl_gaps import SKETCH_NOTE, merged_stats
from kvledger.dynamics.outputs.metrics import DEFINITIONS, Summary, summarize_records
from kvledger.dynamics.outputs.steplog import StepLog, chrome_trace
from kvledger.dynamics.pipeline import PipelineReplica, pipeline_facts, run_pipeline
from kvledger.dynamics.pipeline_v2 import StaggeredReplica
from kvledger.dynamics.replica import Replica
from kvledger.dynamics.workload.closed_loop import ClosedLoop
from kvledger.dynamics.workload.columns import WorkloadColumns
from kvledger.errors import InputError
from kvledger.jsonable import to_jsonable
from kvledger.record_columns import run_from_columns
from kvledger.records import RunMetadata, RunRecords

__all__ = ["EngineConfig", "SimResult", "simulate"]


@dataclass
class SimResult:
    """Everything one simulation produced.

    Attributes:
        records: one RequestRecord per request in arrival order (metadata.source = "simulator").
        summary: TTFT/ITL/TPOT/E2E distributions, throughput, KV usage, preemptions, prefix-cache hit rate.
        config: the engine settings, as a dict.
        steps: per-replica step logs (only with ``record_steps=True``), else None.
    """

    __json__ = ("summary", "config", "**extra", "records")
    records: RunRecords
    summary: Summary
    config: dict[str, Any]
    steps: list[StepLog] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: per replica, its peak running batch and first preemption (``BatchPeak.batch_facts``); not in the JSON
    batch: list[dict[str, Any]] = field(default_factory=list)
    #: DP ranks in lock-step: the rank each record was routed to (-1: none, refused first); not in the JSON
    dp_ranks: list[int] | None = None

    def to_dict(self, include_records: bool = True) -> dict[str, Any]:
        return to_jsonable(self, exclude=() if include_records else ("records",))

    def write_steps_jsonl(self, fh) -> None:
        """One JSON object per step and replica (needs ``record_steps=True``)."""
        if self.steps is None:
            raise InputError("no step log: run simulate(..., record_steps=True)")
        for log in self.steps:
            log.write_jsonl(fh)

    def chrome_trace(self) -> dict[str, Any]:
        """The run as a chrome://tracing JSON object (needs ``record_steps=True``)."""
        if self.steps is None:
            raise InputError("no step log: run simulate(..., record_steps=True)")
        return chrome_trace(self.steps, self.records.records)


def _lengths(requests: Any) -> tuple[Any, Any] | None:
    """(prompt tokens, output tokens) of every request when they are known before the run (a list of specs, columns, a
    closed loop's list); None otherwise (sessions, a generator: reading it would use it up)."""
    if isinstance(requests, ClosedLoop):
        requests = requests.requests
    if isinstance(requests, WorkloadColumns):
        return requests.num_prompt_tokens, requests.num_output_tokens
    if isinstance(requests, (list, tuple)):
        return [r.num_prompt_tokens for r in requests], [r.num_output_tokens for r in requests]
    return None


def _refuse_repeated_ids(requests: Any) -> None:
    """InputError when a list of requests (or a closed loop's) names one id twice: records, goodput and prefix routing
    key on the id. A generator is not read ahead (it would be used up)."""
    reqs = requests.requests if isinstance(requests, ClosedLoop) else requests
    if isinstance(reqs, (list, tuple)):
        seen: set = set()
        for r in reqs:
            if r.request_id in seen:
                raise InputError(f"request id {r.request_id!r} is given twice: each request needs its own id")
            seen.add(r.request_id)


def simulate(requests: Iterable[RequestSpec] | ClosedLoop, config: EngineConfig, cost: StepCostModel, *,
             record_steps: bool = False, progress: Callable[[int, int], None] | None = None,
             num_replicas: int = 1, router: str = "round_robin", fast_forward: bool = True,
             model: str | None = None, hardware: str | None = None, record_token_times: bool = True,
             records_as_columns: bool = True, stop: MissRule | None = None,
             kv_manager_factory: Callable[[EngineConfig, int], Any] | None = None,
             data_parallel_rule: str | None = None) -> SimResult:
    """Serve ``requests`` (an open-loop list, or a ``ClosedLoop``) on ``num_replicas`` engines.

    Args:
        requests: request specs (any order; sorted by arrival, ties kept in order), a ``WorkloadColumns``
            (workload_columns.py: the same as columns) or a ClosedLoop.
        config: one replica's engine settings.
        cost: prices each step (FixedStepCost, RooflineStepCost, a calibrated model).
        record_steps: keep the per-step log (for JSONL / Chrome-trace export; slower).
        progress: called as ``progress(done, total)`` now and then.
        num_replicas: identical replicas behind the router, count.
        router: key of ``kvledger.dynamics.engine.router.ROUTERS``.
        fast_forward: jump over steady pure-decode stretches (off only to cross-check).
        model, hardware: names recorded in the run metadata.
        record_token_times: keep every token time in the records (``chunk_times_s``; per-request
            ITL statistics need them). Off, records keep first-token and finish times only and
            the summary's ITL distribution comes from exact step-gap counts (itl_gaps.py):
            memory then follows the active requests, not the tokens produced.
        records_as_columns: without token times, an open-loop run keeps its records as columns
            (record_sink.py; ``records.records`` then builds each RequestRecord on access, the same
            values): about 40 bytes per finished request instead of a RequestRecord object. False
            keeps a list of RequestRecords (the records and summary are identical either way).
        stop: an open-loop run ends once this rule proves it misses its attainment target
            (early_stop.py); requests unfinished by then get error records, and ``extra["stopped_early"]``
            says when and why. None: run to the end.
        kv_manager_factory: builds replica ``i``'s KV manager from the settings (a KV tier below HBM,
            offload_sim.py); None → the one the settings select.
        data_parallel_rule: DP ranks in lock-step, routed by this vLLM release's rule or SGLang's round robin
            ("sglang round_robin": dp_lockstep.make_balancer); ``cost``: a ``LockstepStepCost``.

    The garbage collector is off for the run, process-wide (``gc.disable``); back on at its end or failure if it was on.

    Raises:
        InputError: bad settings or a malformed request (named by its id); a request id given twice (a list)."""
    _check_inputs(requests, config, num_replicas)
    dp, rank_cost = (cost.dp, cost.inner) if data_parallel_rule else (1, cost)
    replicas = _replicas(config, cost, rank_cost, num_replicas * dp, kv_manager_factory, stop, data_parallel_rule,
                         record_steps, record_token_times, fast_forward and dp == 1)
    gc_was_enabled = gc.isenabled()
    gc.disable()  # the run makes millions of small objects but no garbage cycles; collections only cost time
    try:
        recs, dp = _serve(requests, replicas, cost, data_parallel_rule, router, progress, records_as_columns, stop)
        res = _with_dp(_result(requests, config, rank_cost, replicas, recs, record_steps, num_replicas, router, model,
                               hardware), dp)
        res.extra.update(pipeline_facts(replicas[0]))  # {} but for the pipelined engine
        if stop is not None and stop.stopped_at_s is not None:
            res.extra["stopped_early"] = stop.evidence()
            res.records.metadata.extra["stopped_early"] = stop.evidence()
        return res
    finally:
        if gc_was_enabled:
            gc.enable()


def _check_inputs(requests, config: EngineConfig, num_replicas: int) -> None:
    """Refuse repeated ids, a bad replica count and (static batching) a request it could never admit."""
    _refuse_repeated_ids(requests)
    if isinstance(num_replicas, bool) or not isinstance(num_replicas, int) or num_replicas < 1:
        raise InputError(f"num_replicas must be an integer ≥ 1, got {num_replicas!r}")
    if config.batching == "static":  # a request static batching could never admit: refused before the run
        check_static_fit(config, _lengths(requests))


def _serve(requests, replicas: list[Replica], cost, data_parallel_rule, router: str, progress, as_columns: bool,
           stop) -> tuple[list, tuple[dict[str, Any], list[int]] | None]:
    """(the records, the DP ranks' facts or None): DP ranks in lock-step, the pipelined engine or the cluster loop."""
    if data_parallel_rule:
        return _run_lockstep(requests, replicas, cost, data_parallel_rule, progress)
    if isinstance(replicas[0], PipelineReplica):
        return run_pipeline(requests, replicas[0], progress, stop), None
    return run_cluster(requests, replicas, make_router(router), progress, as_columns=as_columns, stop=stop), None


def _replicas(config: EngineConfig, cost, rank_cost, n: int, kv_manager_factory, stop, data_parallel_rule,
              record_steps: bool, record_token_times: bool, fast_forward: bool) -> list[Replica]:
    """The ``n`` engines; pipeline stages with batches overlapping (``cost.overlapping``: pipeline.py, or
    pipeline_v2.py with ``cost.staggered``, the V2 model runner's async loop) are one engine that serves from its GPU
    pool."""
    if not getattr(cost, "overlapping", False):
        return [Replica(config, rank_cost, i, record_steps=record_steps, fast_forward=fast_forward,
                        record_token_times=record_token_times,
                        kv_manager=kv_manager_factory and kv_manager_factory(config, i)) for i in range(n)]
    if n != 1 or kv_manager_factory is not None or data_parallel_rule:
        raise InputError("pipeline stages are simulated for one engine from its GPU KV pool: not with several "
                         "replicas, a KV tier or DP ranks")
    kind = StaggeredReplica if getattr(cost, "staggered", False) else PipelineReplica
    return [kind(config, cost, 0, record_steps=record_steps, record_token_times=record_token_times)]


def _with_dp(res: SimResult, dp: tuple[dict[str, Any], list[int]] | None) -> SimResult:
    """``res`` with the DP ranks' facts (``extra["data_parallel"]``) and each record's rank (``dp_ranks``), if any."""
    if dp is not None:
        res.extra["data_parallel"], res.dp_ranks = dp
    return res


def _run_lockstep(requests, ranks: list[Replica], cost, rule: str, progress) -> tuple[list, tuple[dict[str, Any],
                                                                                                  list[int]]]:
    """(the records, (the run's data-parallel facts, each record's rank: -1 where refused before routing)) of vLLM's
    DP ranks in lock-step (dp_lockstep.py); the records are in uid order, one per uid."""
    from kvledger.dynamics.dp_lockstep import make_balancer, run_lockstep

    balancer, rank_of = make_balancer(rule, len(ranks)), {}
    recs = run_lockstep(requests, ranks, balancer, cost.step_time_s, progress, rank_of)
    said = "SGLang 0.5.23 round_robin" if rule == "sglang round_robin" else f"vLLM {rule}"
    facts = {"data_parallel_size": len(ranks), "balancing_rule": said,
             "requests_routed_per_rank": list(balancer.routed)}
    return recs, (facts, [rank_of.get(uid, -1) for uid in range(len(recs))])


def _result(requests, config: EngineConfig, cost: StepCostModel, replicas: list[Replica], recs,
            record_steps: bool, num_replicas: int, router: str, model: str | None, hardware: str | None) -> SimResult:
    meta = RunMetadata(
        source="simulator", source_format="simulator", model=model, hardware=hardware, num_gpus=None,
        concurrency=requests.num_users if isinstance(requests, ClosedLoop) else None,
        definitions=list(DEFINITIONS),
        extra={"cost_model": getattr(cost, "name", type(cost).__name__), "num_replicas": num_replicas,
               "router": router if num_replicas > 1 else None, "engine": config.to_dict()})
    run = RunRecords(recs, meta) if isinstance(recs, list) else run_from_columns(recs, meta)
    figures, sketched = summarize_records(run, exact_itl_mean=True), False
    if replicas[0].gaps is not None:  # no token times kept: the exact step-gap counts give the ITL distribution
        for r in replicas:
            r.fold_gaps()
        itl, sketched = merged_stats([r.gaps for r in replicas])
        figures = replace(figures, itl_s=itl)
    notes = [SKETCH_NOTE] if sketched else []
    split = gpu_time_split([(r.prefill_time.total_s, r.usage.busy_s, 1) for r in replicas], meta.extra["cost_model"])
    meta.extra["gpu_time_split"] = split  # the cost ledger's prefill/decode split (ledgers/cost.py)
    summary = Summary.of(figures, **_engine_figures(replicas, run.duration_s), gpu_time_split=split,
                      definitions=list(DEFINITIONS) + _policy_notes(config) + notes)
    res = SimResult(run, summary, config.to_dict(), [r.steplog for r in replicas] if record_steps else None,
                    batch=[r.batch_facts() for r in replicas])
    if config.batching == "sglang":  # per replica, the running requests' time its prefill steps paused (replica.py)
        res.extra["sglang_paused_request_s"] = [r.paused_request_s for r in replicas]
    return res


def _engine_figures(replicas: list[Replica], duration_s: float) -> dict[str, Any]:
    q = sum(r.kv.prefix_stats.queries for r in replicas)
    h = sum(r.kv.prefix_stats.hits for r in replicas)
    usages = [r.usage.summary(duration_s) for r in replicas]
    if len(usages) == 1:
        kv = usages[0]
    else:
        held = sum(r.usage.held_token_s for r in replicas)
        kv = {"mean": sum(u["mean"] for u in usages) / len(usages), "max": max(u["max"] for u in usages),
              "token_state_share": sum(r.usage.stored_token_s for r in replicas) / held if held else 0.0,
              "per_replica": usages}
    return {"num_preemptions": sum(r.num_preemptions for r in replicas), "prefix_cache_hit_rate": h / q if q else 0.0,
            "prefix_cache_hit_tokens": h, "prefix_cache_query_tokens": q, "kv_usage": kv,
            "num_steps": sum(r.num_steps for r in replicas)}


def _policy_notes(cfg: EngineConfig) -> list[str]:
    rule = {"vllm_v0": "vLLM V0 prefill-first rule", "sglang": "SGLang's prefill-first scheduler (reservation "
                                                               "admission, "
            "retraction; managers/scheduler.py)", "static": "static batching"}.get(
        cfg.batching,
            "vLLM v1 scheduling rule" + (", async scheduling (batch queue of 2)" if cfg.async_scheduling else ""))
    notes = [f"engine: {rule}, batching={cfg.batching}, kv_allocation={cfg.kv_allocation}, "
             f"scheduling_policy={cfg.scheduling_policy}, prefix caching={cfg.caching_policy_in_effect}"]
    notes.append("prefix_cache_hit_rate = tokens served from the prefix cache / prompt tokens, at first admission "
                 "(vLLM PrefixCacheStats); re-admissions after preemption are not counted")
    notes.append("kv_usage = blocks held by requests / usable blocks (vLLM 'GPU KV cache usage'), time-weighted")
    return notes
