"""Per-step outputs of the simulator: KV usage over time (always, bounded memory) and the optional step log with its JSONL and Chrome-trace exports."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import numpy as np

from kvledger.accounting.stepcost import StepShape
from kvledger.records import RequestRecord

__all__ = ["KvUsageTracker", "StepLog", "chrome_trace", "MAX_USAGE_BUCKETS"]

MAX_USAGE_BUCKETS = 256
CHUNK_STEPS = 4096  # steps buffered before they are folded into the totals


class KvUsageTracker:
    """Time-weighted KV usage and the share of held KV slots that hold token state, in bounded memory.

    Usage = blocks held by requests / usable blocks (vLLM's "GPU KV cache usage"; cached
    blocks with no holder count as free). Token-state share = Σ computed tokens of running
    requests / Σ KV slots allocated to them (each request's blocks × block_size, a shared
    block counted for each holder): the quantity the PagedAttention paper's Fig. 2 calls
    "token states" (20.4–38.2 % for Orca variants, 96.3 % for vLLM). Both are sampled after
    each step's allocations (before its finished requests are freed) and weighted by the
    step's duration. The usage series keeps at most ``MAX_USAGE_BUCKETS`` time buckets,
    doubling their width as the run grows; a step counts in the bucket where it starts.

    Steps are buffered in numpy arrays (``CHUNK_STEPS`` rows, a fixed 160 KiB) and folded
    in by ``np.cumsum``, which adds left to right: every total is bit for bit the sum a
    step-at-a-time loop would reach, whether the steps came one by one or as a stretch.
    """

    def __init__(self, block_size: int) -> None:
        self.block_size = block_size
        self._busy_s = 0.0
        self._usage_s = 0.0  # ∫ usage dt, s
        self._max_usage = 0.0
        self._stored_token_s = 0.0  # ∫ stored tokens dt, token·s
        self._held_token_s = 0.0  # ∫ held slots dt, token·s
        self._width_s = 0.01
        self._b: list[list[float]] = []  # per bucket: [∫ usage dt, busy s, max usage]
        self._buf = np.empty((5, CHUNK_STEPS), dtype=np.float64)  # start s, duration s, used blocks, stored, held
        self._n = 0
        self._cap = 1

    def add(self, start: float, dur: float, used_blocks: float, capacity_blocks: int, stored_tokens: int,
            held_slots: int) -> None:
        """One step of ``dur`` s: ``used_blocks`` blocks held, ``stored_tokens`` tokens of state in ``held_slots`` slots."""
        n = self._n
        if n == CHUNK_STEPS:
            self._flush()
            n = 0
        self._cap = capacity_blocks
        col = self._buf[:, n]
        col[0], col[1], col[2], col[3], col[4] = start, dur, used_blocks, stored_tokens, held_slots
        self._n = n + 1

    def add_steps(self, starts, durs, used_blocks, capacity_blocks: int, stored_tokens, held_slots) -> None:
        """Many steps at once (a steady-decode stretch): sequences of equal length, as ``add`` takes them one by one."""
        k = len(durs)
        if self._n + k > CHUNK_STEPS:
            self._flush()
        self._cap = capacity_blocks
        if k > CHUNK_STEPS:
            self._fold(np.asarray(starts, dtype=np.float64), np.asarray(durs, dtype=np.float64),
                       np.asarray(used_blocks, dtype=np.float64), np.asarray(stored_tokens, dtype=np.float64),
                       np.asarray(held_slots, dtype=np.float64))
            return
        n, buf = self._n, self._buf
        buf[0, n: n + k] = starts
        buf[1, n: n + k] = durs
        buf[2, n: n + k] = used_blocks
        buf[3, n: n + k] = stored_tokens
        buf[4, n: n + k] = held_slots
        self._n = n + k

    def _flush(self) -> None:
        n = self._n
        if n:
            b = self._buf
            self._fold(b[0, :n], b[1, :n], b[2, :n], b[3, :n], b[4, :n])
            self._n = 0

    def _fold(self, starts, durs, used, stored, held) -> None:
        """Add buffered steps to the totals and buckets, left to right."""
        u = used / self._cap
        ud = u * durs
        self._busy_s = _seq_sum(self._busy_s, durs)
        self._usage_s = _seq_sum(self._usage_s, ud)
        self._stored_token_s = _seq_sum(self._stored_token_s, stored * durs)
        self._held_token_s = _seq_sum(self._held_token_s, held * durs)
        self._max_usage = max(self._max_usage, float(u.max()))
        j, n, width, idx = 0, len(starts), 0.0, None
        while j < n:
            b = self._bucket(float(starts[j]))  # merges buckets first when the run has outgrown them
            if self._width_s != width:
                width = self._width_s
                idx = (starts / width).astype(np.int64)
            e = int(np.searchsorted(idx, idx[j], side="right"))
            b[0] = _seq_sum(b[0], ud[j: e])
            b[1] = _seq_sum(b[1], durs[j: e])
            b[2] = max(b[2], float(u[j: e].max()))
            j = e

    def _bucket(self, start: float) -> list[float]:
        i = int(start / self._width_s)
        while i >= MAX_USAGE_BUCKETS:
            merged = []
            for j in range(0, len(self._b), 2):
                a = self._b[j]
                b = self._b[j + 1] if j + 1 < len(self._b) else [0.0, 0.0, 0.0]
                merged.append([a[0] + b[0], a[1] + b[1], max(a[2], b[2])])
            self._b, self._width_s = merged, self._width_s * 2
            i = int(start / self._width_s)
        while len(self._b) <= i:
            self._b.append([0.0, 0.0, 0.0])
        return self._b[i]

    @property
    def stored_token_s(self) -> float:
        """∫ stored tokens dt, token·s."""
        self._flush()
        return self._stored_token_s

    @property
    def held_token_s(self) -> float:
        """∫ held KV slots dt, token·s."""
        self._flush()
        return self._held_token_s

    def summary(self, duration_s: float) -> dict[str, Any]:
        """``mean`` (time-weighted over ``duration_s``, idle counts as 0), ``mean_busy``, ``max`` and the bucket ``series``."""
        self._flush()
        w = self._width_s
        series = [{"start_s": i * w, "end_s": (i + 1) * w,
                   "mean": b[0] / b[1] if b[1] else 0.0, "max": b[2]} for i, b in enumerate(self._b)]
        return {
            "mean": self._usage_s / duration_s if duration_s > 0 else 0.0,
            "mean_busy": self._usage_s / self._busy_s if self._busy_s > 0 else 0.0,
            "max": self._max_usage,
            "token_state_share": self._stored_token_s / self._held_token_s if self._held_token_s > 0 else 0.0,
            "bucket_width_s": w,
            "series": series,
        }


def _seq_sum(start: float, values: np.ndarray) -> float:
    """``start + values[0] + values[1] + …`` added left to right (as a Python loop would), float."""
    if len(values) == 1:
        return start + float(values[0])
    return float(np.cumsum(np.concatenate(([start], values)))[-1])


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
        """A steady-decode stretch, one row per step (start, duration and KV usage of each step, as ``add`` takes them)."""
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
    """A chrome://tracing / Perfetto JSON object: one track of steps per replica, KV usage counters, one async span per request.

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
        ev.append({**base, "ph": "b", "name": "queued+prefill", "ts": r.arrival_s * 1e6, "args": {"request_id": r.request_id}})
        ev.append({**base, "ph": "e", "name": "queued+prefill", "ts": r.first_token_s * 1e6})
        ev.append({**base, "ph": "b", "name": "decode", "ts": r.first_token_s * 1e6})
        ev.append({**base, "ph": "e", "name": "decode", "ts": r.finish_s * 1e6})
    return {"traceEvents": ev, "displayTimeUnit": "ms"}
