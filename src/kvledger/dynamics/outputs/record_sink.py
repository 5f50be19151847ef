"""The simulator's finished-request records written into columns as requests finish, so memory follows the active
requests.

Without token times a record is a few numbers: first-token and finish times, output tokens,
prefix-cache hit and preemptions. ``RecordSink`` takes the ``(uid, RequestRecord)`` pairs the
replicas hand back (uid = the request's arrival index), copies those numbers into preallocated
numpy columns at row uid and drops the object: 40 bytes per request instead of a
``RequestRecord`` (about 200). ``columns`` then joins them with the workload's own columns
(arrival time, prompt tokens, ids) into the ``RecordColumns`` of the run, whose records are
field for field the ones the replicas produced.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from kvledger.dynamics.workload.columns import WorkloadColumns
from kvledger.record_columns import RecordColumns
from kvledger.records import RequestRecord

__all__ = ["RecordSink"]

_NAN = float("nan")


class RecordSink:
    """Records of ``n`` requests, filled in any order by uid; behaves as the list the event loop appends to.

    Only records without token times fit (``chunk_times_s`` None: the replicas run with
    ``record_token_times=False``).
    """

    __slots__ = ("first_token_s", "finish_s", "num_output_tokens", "num_cached_tokens", "num_preemptions",
                 "errors", "count")

    def __init__(self, n: int) -> None:
        self.first_token_s = np.full(n, _NAN)
        self.finish_s = np.full(n, _NAN)
        self.num_output_tokens = np.zeros(n, dtype=np.int64)
        self.num_cached_tokens = np.full(n, _NAN)  # NaN: None (a rejected request was never looked up)
        self.num_preemptions = np.zeros(n, dtype=np.int64)
        self.errors: dict[int, str] = {}
        self.count = 0

    def append(self, item: tuple[int, RequestRecord]) -> None:
        uid, rec = item
        if rec.chunk_times_s is not None or rec.num_preemptions is None:
            raise ValueError("RecordSink keeps records without token times (record_token_times=False)")
        if rec.first_token_s is not None:
            self.first_token_s[uid] = rec.first_token_s
        if rec.finish_s is not None:
            self.finish_s[uid] = rec.finish_s
        self.num_output_tokens[uid] = rec.num_output_tokens
        if rec.num_cached_tokens is not None:
            self.num_cached_tokens[uid] = rec.num_cached_tokens
        self.num_preemptions[uid] = rec.num_preemptions
        if rec.error is not None:
            self.errors[uid] = rec.error
        self.count += 1

    def put(self, uid: int, first_token_s: float, finish_s: float, num_output_tokens: int,
            num_cached_tokens: int | None, num_preemptions: int) -> None:
        """A served request's record given by its fields (what ``append`` copies from a RequestRecord, without one)."""
        self.first_token_s[uid] = first_token_s
        self.finish_s[uid] = finish_s
        self.num_output_tokens[uid] = num_output_tokens
        if num_cached_tokens is not None:
            self.num_cached_tokens[uid] = num_cached_tokens
        self.num_preemptions[uid] = num_preemptions
        self.count += 1

    def put_many(self, uids: np.ndarray, first_token_s: np.ndarray, finish_s: np.ndarray, num_output_tokens,
                 num_cached_tokens, num_preemptions) -> None:
        """``put`` for many served requests at once (sequences of equal length; NaN for a ``num_cached_tokens`` of
        None)."""
        self.first_token_s[uids] = first_token_s
        self.finish_s[uids] = finish_s
        self.num_output_tokens[uids] = num_output_tokens
        self.num_cached_tokens[uids] = num_cached_tokens
        self.num_preemptions[uids] = num_preemptions
        self.count += len(uids)

    def extend(self, items: Iterable[tuple[int, RequestRecord]]) -> None:
        for item in items:
            self.append(item)

    def __len__(self) -> int:
        return self.count

    def columns(self, specs: Sequence) -> RecordColumns:
        """The run's RecordColumns, in uid order; ``specs``: the time-sorted workload the uids index."""
        n = self.finish_s.size
        if isinstance(specs, WorkloadColumns):
            arrival, prompts = specs.arrival_s, specs.num_prompt_tokens.astype(np.int64, copy=False)
            ids, prefix, rows = None, specs.id_prefix, specs.id_rows
        else:
            arrival = np.fromiter((s.arrival_s for s in specs), np.float64, n)
            prompts = np.fromiter((s.num_prompt_tokens for s in specs), np.int64, n)
            ids, prefix, rows = [s.request_id for s in specs], "", None
        error = np.full(n, None, dtype=object)
        for uid, msg in self.errors.items():
            error[uid] = msg
        ok = np.ones(n, dtype=bool)
        ok[list(self.errors)] = False
        return RecordColumns(arrival, self.first_token_s, self.finish_s, prompts, self.num_output_tokens, error, ok,
                             np.zeros(n + 1, dtype=np.int64), np.zeros(0), np.zeros(n, dtype=bool), ids,
                             num_cached_tokens=self.num_cached_tokens, num_preemptions=self.num_preemptions,
                             id_prefix=prefix, id_rows=rows)
