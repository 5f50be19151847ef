"""A run's request records held as columns (numpy arrays), for files of a million requests and more.

A reader that can build the columns directly (the vLLM ``--save-detailed`` fast path) hands
them to :func:`run_from_columns`; goodput and cost then work on the
arrays, and ``run.records`` is a read-only sequence that builds each
:class:`~kvledger.records.RequestRecord` only when asked for it (same values as the
per-request readers produce, field for field).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace

import numpy as np

from kvledger.records import RequestRecord, RunMetadata, RunRecords

__all__ = ["RecordColumns", "ColumnRecords", "run_from_columns", "with_arrivals_earlier"]


@dataclass(slots=True)
class RecordColumns:
    """One entry per request, in arrival order, all shape ``(n,)`` unless stated.

    Attributes:
        arrival_s: s. first_token_s, finish_s: s, NaN where the record has None.
        num_prompt_tokens, num_output_tokens: tokens, int64.
        error: the error text per request (None for success), object array. ok: ``error is None``, bool.
        chunk_offsets_, chunk_flat_: the chunk times (see the properties), or None until ``build_chunks()`` makes them.
        has_chunks: whether request i has chunk times (False → ``chunk_times_s`` None).
        request_ids: None → ``f"{id_prefix}{row}"`` with ``row`` = ``id_rows[i]`` (None: the index i), so
            "0", "1", ... by default; a trace replayed by the simulator gives ``"azure-conv-"`` and its file rows.
        build_chunks: makes ``(chunk_offsets, chunk_flat)`` on first use, when the reader deferred them.
        num_cached_tokens: prefix-cache hits per request, tokens, float64 (NaN where the record has None);
            None → every record has None.
        num_preemptions: preemptions per request, count, int64; None → every record has None.
    """

    arrival_s: np.ndarray
    first_token_s: np.ndarray
    finish_s: np.ndarray
    num_prompt_tokens: np.ndarray
    num_output_tokens: np.ndarray
    error: np.ndarray
    ok: np.ndarray
    chunk_offsets_: np.ndarray | None
    chunk_flat_: np.ndarray | None
    has_chunks: np.ndarray
    request_ids: list[str] | None = None
    build_chunks: Callable[[], tuple[np.ndarray, np.ndarray]] | None = None
    num_cached_tokens: np.ndarray | None = None
    num_preemptions: np.ndarray | None = None
    id_prefix: str = ""
    id_rows: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.chunk_flat_ is not None:
            self.chunk_flat_.setflags(write=False)  # slices handed to RequestRecord are then views, not copies

    def _chunks(self) -> None:
        if self.chunk_flat_ is None and self.build_chunks is not None:
            self.chunk_offsets_, self.chunk_flat_ = self.build_chunks()
            self.chunk_flat_.setflags(write=False)
            self.build_chunks = None

    @property
    def chunk_offsets(self) -> np.ndarray:
        """Shape ``(n + 1,)``: request i's chunk times are ``chunk_flat[offsets[i]:offsets[i+1]]`` (built on first
        use)."""
        self._chunks()
        return self.chunk_offsets_

    @property
    def chunk_flat(self) -> np.ndarray:
        """Every request's chunk times concatenated, s, read-only (built on first use: only an ITL SLO or a record
        needs them)."""
        self._chunks()
        return self.chunk_flat_

    @property
    def n(self) -> int:
        return int(self.arrival_s.size)

    def ids(self) -> list[str]:
        """Request ids, in order."""
        if self.request_ids is not None:
            return self.request_ids
        rows = range(self.n) if self.id_rows is None else self.id_rows.tolist()
        return [f"{self.id_prefix}{r}" for r in rows]

    def request_id(self, i: int) -> str:
        """Request ``i``'s id."""
        if self.request_ids is not None:
            return self.request_ids[i]
        return f"{self.id_prefix}{i if self.id_rows is None else int(self.id_rows[i])}"

    def record(self, i: int) -> RequestRecord:
        """The RequestRecord of request ``i``."""
        f, e = self.first_token_s[i], self.finish_s[i]
        chunks = self.chunk_flat[self.chunk_offsets[i]:self.chunk_offsets[i + 1]] if self.has_chunks[i] else None
        cached = None if self.num_cached_tokens is None or np.isnan(self.num_cached_tokens[i]) \
            else int(self.num_cached_tokens[i])
        preempted = None if self.num_preemptions is None else int(self.num_preemptions[i])
        return RequestRecord(self.request_id(i), float(self.arrival_s[i]), int(self.num_prompt_tokens[i]),
                             int(self.num_output_tokens[i]), None if np.isnan(f) else float(f),
                             None if np.isnan(e) else float(e), chunks, cached, preempted, error=self.error[i])


class ColumnRecords(Sequence):
    """``run.records`` of a columnar run: RequestRecords built on access (indexing, slicing, iteration)."""

    __slots__ = ("_cols",)

    def __init__(self, cols: RecordColumns) -> None:
        self._cols = cols

    def __len__(self) -> int:
        return self._cols.n

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self._cols.record(k) for k in range(*i.indices(len(self)))]
        n = len(self)
        if not -n <= i < n:
            raise IndexError(i)
        return self._cols.record(i % n)

    def __iter__(self) -> Iterator[RequestRecord]:
        return (self._cols.record(k) for k in range(len(self)))

    def __eq__(self, other: object) -> bool:
        """Equal to any sequence of the same records in the same order (a list of RequestRecords included)."""
        if not isinstance(other, Sequence) or isinstance(other, (str, bytes)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other))

    __hash__ = None  # type: ignore[assignment]


def run_from_columns(columns: RecordColumns, metadata: RunMetadata) -> RunRecords:
    """A run held as columns: ``records`` builds each record on access, ``columns`` keeps the arrays."""
    return RunRecords(ColumnRecords(columns), metadata, columns)  # type: ignore[arg-type]


def with_arrivals_earlier(run: RunRecords, d: float) -> RunRecords:
    """A copy of ``run`` with every arrival ``d`` s earlier (first-token, finish and chunk times kept): each TTFT and
    E2E grows by ``d``, each TPOT and ITL stays. The records are columns again when ``run`` held columns."""
    if run.columns is not None:
        return run_from_columns(replace(run.columns, arrival_s=run.columns.arrival_s - d), run.metadata)
    return RunRecords([replace(r, arrival_s=r.arrival_s - d) for r in run.records], run.metadata)
