"""The per-step log as a Parquet file (``kvledger simulate --out`` writes ``steps.parquet``): one row per step and
replica.

Columns are StepLog.dicts()'s keys with their units: replica, step, start_s, duration_s,
num_prefill_tokens, num_prefill_seqs, num_decode_seqs, num_scheduled_tokens, kv_usage,
num_running, num_waiting, and ``batch``, the scheduled (request_id, num_tokens) pairs as a
list of structs. Written in row groups of ``ROW_GROUP`` steps straight from the log's rows.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["ROW_GROUP", "write_steps_parquet"]

ROW_GROUP = 65_536  # steps per row group


def _schema():
    import pyarrow as pa

    batch = pa.list_(pa.struct([("request_id", pa.string()), ("num_tokens", pa.int64())]))
    ints = ("replica", "step", "num_prefill_tokens", "num_prefill_seqs", "num_decode_seqs", "num_scheduled_tokens")
    return pa.schema([(n, pa.int64()) for n in ints[:2]] + [("start_s", pa.float64()), ("duration_s", pa.float64())]
                     + [(n, pa.int64()) for n in ints[2:]] + [("kv_usage", pa.float64()), ("num_running", pa.int64()),
                                                              ("num_waiting", pa.int64()), ("batch", batch)])


def _batch_column(batches, schema):
    """The ``batch`` list-of-struct column from per-step lists of (request_id, num_tokens), built flat."""
    import numpy as np
    import pyarrow as pa

    lengths = np.fromiter((len(b) for b in batches), dtype=np.int32, count=len(batches))
    offsets = np.zeros(len(batches) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    ids = pa.array([r for b in batches for r, _ in b], pa.string())
    toks = pa.array([n for b in batches for _, n in b], pa.int64())
    struct = pa.StructArray.from_arrays([ids, toks], fields=list(schema.field("batch").type.value_type))
    return pa.ListArray.from_arrays(pa.array(offsets), struct)


def write_steps_parquet(logs: list, path: str | Path) -> Path:
    """Write every replica's StepLog rows to ``path``; returns it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = _schema()
    p = Path(path)
    with pq.ParquetWriter(str(p), schema) as writer:
        for log in logs:
            rows = log.rows
            for i in range(0, len(rows), ROW_GROUP):
                part = rows[i: i + ROW_GROUP]
                step, start, dur, pf_tok, pf_seqs, dec, usage, run, wait, batch = zip(*part)
                sched = [a + b for a, b in zip(pf_tok, dec)]
                cols = [[log.replica] * len(part), step, start, dur, pf_tok, pf_seqs, dec, sched, usage, run, wait]
                arrays = [pa.array(c, f.type) for c, f in zip(cols, schema)] + [_batch_column(batch, schema)]
                writer.write_batch(pa.RecordBatch.from_arrays(arrays, schema=schema))
    return p
