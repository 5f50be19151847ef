"""A prefill/decode-disaggregated deployment: prefill replicas that stop at the first token, decode replicas that take over after the KV transfer, one record per request.

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
import heapq
import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from kvledger.accounting.step_split import gpu_time_split
from kvledger.accounting.stepcost import StepCostModel
from kvledger.dynamics.engine.config import EngineConfig
from kvledger.dynamics.engine.kv_transfer import KVTransfer, received_kv_manager
from kvledger.dynamics.engine.request import ARRIVAL_RULE, MAX_ARRIVAL_S, RequestSpec
from kvledger.dynamics.engine.request_state import SimRequest, rejected_record
from kvledger.dynamics.engine.router import make_router
from kvledger.dynamics.outputs.metrics import DEFINITIONS, Summary, latency_stats, summarize_records
from kvledger.dynamics.replica import Replica
from kvledger.errors import InputError, UnknownNameError
from kvledger.records import RequestRecord, RunMetadata, RunRecords

__all__ = ["FIRST_TOKEN_SOURCES", "Pool", "DisaggResult", "simulate_disagg"]

_INF = math.inf

FIRST_TOKEN_SOURCES = {
    "prefill": "the prefill replica samples and returns the first token; the decode replica continues from the second "
               "(DistServe, Zhong et al. OSDI 2024 §3)",
    "decode": "the prefill replica's token is discarded; the decode replica recomputes the last prompt token and streams "
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

    records: RunRecords
    summary: Summary
    transfer: dict[str, Any]
    pools: dict[str, Any]
    config: dict[str, Any]
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self, include_records: bool = True) -> dict[str, Any]:
        d = {"summary": self.summary.to_dict(), "transfer": self.transfer, "pools": self.pools, "config": self.config,
             **self.extra}
        if include_records:
            d["records"] = self.records.to_dict()
        return d


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
    loop = _Loop(_sorted_checked(requests), pre, dec, make_router(prefill.router), make_router(decode.router),
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


class _Loop:
    """The event loop over both pools (see the module doc for its time discipline)."""

    def __init__(self, specs: list[RequestSpec], pre: list[Replica], dec: list[Replica], route_p, route_d,
                 transfer: KVTransfer, first_token: str) -> None:
        self.specs, self.pre, self.dec = specs, pre, dec
        self.route_p, self.route_d, self.transfer = route_p, route_d, transfer
        self.from_prefill = first_token == "prefill"
        self.i = 0
        self.heap: list[tuple[float, int, int]] = []  # (ready_s, seq, uid) of transfers in flight
        self.seq = 0
        self.link_free_s = [0.0] * len(pre)
        self.prefill_rec: dict[int, RequestRecord] = {}
        self.xfer: dict[int, tuple[float, float, float, float]] = {}  # uid → (total_s, wire_s, link_wait_s, bytes)
        self.out: list[tuple[int, RequestRecord]] = []

    def run(self) -> None:
        specs, n = self.specs, len(self.specs)
        while True:
            t_arr = specs[self.i].arrival_s if self.i < n else _INF
            t_dec = self.heap[0][0] if self.heap else _INF
            rep, bound, is_prefill = self._pick(t_arr, t_dec)
            if rep is not None:
                done = rep.run_unit(bound, True)
                if done:
                    self._prefilled(rep.index, done) if is_prefill else self._decoded(done)
            elif t_dec <= t_arr and t_dec < _INF:
                self._deliver_decode()
            elif t_arr < _INF:
                self._deliver_prefill()
            else:
                return

    def _pick(self, t_arr: float, t_dec: float) -> tuple[Replica | None, float, bool]:
        """The busy replica with the earliest clock that may step (prefill first on ties), its bound, its side."""
        best, best_t, bound, is_prefill = None, _INF, _INF, True
        earliest = t_arr  # no transfer can start before a busy prefill replica's clock or the next arrival
        for r in self.pre:
            if r.has_work:
                now = r.now_s
                if now < earliest:
                    earliest = now
                if now < t_arr and now < best_t:
                    best, best_t, bound = r, now, t_arr
        bound_d = min(t_dec, earliest + self.transfer.link.latency_s)
        for r in self.dec:
            if r.has_work and r.now_s < bound_d and r.now_s < best_t:
                best, best_t, bound, is_prefill = r, r.now_s, bound_d, False
        return best, bound, is_prefill

    def _deliver_prefill(self) -> None:
        uid, spec = self.i, self.specs[self.i]
        self.i += 1
        p_len, d_len = self.pre[0].cfg.max_model_len, self.dec[0].cfg.max_model_len
        if spec.num_prompt_tokens + 1 > p_len or spec.num_prompt_tokens + spec.num_output_tokens > d_len:
            self.out.append((uid, rejected_record(spec, p_len if spec.num_prompt_tokens + 1 > p_len else d_len)))
            return
        req = SimRequest(uid, replace(spec, num_output_tokens=1))
        self.pre[0 if len(self.pre) == 1 else self.route_p(self.pre, req)].add(req)

    def _prefilled(self, p_index: int, done: list[tuple[SimRequest, RequestRecord]]) -> None:
        tr = self.transfer
        for req, rec in done:
            uid = req.uid
            spec = self.specs[uid]
            if self.from_prefill and spec.num_output_tokens == 1:
                self.out.append((uid, rec))  # nothing left to decode
                continue
            t1 = rec.first_token_s
            nbytes = tr.bytes_for(spec.num_prompt_tokens)
            wire = nbytes / tr.link.bytes_per_s
            start = max(t1, self.link_free_s[p_index]) if tr.serialize else t1
            if tr.serialize:
                self.link_free_s[p_index] = start + wire
            ready = start + wire + tr.link.latency_s
            self.prefill_rec[uid] = rec
            self.xfer[uid] = (ready - t1, wire, start - t1, nbytes)
            heapq.heappush(self.heap, (ready, self.seq, uid))
            self.seq += 1

    def _deliver_decode(self) -> None:
        ready, _, uid = heapq.heappop(self.heap)
        spec = self.specs[uid]
        req = SimRequest(uid, replace(spec, arrival_s=ready))
        if self.from_prefill:  # the first token exists: prompt + 1 known tokens, all but the newest computed
            req.num_generated = 1
            req.num_tokens = spec.num_prompt_tokens + 1
        rep = self.dec[0 if len(self.dec) == 1 else self.route_d(self.dec, req)]
        rep.kv.incoming.add(uid)
        rep.add(req)

    def _decoded(self, done: list[tuple[SimRequest, RequestRecord]]) -> None:
        for req, rec in done:
            uid = req.uid
            spec, prec = self.specs[uid], self.prefill_rec.pop(uid)
            times = np.concatenate(([prec.first_token_s], rec.chunk_times_s)) if self.from_prefill else rec.chunk_times_s
            self.out.append((uid, RequestRecord(
                spec.request_id, spec.arrival_s, spec.num_prompt_tokens, spec.num_output_tokens,
                first_token_s=float(times[0]), finish_s=float(times[-1]), chunk_times_s=times,
                num_cached_tokens=prec.num_cached_tokens, num_preemptions=prec.num_preemptions + rec.num_preemptions)))


def _result(loop: _Loop, prefill: Pool, decode: Pool, transfer: KVTransfer, model: str | None,
            hardware: str | None) -> DisaggResult:
    loop.out.sort(key=lambda x: x[0])
    cfg = {"deployment": "disaggregated", "first_token": "prefill" if loop.from_prefill else "decode",
           "prefill": _pool_dict(prefill), "decode": _pool_dict(decode), "transfer": transfer.to_dict()}
    meta = RunMetadata(source="simulator", source_format="simulator", model=model, hardware=hardware,
                       num_gpus=prefill.num_gpus + decode.num_gpus, definitions=list(DEFINITIONS), extra=dict(cfg))
    meta.extra["gpu_time_split"] = gpu_time_split([(r.prefill_time.total_s, r.usage.busy_s, pool.gpus_per_replica) for reps, pool in
                                                   ((loop.pre, prefill), (loop.dec, decode)) for r in reps], cfg["prefill"]["cost_model"])
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
    summary = Summary(**summarize_records(run), num_preemptions=pools["prefill"]["num_preemptions"] +
                      pools["decode"]["num_preemptions"], prefix_cache_hit_rate=h / q if q else 0.0,
                      prefix_cache_hit_tokens=h, prefix_cache_query_tokens=q,
                      kv_usage={k: v["kv_usage"] for k, v in pools.items()},
                      num_steps=pools["prefill"]["num_steps"] + pools["decode"]["num_steps"],
                      gpu_time_split=meta.extra["gpu_time_split"], definitions=list(DEFINITIONS) + notes)
    return DisaggResult(run, summary, _transfer_figures(loop.xfer), pools, cfg)


def _pool_dict(p: Pool) -> dict[str, Any]:
    return {"num_replicas": p.num_replicas, "gpus_per_replica": p.gpus_per_replica, "num_gpus": p.num_gpus,
            "router": p.router, "cost_model": getattr(p.cost, "name", type(p.cost).__name__), "engine": p.config.to_dict()}


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
