"""A prefill/decode-disaggregated deployment: prefill replicas that stop at the first token, decode replicas that take
over after the KV transfer, one record per request.

Each side is a pool of ordinary ``Replica`` engines (their own block pools and settings)::

    arrival ─► prefill replica: queue, prompt chunks, first token sampled at t₁ ─► blocks freed
               link of that prefill replica: [wait for the link][P × bytes/token ÷ one-way B/s] + latency
    ready  ─► decode replica: admitted with the prompt KV already computed, one token per step to the end

Time discipline (conservative, as cluster.py): trace arrivals reach the prefill pool once every
busy prefill replica's clock has reached them; a transferred request reaches the decode pool at
its ready time, once every busy decode replica is there. A decode replica only runs steps that
start before the earliest time a transfer could still land (the next known ready time, and any
busy prefill replica's clock or the next arrival, plus the fixed latency), so no admission is
ever missed. Deterministic: no wall clock, no RNG.

Where the first token comes from is a choice (``FIRST_TOKEN_SOURCES``): DistServe returns it from
the prefill instance; vLLM's example proxy sends the prefill instance ``max_tokens=1``, discards
its output and streams every token from the decode instance (which computes the last prompt
token again). Simplifications, stated: prefill blocks are freed at the first token (a real
connector holds them until the decode side has read them, a few ms); the decode side's blocks
are taken at admission after the transfer (vLLM takes them before, while it pulls the KV); links
are modelled per prefill replica (the receiving link is not a queue).
"""

from __future__ import annotations

import gc
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from kvledger.accounting.step_split import gpu_time_split
from kvledger.accounting.stepcost import StepCostModel
from kvledger.dynamics.disagg_loop import DisaggLoop
from kvledger.dynamics.engine.config import EngineConfig
from kvledger.dynamics.engine.kv_transfer import KVTransfer, received_kv_manager
from kvledger.dynamics.engine.request import ARRIVAL_RULE, MAX_ARRIVAL_S, RequestSpec
from kvledger.dynamics.engine.router import make_router
from kvledger.dynamics.outputs.metrics import DEFINITIONS, Summary, latency_stats, summarize_records
from kvledger.dynamics.replica import Replica
from kvledger.errors import InputError, UnknownNameError
from kvledger.jsonable import to_jsonable
from kvledger.records import RunMetadata, RunRecords

__all__ = ["FIRST_TOKEN_SOURCES", "Pool", "DisaggResult", "simulate_disagg"]

FIRST_TOKEN_SOURCES = {
    "prefill": "the prefill replica samples and returns the first token; the decode replica continues from the second "
               "(DistServe, Zhong et al. OSDI 2024 §3)",
    "decode": "the prefill replica's token is discarded; the decode replica recomputes the last prompt token and "
              "streams "
              "every token (vLLM's example disaggregation proxy: max_tokens=1 on the prefill instance)",
}


@dataclass(frozen=True)
class Pool:
    """One side of a disaggregated deployment: identical replicas behind a router.

    Attributes:
        config: one replica's engine settings.
        cost: its step-cost model (priced at its own TP).
        num_replicas: replicas, count (≥ 1).
        gpus_per_replica: GPUs per replica (its TP × PP), count; only for GPU counts and goodput per GPU.
        router: key of ``kvledger.dynamics.engine.router.ROUTERS``.
    """

    config: EngineConfig
    cost: StepCostModel
    num_replicas: int = 1
    gpus_per_replica: int = 1
    router: str = "round_robin"

    def __post_init__(self) -> None:
        for name in ("num_replicas", "gpus_per_replica"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InputError(f"pool {name} must be an integer ≥ 1, got {v!r}")

    @property
    def num_gpus(self) -> int:
        """GPUs in the pool, count."""
        return self.num_replicas * self.gpus_per_replica


@dataclass
class DisaggResult:
    """What one disaggregated simulation produced.

    Attributes:
        records: one RequestRecord per request, in arrival order: arrival, first token (prefill or decode side,
            per ``first_token``), every token time, finish — the same type a colocated run or a benchmark gives.
        summary: the run's latency distributions and throughput (``kvledger.dynamics.outputs.metrics``).
        transfer: KV-transfer figures per transferred request, s and B (LatencyStats dicts).
        pools: per pool: replicas, GPUs, preemptions, steps, KV usage, settings.
        config: the deployment as a dict.
    """

    __json__ = ("summary", "transfer", "pools", "config", "**extra", "records")
    records: RunRecords
    summary: Summary
    transfer: dict[str, Any]
    pools: dict[str, Any]
    config: dict[str, Any]
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self, include_records: bool = True) -> dict[str, Any]:
        return to_jsonable(self, exclude=() if include_records else ("records",))


def simulate_disagg(requests: list[RequestSpec], prefill: Pool, decode: Pool, transfer: KVTransfer, *,
                    first_token: str = "prefill", fast_forward: bool = True, model: str | None = None,
                    hardware: str | None = None) -> DisaggResult:
    """Serve ``requests`` (open loop) on a prefill pool and a decode pool joined by ``transfer``.

    Args:
        requests: request specs (any order; sorted by arrival, ties kept in order).
        prefill: the prefill pool (prefix caching as its config says).
        decode: the decode pool; its prefix caching is turned off (the whole prompt KV is transferred).
        transfer: link and KV bytes (``kv_transfer.transfer_from_plans``).
        first_token: key of ``FIRST_TOKEN_SOURCES``.
        fast_forward: steady-decode shortcuts (off only to cross-check them).
        model, hardware: names recorded in the run metadata.

    Raises:
        InputError: a malformed request (named by its id); UnknownNameError: unknown first-token source or router.
    """
    if first_token not in FIRST_TOKEN_SOURCES:
        raise UnknownNameError("first-token source", first_token, FIRST_TOKEN_SOURCES,
                               hint=f"Known: {', '.join(FIRST_TOKEN_SOURCES)}.")
    dcfg = replace(decode.config, enable_prefix_caching=False) if decode.config.enable_prefix_caching else decode.config
    pre = [Replica(prefill.config, prefill.cost, i, fast_forward=fast_forward) for i in range(prefill.num_replicas)]
    dec = [Replica(dcfg, decode.cost, i, fast_forward=fast_forward, kv_manager=received_kv_manager(dcfg))
           for i in range(decode.num_replicas)]
    loop = DisaggLoop(_sorted_checked(requests), pre, dec, make_router(prefill.router), make_router(decode.router),
                 transfer, first_token)
    gc_was_enabled = gc.isenabled()
    gc.disable()  # many small objects, no cycles (as engine.simulate)
    try:
        loop.run()
    finally:
        if gc_was_enabled:
            gc.enable()
    return _result(loop, prefill, replace(decode, config=dcfg), transfer, model, hardware)


def _sorted_checked(requests: list[RequestSpec]) -> list[RequestSpec]:
    specs = list(requests)
    for s in specs:
        bad = None
        if not (isinstance(s.num_prompt_tokens, int) and s.num_prompt_tokens >= 1):
            bad = f"num_prompt_tokens must be an integer ≥ 1, got {s.num_prompt_tokens!r}"
        elif not (isinstance(s.num_output_tokens, int) and s.num_output_tokens >= 1):
            bad = f"num_output_tokens must be an integer ≥ 1, got {s.num_output_tokens!r}"
        elif not (0.0 <= s.arrival_s <= MAX_ARRIVAL_S):
            bad = f"{ARRIVAL_RULE}, got {s.arrival_s!r}"
        if bad:
            raise InputError(f"request {s.request_id!r}: {bad}")
    return sorted(specs, key=lambda s: s.arrival_s)


def _result(loop: DisaggLoop, prefill: Pool, decode: Pool, transfer: KVTransfer, model: str | None,
            hardware: str | None) -> DisaggResult:
    loop.out.sort(key=lambda x: x[0])
    cfg = {"deployment": "disaggregated", "first_token": "prefill" if loop.from_prefill else "decode",
           "prefill": _pool_dict(prefill), "decode": _pool_dict(decode), "transfer": transfer.to_dict()}
    meta = RunMetadata(source="simulator", source_format="simulator", model=model, hardware=hardware,
                       num_gpus=prefill.num_gpus + decode.num_gpus, definitions=list(DEFINITIONS), extra=dict(cfg))
    meta.extra["gpu_time_split"] = gpu_time_split([(r.prefill_time.total_s, r.usage.busy_s,
                                                    pool.gpus_per_replica) for reps, pool in
                                                   ((loop.pre, prefill), (loop.dec, decode)) for r in reps],
                                                       cfg["prefill"]["cost_model"])
    run = RunRecords([rec for _, rec in loop.out], meta)
    dur = run.duration_s
    pools = {"prefill": _pool_figures(loop.pre, prefill, dur), "decode": _pool_figures(loop.dec, decode, dur)}
    q = sum(r.kv.prefix_stats.queries for r in loop.pre)
    h = sum(r.kv.prefix_stats.hits for r in loop.pre)
    notes = [f"disaggregated: {prefill.num_replicas} prefill + {decode.num_replicas} decode replicas; first token: "
             f"{FIRST_TOKEN_SOURCES[cfg['first_token']]}",
             "KV transfer per request = wait for the prefill replica's link + per-GPU KV bytes ÷ one-way bandwidth + "
             "fixed latency (kvledger.dynamics.engine.kv_transfer)",
             "prefix_cache_hit_rate: prefill pool only (the decode pool receives whole prompts, caching off)"]
    summary = Summary.of(summarize_records(run), num_preemptions=pools["prefill"]["num_preemptions"] +
                      pools["decode"]["num_preemptions"], prefix_cache_hit_rate=h / q if q else 0.0,
                      prefix_cache_hit_tokens=h, prefix_cache_query_tokens=q,
                      kv_usage={k: v["kv_usage"] for k, v in pools.items()},
                      num_steps=pools["prefill"]["num_steps"] + pools["decode"]["num_steps"],
                      gpu_time_split=meta.extra["gpu_time_split"], definitions=list(DEFINITIONS) + notes)
    return DisaggResult(run, summary, _transfer_figures(loop.xfer), pools, cfg)


def _pool_dict(p: Pool) -> dict[str, Any]:
    return {"num_replicas": p.num_replicas, "gpus_per_replica": p.gpus_per_replica, "num_gpus": p.num_gpus,
            "router": p.router, "cost_model": getattr(p.cost, "name", type(p.cost).__name__),
                "engine": p.config.to_dict()}


def _pool_figures(reps: list[Replica], pool: Pool, duration_s: float) -> dict[str, Any]:
    usages = [r.usage.summary(duration_s) for r in reps]
    return {"num_replicas": pool.num_replicas, "num_gpus": pool.num_gpus,
            "num_preemptions": sum(r.num_preemptions for r in reps), "num_steps": sum(r.num_steps for r in reps),
            "kv_usage": {"mean": sum(u["mean"] for u in usages) / len(usages), "max": max(u["max"] for u in usages)}}


def _transfer_figures(xfer: dict[int, tuple[float, float, float, float]]) -> dict[str, Any]:
    """KV-transfer distributions over transferred requests, s, and their bytes per GPU, B."""
    vals = np.array(list(xfer.values()), dtype=np.float64).reshape(-1, 4)
    return {"num_transfers": int(vals.shape[0]), "transfer_s": latency_stats(vals[:, 0]).to_dict(),
            "wire_s": latency_stats(vals[:, 1]).to_dict(), "link_wait_s": latency_stats(vals[:, 2]).to_dict(),
            "bytes_per_gpu_mean": float(vals[:, 3].mean()) if vals.shape[0] else 0.0,
            "definition": "transfer_s = ready at the decode pool − first token on the prefill side (link wait + wire + "
                          "latency); wire_s = per-GPU KV bytes ÷ one-way link bandwidth"}
