"""kvledger's records file in Parquet: one row per request, token times as a list column, the run metadata as JSON in
the schema.

The columnar twin of the JSON records file (kvledger_records.py): ``kvledger simulate --out``
writes ``records.parquet``; ``goodput``, ``cost`` and every reader of records accept it.
Written in row groups of ``ROW_GROUP`` requests, so writing never holds a second copy of the
whole run; read with pyarrow and checked column by column (finite, non-negative latencies,
first token and finish not before arrival, ascending token times), naming the row and column.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from kvledger.errors import FormatError
from kvledger.records import RequestRecord, RunMetadata, RunRecords

__all__ = ["MAGIC", "ROW_GROUP", "is_parquet", "write_parquet", "read_parquet"]

MAGIC = b"PAR1"
ROW_GROUP = 65_536  # requests per row group
_META_KEY = b"kvledger.metadata"
_FLOATS = ("arrival_s", "first_token_s", "finish_s")
_INTS = ("num_prompt_tokens", "num_output_tokens", "num_cached_tokens", "num_preemptions")


def is_parquet(path: str | Path) -> bool:
    """True when the file starts with Parquet's magic bytes."""
    try:
        with open(path, "rb") as f:
            return f.read(4) == MAGIC
    except OSError:
        return False


def _schema():
    import pyarrow as pa

    return pa.schema([("request_id", pa.string()), ("arrival_s", pa.float64()), ("num_prompt_tokens", pa.int64()),
                      ("num_output_tokens", pa.int64()), ("first_token_s", pa.float64()), ("finish_s", pa.float64()),
                      ("chunk_times_s", pa.list_(pa.float64())), ("num_cached_tokens", pa.int64()),
                      ("num_preemptions", pa.int64()), ("error", pa.string())])


def _batch(recs: list[RequestRecord], schema):
    import pyarrow as pa

    cols = {name: [getattr(r, name) for r in recs] for name in ("request_id", *_FLOATS, *_INTS, "error")}
    chunks = [r.chunk_times_s for r in recs]
    lengths = np.fromiter((0 if c is None else c.size for c in chunks), dtype=np.int32, count=len(recs))
    offsets = np.zeros(len(recs) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    present = [c for c in chunks if c is not None and c.size]
    flat = np.concatenate(present) if present else np.zeros(0)
    mask = pa.array(np.fromiter((c is None for c in chunks), dtype=bool, count=len(recs)))
    lists = pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat, pa.float64()), mask=mask)
    arrays = [pa.array(cols[f.name], f.type) if f.name != "chunk_times_s" else lists for f in schema]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def write_parquet(run: RunRecords, path: str | Path) -> Path:
    """Write ``run`` to ``path`` (the caller checks for overwrites); returns the path."""
    import pyarrow.parquet as pq

    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    schema = _schema().with_metadata({_META_KEY: json.dumps(run.metadata.to_dict(), default=str).encode()})
    with pq.ParquetWriter(str(p), schema) as writer:
        recs = run.records
        for i in range(0, max(len(recs), 1), ROW_GROUP):
            writer.write_batch(_batch(recs[i: i + ROW_GROUP], schema))
    return p


def read_parquet(path: str | Path) -> list[RunRecords]:
    """The one run a records Parquet file holds (``metadata.source`` as written).

    Raises:
        FormatError: not a kvledger records file, or damaged values (row and column named).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    name = str(path)
    try:
        table = pq.read_table(name)
    except (OSError, pa.ArrowInvalid) as err:
        raise FormatError(name, f"cannot read the Parquet file: {err}") from None
    meta_raw = (table.schema.metadata or {}).get(_META_KEY)
    missing = [f.name for f in _schema() if f.name not in table.column_names]
    if meta_raw is None or missing:
        raise FormatError(name, "a Parquet file, but not a kvledger records file (written by `kvledger simulate --out`)"
                          + (f": missing columns {missing}" if missing else ": no kvledger metadata"))
    try:
        meta = RunMetadata.from_dict(json.loads(meta_raw))
    except (TypeError, ValueError) as err:
        raise FormatError(name, f"bad metadata: {err}", "metadata") from None
    n = table.num_rows
    if n == 0:
        raise FormatError(name, "holds no requests")
    f = {c: table.column(c).to_numpy(zero_copy_only=False).astype(np.float64) for c in _FLOATS}
    _check(name, f, table)
    lists = table.column("chunk_times_s").combine_chunks()
    offsets = lists.offsets.to_numpy()
    flat = lists.values.to_numpy(zero_copy_only=False)
    valid = lists.is_valid().to_numpy(zero_copy_only=False)
    _check_chunks(name, flat, offsets, f["arrival_s"])
    py = {c: table.column(c).to_pylist() for c in ("request_id", *_FLOATS, *_INTS, "error")}
    recs = []
    for i in range(n):
        times = None
        if valid[i]:
            times = flat[offsets[i]: offsets[i + 1]].copy()
            times.setflags(write=False)
        recs.append(RequestRecord(py["request_id"][i], py["arrival_s"][i], py["num_prompt_tokens"][i],
                                  py["num_output_tokens"][i], py["first_token_s"][i], py["finish_s"][i], times,
                                  py["num_cached_tokens"][i], py["num_preemptions"][i], py["error"][i]))
    meta.extra = dict(meta.extra or {}, records_file=name)
    if meta.source_format == "simulator":
        meta.extra.update(_launch_record(meta.extra, name))
    return [RunRecords(recs, meta)]


#: the simulated engine's settings (``EngineConfig``, in ``extra["engine"]``) a replay reads as a launch's
_LAUNCH = ("max_num_seqs", "max_num_batched_tokens", "max_model_len", "block_size", "enable_prefix_caching",
           "enable_chunked_prefill", "async_scheduling", "batching")


def _launch_record(extra: dict, name: str) -> dict:
    """A vLLM-like simulation's own settings as a run's launch record (``engine_kwargs``, ``kv_cache``'s block count,
    ``vllm_version``: the keys ``calibration.run_record`` reads), so that ``validate`` and ``calibrate`` replay
    kvledger's records on the engine that produced them; {} for an SGLang-policy run or one written without them."""
    eng = extra.get("engine")
    if not isinstance(eng, dict) or eng.get("batching") == "sglang" or "engine_kwargs" in extra:
        return {}
    out: dict = {"engine_kwargs": {k: eng[k] for k in _LAUNCH if eng.get(k) is not None}, "record_file": name}
    if extra.get("tp"):
        out["engine_kwargs"]["tensor_parallel_size"] = extra["tp"]
    if eng.get("num_gpu_blocks"):
        out["kv_cache"] = {"num_gpu_blocks": eng["num_gpu_blocks"], "block_size": eng.get("block_size")}
    if isinstance(extra.get("engine_version"), str):
        out["vllm_version"] = extra["engine_version"]
    return out


def _first(bad: np.ndarray) -> int:
    return int(np.argmax(bad))


def _check(name: str, f: dict[str, np.ndarray], table) -> None:
    """Finite times (arrival required), first token and finish not before arrival, non-negative token counts."""
    arr = f["arrival_s"]
    if np.isnan(arr).any() or not np.isfinite(arr).all():
        raise FormatError(name, "arrival_s must be a finite number of seconds", f"row {_first(~np.isfinite(arr))}, "
                                                                                f"column 'arrival_s'")
    for col in ("first_token_s", "finish_s"):
        v = f[col]
        bad = np.isinf(v)
        if bad.any():
            raise FormatError(name, f"{col} must be finite", f"row {_first(bad)}, column {col!r}")
        with np.errstate(invalid="ignore"):
            early = v < arr
        if early.any():
            i = _first(early)
            raise FormatError(name, f"{col} {v[i]} is before arrival_s {arr[i]}: negative latency", f"row {i}, column "
                f"{col!r}")
    for col in ("num_prompt_tokens", "num_output_tokens"):
        c = table.column(col)
        v = c.to_numpy(zero_copy_only=False)
        if c.null_count or (v < 0).any():
            raise FormatError(name, f"{col} must be a non-negative whole number of tokens", f"column {col!r}")


def _check_chunks(name: str, flat: np.ndarray, offsets: np.ndarray, arrival: np.ndarray) -> None:
    """Token times finite, ascending within each request and not before its arrival."""
    if flat.size == 0:
        return
    lengths = np.diff(offsets)
    owner = np.repeat(np.arange(len(lengths)), lengths)
    bad = ~np.isfinite(flat) | (flat < arrival[owner])
    same = owner[1:] == owner[:-1]
    bad[1:] |= same & (flat[1:] < flat[:-1])
    if bad.any():
        i = int(owner[_first(bad)])
        raise FormatError(name, "chunk_times_s must be finite, ascending and not before arrival_s", f"row {i}, column "
            f"'chunk_times_s'")
