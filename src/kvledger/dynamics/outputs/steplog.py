"""Per-step outputs of the simulator: the optional step log with its JSONL and Chrome-trace exports (KV usage over
time: kv_usage.py)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import numpy as np

from kvledger.accounting.stepcost import StepShape
from kvledger.dynamics.outputs.kv_usage import MAX_USAGE_BUCKETS, KvUsageTracker
from kvledger.records import RequestRecord

__all__ = ["KvUsageTracker", "StepLog", "chrome_trace", "MAX_USAGE_BUCKETS"]  # the tracker lives in kv_usage.py

class StepLog:
    """Every step of one replica: time, batch composition, scheduled tokens, KV usage (only with ``record_steps``)."""

    def __init__(self, replica: int) -> None:
        self.replica = replica
        self.rows: list[tuple] = []

    def add(self, step: int, start: float, dur: float, shape: StepShape, usage: float, num_running: int,
            num_waiting: int, batch: list[tuple[str, int]]) -> None:
        self.rows.append((step, start, dur, shape.num_prefill_tokens, shape.num_prefill_seqs, shape.num_decode_seqs,
                          usage, num_running, num_waiting, batch))

    def add_stretch(self, step0: int, starts: np.ndarray, durs: np.ndarray, n: int, usage: np.ndarray,
                    num_running: int, num_waiting: int, batch: list[tuple[str, int]]) -> None:
        """A steady-decode stretch, one row per step (start, duration and KV usage of each step, as ``add`` takes
        them)."""
        for j, (t, d, u) in enumerate(zip(starts.tolist(), durs.tolist(), usage.tolist())):
            self.rows.append((step0 + j, t, d, 0, 0, n, u, num_running, num_waiting, batch))

    def dicts(self) -> Iterable[dict[str, Any]]:
        """One JSON-ready dict per step (units in the key names)."""
        for step, start, dur, pf_tok, pf_seqs, dec, usage, run, wait, batch in self.rows:
            yield {"replica": self.replica, "step": step, "start_s": start, "duration_s": dur,
                   "num_prefill_tokens": pf_tok, "num_prefill_seqs": pf_seqs, "num_decode_seqs": dec,
                   "num_scheduled_tokens": pf_tok + dec, "kv_usage": usage, "num_running": run,
                   "num_waiting": wait, "batch": [list(x) for x in batch]}

    def write_jsonl(self, fh) -> None:
        """Write one JSON object per line to an open text file."""
        for d in self.dicts():
            fh.write(json.dumps(d, separators=(",", ":")) + "\n")


def chrome_trace(logs: list[StepLog], records: list[RequestRecord]) -> dict[str, Any]:
    """A chrome://tracing / Perfetto JSON object: one track of steps per replica, KV usage counters, one async span per
    request.

    Times are microseconds (the format's unit). Request spans: "queued+prefill" from
    arrival to first token, then "decode" to finish.
    """
    ev: list[dict[str, Any]] = []
    for log in logs:
        pid = log.replica
        ev.append({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": f"replica {pid}"}})
        for d in log.dicts():
            ts, dur = d["start_s"] * 1e6, d["duration_s"] * 1e6
            name = "mixed" if d["num_prefill_tokens"] and d["num_decode_seqs"] else (
                "prefill" if d["num_prefill_tokens"] else "decode")
            ev.append({"ph": "X", "name": name, "pid": pid, "tid": 0, "ts": ts, "dur": dur,
                       "args": {k: d[k] for k in ("step", "num_prefill_tokens", "num_decode_seqs", "num_running",
                                                  "num_waiting")}})
            ev.append({"ph": "C", "name": "kv_usage", "pid": pid, "ts": ts, "args": {"usage": d["kv_usage"]}})
    for i, r in enumerate(records):
        if r.first_token_s is None or r.finish_s is None:
            continue
        base = {"cat": "request", "id": i, "pid": "requests", "tid": 0}
        ev.append({**base, "ph": "b", "name": "queued+prefill", "ts": r.arrival_s * 1e6,
                   "args": {"request_id": r.request_id}})
        ev.append({**base, "ph": "e", "name": "queued+prefill", "ts": r.first_token_s * 1e6})
        ev.append({**base, "ph": "b", "name": "decode", "ts": r.first_token_s * 1e6})
        ev.append({**base, "ph": "e", "name": "decode", "ts": r.finish_s * 1e6})
    return {"traceEvents": ev, "displayTimeUnit": "ms"}
