"""Reader and writer for kvledger's own records file (``RunRecords.to_dict()`` as JSON, or Parquet via
records_parquet.py; ``kvledger simulate --out DIR`` writes DIR/records.parquet).

The file is the bridge between a simulation and the goodput/cost ledgers: the same
per-request records a benchmark reader produces, with their metadata. Reading checks
every record (finite, non-negative latencies, first token and finish not before
arrival) so a hand-edited or damaged file fails with the record index and field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kvledger.errors import FormatError, InputError
from kvledger.evidence._io import Document
from kvledger.records import RequestRecord, RunMetadata, RunRecords

__all__ = ["FORMAT", "read", "write", "looks_like_records"]

FORMAT = "kvledger-records"
_META_FIELDS = set(RunMetadata.__dataclass_fields__)
_REC_FIELDS = set(RequestRecord.__dataclass_fields__)


def looks_like_records(value: Any) -> bool:
    """True for ``{"metadata": {... "source_format" ...}, "records": [...]}``."""
    return (isinstance(value, dict) and isinstance(value.get("metadata"), dict) and isinstance(value.get("records"),
        list)
            and "source_format" in value["metadata"])


def read(doc: Document) -> list[RunRecords]:
    """The one run the file holds, with ``metadata.source`` kept as written (the original source).

    Raises:
        FormatError: unknown or missing fields, NaN, negative or inverted times, naming ``records[i].field``.
    """
    obj = doc.value
    if not looks_like_records(obj):
        raise FormatError(doc.path, "not a kvledger records file: expected {\"metadata\": {\"source_format\": ...}, "
                                    "\"records\": [...]}")
    unknown = set(obj["metadata"]) - _META_FIELDS
    if unknown:
        raise FormatError(doc.path, f"unknown metadata fields {sorted(unknown)}; known: {sorted(_META_FIELDS)}",
                          "metadata")
    _check_metadata(doc.path, obj["metadata"])
    try:
        meta = RunMetadata.from_dict(obj["metadata"])
    except TypeError as err:
        raise FormatError(doc.path, f"bad metadata: {err}", "metadata") from None
    records = [_record(doc.path, r, i) for i, r in enumerate(obj["records"])]
    meta.extra = dict(meta.extra or {}, records_file=doc.path)
    return [RunRecords(records, meta)]


_TIME_MAX_S = 1e10  # about 300 years: beyond any run, and far inside the float range
_COUNT_MAX = 1 << 40
# metadata field → (allowed JSON types, a check on the value or None), for the fields RunMetadata declares
_META_CHECKS: dict[str, tuple[tuple[type, ...], Any]] = {
    "source": ((str,), None), "source_format": ((str,), None), "model": ((str, type(None)), None),
    "hardware": ((str, type(None)), None), "time_origin": ((str, type(None)), None),
    "num_gpus": ((int, type(None)), lambda v: v is None or 1 <= v <= _COUNT_MAX),
    "concurrency": ((int, type(None)), lambda v: v is None or 1 <= v <= _COUNT_MAX),
    "request_rate": ((int, float, str, type(None)), lambda v: v is None or v == "inf" or (not isinstance(v,
        str) and 0 <= v <= 1e9)),
    "duration_s": ((int, float, type(None)), lambda v: v is None or 0 <= v <= _TIME_MAX_S),
    "definitions": ((list,), lambda v: all(isinstance(x, str) for x in v)), "extra": ((dict,), None),
}


def _check_metadata(path: str, md: dict[str, Any]) -> None:
    """Types and ranges of the metadata fields (a number where a name belongs, a negative duration, ...)."""
    for key, (types, ok) in _META_CHECKS.items():
        if key not in md:
            if key in ("source", "source_format"):
                raise FormatError(path, f"missing {key!r}", "metadata")
            continue
        v = md[key]
        if isinstance(v, bool) or not isinstance(v, types) or (ok is not None and not ok(v)):
            raise FormatError(path, f"{v!r} is not allowed here", f"metadata.{key}")


def _record(path: str, r: Any, i: int) -> RequestRecord:
    where = f"records[{i}]"
    if not isinstance(r, dict):
        raise FormatError(path, "expected a record object", where)
    unknown = set(r) - _REC_FIELDS
    if unknown:
        raise FormatError(path, f"unknown record fields {sorted(unknown)}", where)
    if not isinstance(r.get("request_id"), str):
        raise FormatError(path, f"{r.get('request_id')!r} is not a request id (a string)", f"{where}.request_id")
    if r.get("error") is not None and not isinstance(r["error"], str):
        raise FormatError(path, f"{r['error']!r} is not an error text (a string) or null", f"{where}.error")
    for key in ("arrival_s", "first_token_s", "finish_s"):
        v = r.get(key)
        if v is None and key != "arrival_s":
            continue
        # NaN fails too; no float() of huge ints
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not abs(v) <= _TIME_MAX_S:
            raise FormatError(path, f"{v!r} is not a finite number of seconds (|t| ≤ {_TIME_MAX_S:g})",
                              f"{where}.{key}")
    for key in ("first_token_s", "finish_s"):
        if r.get(key) is not None and r[key] < r["arrival_s"]:
            raise FormatError(path, f"{key} {r[key]} is before arrival_s {r['arrival_s']}: negative latency",
                              f"{where}.{key}")
    if r.get("first_token_s") is not None and r.get("finish_s") is not None and r["finish_s"] < r["first_token_s"]:
        raise FormatError(path, f"finish_s {r['finish_s']} is before first_token_s {r['first_token_s']}",
                          f"{where}.finish_s")
    for key in ("num_prompt_tokens", "num_output_tokens", "num_cached_tokens", "num_preemptions"):
        v = r.get(key)
        if v is None and key in ("num_cached_tokens", "num_preemptions"):
            continue
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= _COUNT_MAX:
            raise FormatError(path, f"{v!r} is not a whole number in [0, 2^40]", f"{where}.{key}")
    ct = r.get("chunk_times_s")
    if ct is not None:
        if not isinstance(ct, list) or not all(isinstance(t, (int, float)) and not isinstance(t,
            bool) and abs(t) <= _TIME_MAX_S
                                               for t in ct):
            raise FormatError(path, "chunk_times_s must be a list of finite seconds", f"{where}.chunk_times_s")
        if any(b < a for a, b in zip(ct, ct[1:])) or (ct and ct[0] < r["arrival_s"]):
            raise FormatError(path, "chunk_times_s must be ascending and not before arrival_s",
                              f"{where}.chunk_times_s")
    try:
        return RequestRecord.from_dict(r)
    except TypeError as err:
        raise FormatError(path, f"bad record: {err}", where) from None


def write(run: RunRecords, path: str | Path, *, force: bool = False) -> Path:
    """Write ``run.to_dict()`` as strict JSON to ``path``, atomically (temporary file + rename), or as Parquet when it
    ends in ``.parquet`` (records_parquet.py); refuses to overwrite an existing file unless ``force``.

    Raises:
        InputError: ``path`` exists and ``force`` is False.
    """
    from kvledger.strict_json import dumps, write_text_atomic

    p = Path(path)
    if p.exists() and not force:
        raise InputError(f"{p} already exists; refusing to overwrite it (pass force=True / --force)")
    if p.suffix == ".parquet":
        from kvledger.evidence.records_parquet import write_parquet

        return write_parquet(run, p)
    p.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(p, dumps(run.to_dict()))
    return p
