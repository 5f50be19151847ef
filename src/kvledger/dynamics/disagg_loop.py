"""The event loop of a disaggregated deployment (disagg.py): arrivals to the prefill pool, first tokens to the KV
link, transferred requests to the decode pool, each replica stepped in clock order (disagg.py's module doc)."""

from __future__ import annotations

import heapq
import math
from dataclasses import replace

import numpy as np

from kvledger.dynamics.engine.kv_transfer import KVTransfer
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.dynamics.engine.request_state import SimRequest, rejected_record
from kvledger.dynamics.replica import Replica
from kvledger.records import RequestRecord

__all__ = ["DisaggLoop"]


class DisaggLoop:
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
            t_arr = specs[self.i].arrival_s if self.i < n else math.inf
            t_dec = self.heap[0][0] if self.heap else math.inf
            rep, bound, is_prefill = self._pick(t_arr, t_dec)
            if rep is not None:
                done = rep.run_unit(bound, True)
                if done:
                    self._prefilled(rep.index, done) if is_prefill else self._decoded(done)
            elif t_dec <= t_arr and t_dec < math.inf:
                self._deliver_decode()
            elif t_arr < math.inf:
                self._deliver_prefill()
            else:
                return

    def _pick(self, t_arr: float, t_dec: float) -> tuple[Replica | None, float, bool]:
        """The busy replica with the earliest clock that may step (prefill first on ties), its bound, its side."""
        best, best_t, bound, is_prefill = None, math.inf, math.inf, True
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
            times = (np.concatenate(([prec.first_token_s], rec.chunk_times_s)) if self.from_prefill
                     else rec.chunk_times_s)
            self.out.append((uid, RequestRecord(
                spec.request_id, spec.arrival_s, spec.num_prompt_tokens, spec.num_output_tokens,
                first_token_s=float(times[0]), finish_s=float(times[-1]), chunk_times_s=times,
                num_cached_tokens=prec.num_cached_tokens, num_preemptions=prec.num_preemptions + rec.num_preemptions)))
