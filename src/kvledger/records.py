"""The one per-request outcome record, produced by the simulator and by every benchmark reader.

Goodput and cost code take ``RunRecords`` and cannot tell a simulated run from a
measured one. Times are seconds on one clock per run, relative to the run's origin
(the simulator starts at 0; readers shift the earliest request start to 0 and keep
the original origin in ``RunMetadata.time_origin``).

Canonical metric definitions (docs/formats.md §0 explains how each tool differs):

* TTFT  = first_token_s − arrival_s
* E2E   = finish_s − arrival_s
* TPOT  = (finish_s − first_token_s) / (num_output_tokens − 1), excluding the first
  token; 0.0 when num_output_tokens ≤ 1 (vLLM ``benchmarks/serve.py`` convention)
* ITL   = each gap between consecutive output chunks, ``diff(chunk_times_s)``; a
  chunk may carry more than one token when a server streams several at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from kvledger.jsonable import json_fields, to_jsonable

__all__ = ["RequestRecord", "RunMetadata", "RunRecords", "WARNING_PREFIX"]

#: a ``RunMetadata.definitions`` line that starts with this is a warning: goodput prints it above its table
WARNING_PREFIX = "warning: "


@dataclass(frozen=True, slots=True, eq=False)
class RequestRecord:
    """What happened to one request.

    Attributes:
        request_id: stable id (trace row, benchmark index, or the tool's own id).
        arrival_s: time the request reached the server (simulator) or was sent by the client (benchmarks), s.
        num_prompt_tokens: prompt length, tokens.
        num_output_tokens: output tokens generated, tokens (0 for a failed request).
        first_token_s: time the first output token was produced/received, s; None if none was.
        finish_s: time the last output token was produced/received (or the request failed), s; None if unknown.
        chunk_times_s: time of every output chunk, first chunk included, s, ascending; shape
            ``(num_chunks,)``, float64, read-only. None when the source has no per-chunk times.
        num_cached_tokens: prompt tokens served from the prefix cache, tokens; None if unknown.
        num_preemptions: times the request was preempted (recompute), count; None if unknown.
        error: None for success, else the error text the source gave (a failed request is never good).
    """

    request_id: str
    arrival_s: float
    num_prompt_tokens: int
    num_output_tokens: int
    first_token_s: float | None = None
    finish_s: float | None = None
    chunk_times_s: np.ndarray | None = None
    num_cached_tokens: int | None = None
    num_preemptions: int | None = None
    error: str | None = None

    def __post_init__(self) -> None:
        ct = self.chunk_times_s
        if ct is not None and not (isinstance(ct, np.ndarray) and ct.dtype == np.float64 and not ct.flags.writeable):
            arr = np.array(ct, dtype=np.float64)
            arr.setflags(write=False)
            object.__setattr__(self, "chunk_times_s", arr)

    @property
    def ok(self) -> bool:
        """True when the request finished without error."""
        return self.error is None

    @property
    def ttft_s(self) -> float:
        """Time to first token, s; NaN when there was no first token."""
        return math.nan if self.first_token_s is None else self.first_token_s - self.arrival_s

    @property
    def e2e_s(self) -> float:
        """End-to-end latency, s; NaN when the finish time is unknown."""
        return math.nan if self.finish_s is None else self.finish_s - self.arrival_s

    @property
    def tpot_s(self) -> float:
        """Time per output token excluding the first, s (0.0 for ≤ 1 output token; NaN if times unknown)."""
        if self.num_output_tokens <= 1:
            return 0.0
        if self.first_token_s is None or self.finish_s is None:
            return math.nan
        return (self.finish_s - self.first_token_s) / (self.num_output_tokens - 1)

    @property
    def itls_s(self) -> np.ndarray | None:
        """Gaps between consecutive output chunks, s, shape ``(num_chunks − 1,)``; None without chunk times."""
        return None if self.chunk_times_s is None else np.diff(self.chunk_times_s)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RequestRecord):
            return NotImplemented
        for f in fields(self):
            a, b = getattr(self, f.name), getattr(other, f.name)
            if f.name == "chunk_times_s":
                if (a is None) != (b is None) or (a is not None and not np.array_equal(a, b)):
                    return False
            elif a != b:
                return False
        return True

    __hash__ = None  # type: ignore[assignment]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict (chunk times as a list of floats)."""
        return to_jsonable(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RequestRecord:
        """Inverse of :meth:`to_dict`."""
        return cls(**d)


@json_fields(read={"request_rate": "request_rate_shown"})
@dataclass(slots=True)
class RunMetadata:
    """Facts about the run as a whole.

    Attributes:
        source: "simulator" or the path of the benchmark file read.
        source_format: reader/format name ("vllm-bench-serve", "aiperf-jsonl", "simulator", ...).
        model: model name if stated, else None.
        hardware: GPU name if stated, else None.
        num_gpus: GPUs serving the run if stated, else None.
        concurrency: client concurrency limit if stated, else None.
        request_rate: offered request rate, req/s, if stated (inf for "as fast as possible").
        duration_s: benchmark duration, s, as the tool defines it; None → derived from the records.
        time_origin: what time 0 corresponds to in the source (e.g. "unix epoch 1.7e9 s"), free text.
        definitions: notes on how metrics were normalised (e.g. "TPOT recomputed from timestamps").
        extra: anything else the source stated, kept verbatim (str → JSON-ready value).
    """

    source: str
    source_format: str
    model: str | None = None
    hardware: str | None = None
    num_gpus: int | None = None
    concurrency: int | None = None
    request_rate: float | None = None
    duration_s: float | None = None
    time_origin: str | None = None
    definitions: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def request_rate_shown(self) -> float | str | None:
        """``request_rate``, an infinite one ("as fast as possible") as the string "inf" (strict JSON)."""
        r = self.request_rate
        return "inf" if r is not None and math.isinf(r) else r

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (``request_rate_shown`` for the rate)."""
        return to_jsonable(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunMetadata:
        """Inverse of :meth:`to_dict`."""
        d = dict(d)
        if d.get("request_rate") == "inf":
            d["request_rate"] = math.inf
        return cls(**d)


@dataclass(slots=True)
class RunRecords:
    """All request records of one run plus its metadata; what goodput and cost code take.

    Attributes:
        records: one per request, failed ones included, in arrival order.
        metadata: see :class:`RunMetadata`.
    """

    __json__ = ("metadata", ("records", "record_list"))
    records: list[RequestRecord]
    metadata: RunMetadata
    columns: Any = None  # kvledger.record_columns.RecordColumns when the reader built columns (then records is lazy)

    @property
    def record_list(self) -> list[RequestRecord]:
        """The records as a list (``records`` may be a lazy view of ``columns``)."""
        return list(self.records)

    def request_ids(self) -> list[str]:
        """Every record's request id, in order."""
        return self.columns.ids() if self.columns is not None else [r.request_id for r in self.records]

    @property
    def duration_s(self) -> float:
        """The stated benchmark duration, else last finish − first arrival, s (0.0 for an empty run).

        The fallback assumes the records share one clock; readers of tools whose requests carry no common
        clock (llmperf) set ``metadata.duration_s`` or ``metadata.extra["shared_clock"] = False`` instead.
        """
        if self.metadata.duration_s is not None:
            return self.metadata.duration_s
        return self.span_s

    @property
    def span_s(self) -> float:
        """Last finish − first arrival of the records, s, whatever duration the file states (0.0 for an empty run)."""
        if not len(self.records):
            return 0.0
        if self.columns is not None:
            c = self.columns
            start = float(c.arrival_s.min())
            end = float(np.nanmax(c.finish_s)) if not np.isnan(c.finish_s).all() else start
            return end - start
        start = min(r.arrival_s for r in self.records)
        end = max((r.finish_s for r in self.records if r.finish_s is not None), default=start)
        return end - start

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunRecords:
        return cls([RequestRecord.from_dict(r) for r in d["records"]], RunMetadata.from_dict(d["metadata"]))
