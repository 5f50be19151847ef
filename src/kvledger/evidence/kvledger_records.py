"""Reader and writer for kvledger's own records file (``RunRecords.to_dict()`` as JSON; ``kvledger simulate --out DIR`` writes DIR/records.json).

The file is the bridge between a simulation and the goodput/cost ledgers: the same
per-request records a benchmark reader produces, with their metadata. Reading checks
every record (finite, non-negative latencies, first token and finish not before
arrival) so a hand-edited or damaged file fails with the record index and field.
"""

from __future__ import annotations

import json
import math
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
    return (isinstance(value, dict) and isinstance(value.get("metadata"), dict) and isinstance(value.get("records"), list)
            and "source_format" in value["metadata"])


def read(doc: Document) -> list[RunRecords]:
    """The one run the file holds, with ``metadata.source`` kept as written (the original source).

    Raises:
        FormatError: unknown or missing fields, NaN, negative or inverted times, naming ``records[i].field``.
    """
    obj = doc.value
    unknown = set(obj["metadata"]) - _META_FIELDS
    if unknown:
        raise FormatError(doc.path, f"unknown metadata fields {sorted(unknown)}; known: {sorted(_META_FIELDS)}", "metadata")
    try:
        meta = RunMetadata.from_dict(obj["metadata"])
    except TypeError as err:
        raise FormatError(doc.path, f"bad metadata: {err}", "metadata") from None
    records = [_record(doc.path, r, i) for i, r in enumerate(obj["records"])]
    meta.extra = dict(meta.extra or {}, records_file=doc.path)
    return [RunRecords(records, meta)]


def _record(path: str, r: Any, i: int) -> RequestRecord:
    where = f"records[{i}]"
    if not isinstance(r, dict):
        raise FormatError(path, "expected a record object", where)
    unknown = set(r) - _REC_FIELDS
    if unknown:
        raise FormatError(path, f"unknown record fields {sorted(unknown)}", where)
    for key in ("arrival_s", "first_token_s", "finish_s"):
        v = r.get(key)
        if v is None and key != "arrival_s":
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise FormatError(path, f"{v!r} is not a finite number of seconds", f"{where}.{key}")
    for key in ("first_token_s", "finish_s"):
        if r.get(key) is not None and r[key] < r["arrival_s"]:
            raise FormatError(path, f"{key} {r[key]} is before arrival_s {r['arrival_s']}: negative latency", f"{where}.{key}")
    for key in ("num_prompt_tokens", "num_output_tokens"):
        v = r.get(key)
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise FormatError(path, f"{v!r} is not a non-negative whole number of tokens", f"{where}.{key}")
    ct = r.get("chunk_times_s")
    if ct is not None:
        if not isinstance(ct, list) or not all(isinstance(t, (int, float)) and math.isfinite(t) for t in ct):
            raise FormatError(path, "chunk_times_s must be a list of finite seconds", f"{where}.chunk_times_s")
        if any(b < a for a, b in zip(ct, ct[1:])) or (ct and ct[0] < r["arrival_s"]):
            raise FormatError(path, "chunk_times_s must be ascending and not before arrival_s", f"{where}.chunk_times_s")
    try:
        return RequestRecord.from_dict(r)
    except TypeError as err:
        raise FormatError(path, f"bad record: {err}", where) from None


def write(run: RunRecords, path: str | Path, *, force: bool = False) -> Path:
    """Write ``run.to_dict()`` as JSON to ``path`` (Parquet when it ends in ``.parquet``: records_parquet.py);
    refuses to overwrite an existing file unless ``force``.

    Raises:
        InputError: ``path`` exists and ``force`` is False.
    """
    p = Path(path)
    if p.exists() and not force:
        raise InputError(f"{p} already exists; refusing to overwrite it (pass force=True / --force)")
    if p.suffix == ".parquet":
        from kvledger.evidence.records_parquet import write_parquet

        return write_parquet(run, p)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(run.to_dict()), encoding="utf-8")
    return p
