"""The fast path for large ``vllm bench serve --save-detailed`` files: parsed by pyarrow into arrays, checked and
turned into
columns with numpy, never into a million Python objects.

A one-million-request file (about 200 MB) is parsed by pyarrow's JSON reader straight into
Arrow arrays (``input_lens``, ``ttfts``, ``itls`` as a list of lists, ...), validated
column by column (finite, non-negative, whole counts, equal lengths, E2E ≥ TTFT) and handed to
:func:`~kvledger.record_columns.run_from_columns` with exactly the values the per-request
reader (:mod:`kvledger.evidence._arrays`) gives. This path only ever accepts clean files:
anything it does not expect — several runs, another format, a NaN, a negative latency, a
null — makes it step aside (return None), and the general reader then reads the file and
names the line, field and index at fault.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from kvledger.evidence._arrays import DETAIL_KEYS, detail_notes, no_ttft_notes
from kvledger.evidence.detect import detect_dict
from kvledger.evidence.vllm_bench import FORMAT, check_run_keys, run_metadata
from kvledger.record_columns import RecordColumns, run_from_columns
from kvledger.records import RunMetadata, RunRecords

__all__ = ["FAST_MIN_BYTES", "read_fast"]

#: files smaller than this go through the general reader (its per-index messages cost nothing there).
FAST_MIN_BYTES = 4 << 20
_OPTIONAL = ("errors", "latencies", "start_times")


def _one_chunk(col: Any) -> Any:
    """The single Arrow array of a one-row column (None if pyarrow split it, which a one-object file never does)."""
    return col.chunk(0) if col.num_chunks == 1 else None


def _flat(col: Any, n: int | None, *, integral: bool = False) -> np.ndarray | None:
    """A list<number> column of one row as a float64 array (None: wrong type, nulls, NaN/inf or negative values)."""
    import pyarrow.types as pt

    arr = _one_chunk(col)
    if arr is None or not pt.is_list(arr.type) or arr.null_count or len(arr) != 1:
        return None
    vals = arr.values
    if (
        not (pt.is_integer(vals.type) or pt.is_floating(vals.type) or (pt.is_null(vals.type) and len(vals) == 0))
        or vals.null_count
    ):
        return None
    out = vals.to_numpy(zero_copy_only=False).astype(np.float64, copy=False) if len(vals) else np.zeros(0)
    if (n is not None and out.size != n) or not np.isfinite(out).all() or (out < 0).any():
        return None
    if integral and (out != np.floor(out)).any():
        return None
    return out


def _gaps(col: Any, n: int) -> tuple[np.ndarray, np.ndarray] | None:
    """``itls`` (list of lists of gaps) as (offsets (n + 1,), all gaps), or None when not clean."""
    import pyarrow as pa
    import pyarrow.types as pt

    arr = _one_chunk(col)
    if (arr is None or not pt.is_list(arr.type) or arr.null_count or len(arr) != 1
            or not pt.is_list(arr.type.value_type)):
        return None
    rows = arr.values
    if len(rows) != n or rows.null_count:
        return None
    inner = pa.ListArray.from_arrays(rows.offsets, rows.values) if rows.offset else rows
    vals = inner.values
    if not (pt.is_integer(vals.type) or pt.is_floating(vals.type) or pt.is_null(vals.type)) or vals.null_count:
        return None
    offsets = inner.offsets.to_numpy().astype(np.int64)
    offsets = offsets - offsets[0]
    gaps = vals.to_numpy(zero_copy_only=False).astype(np.float64,
                                                      copy=False)[: offsets[-1]] if offsets[-1] else np.zeros(0)
    if not np.isfinite(gaps).all() or (gaps < 0).any():
        return None
    return offsets, gaps


def _errors(col: Any, n: int) -> tuple[np.ndarray, np.ndarray] | None:
    """``errors`` as (object array: the text, None for success ("" or null); failed mask), or None when not
    strings/nulls."""
    import pyarrow.compute as pc
    import pyarrow.types as pt

    arr = _one_chunk(col)
    if arr is None or not pt.is_list(arr.type) or arr.null_count or len(arr) != 1 or len(arr.values) != n:
        return None
    vals = arr.values
    if pt.is_null(vals.type):
        return np.full(n, None, dtype=object), np.zeros(n, dtype=bool)
    if not pt.is_string(vals.type) and not pt.is_large_string(vals.type):
        return None
    success = pc.or_kleene(pc.is_null(vals), pc.equal(vals, "")).to_numpy(zero_copy_only=False)
    out = np.full(n, None, dtype=object)
    bad = np.flatnonzero(~success)
    if bad.size:
        out[bad] = vals.take(bad).to_numpy(zero_copy_only=False)
    return out, ~success


def _scalars(tbl: Any) -> dict[str, Any] | None:
    """The top-level non-list fields of the one row, as Python values (None when a field is an object or list of
    objects)."""
    import pyarrow.types as pt

    out: dict[str, Any] = {}
    for name in tbl.column_names:
        t = tbl.schema.field(name).type
        if pt.is_list(t):
            out[name] = []
        elif pt.is_struct(t) or pt.is_map(t):
            return None  # nested objects (SGLang "details", other tools): the general reader decides
        else:
            out[name] = tbl.column(name)[0].as_py()
    return out


def _parse(path: Path) -> Any:
    import pyarrow as pa
    import pyarrow.json as pj

    size = path.stat().st_size
    # vLLM writes its result on one line (json.dump without indent); a pretty-printed file needs the slower
    # newlines_in_values parser, tried second
    for newlines in (False, True):
        try:
            return pj.read_json(path, read_options=pj.ReadOptions(block_size=size + 1, use_threads=True),
                                parse_options=pj.ParseOptions(newlines_in_values=newlines))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, pa.ArrowCapacityError, OSError,
                UnicodeError):
            continue
    # not one clean JSON object (NaN, JSON Lines with several runs, broken text): the general reader explains
    return None


def read_fast(path: str | Path, *, format: str | None = None) -> list[RunRecords] | None:
    """The one run of a large clean vLLM ``--save-detailed`` file, or None to let the general reader take it."""
    p = Path(path)
    try:
        if format not in (None, FORMAT) or not p.is_file() or p.stat().st_size < FAST_MIN_BYTES:
            return None
        with open(p, "rb") as fh:
            if fh.read(64).lstrip()[:1] != b"{":
                return None
    except OSError:  # a name too long, a permission: the general reader reports it
        return None
    tbl = _parse(p)
    if tbl is None or tbl.num_rows != 1:
        return None
    obj = _scalars(tbl)
    if (obj is None or any(k not in tbl.column_names for k in DETAIL_KEYS)
            or (format is None and detect_dict(obj) != FORMAT)):
        return None
    import pyarrow as pa

    try:
        cols = _columns(tbl)
    except pa.ArrowException:  # a value pyarrow cannot hand over as numbers: the general reader names it
        return None
    if cols is None:
        return None
    check_run_keys(str(path), obj, "")
    meta: RunMetadata = run_metadata(str(path), obj, "")
    meta.definitions.extend(detail_notes("start_times" in tbl.column_names, "latencies" in tbl.column_names,
                                         "errors" in tbl.column_names))
    untimed = cols.ok & np.isnan(cols.first_token_s)
    meta.definitions.extend(no_ttft_notes(int(np.count_nonzero(untimed)),
                                          int(np.count_nonzero(untimed & (cols.num_output_tokens == 0)))))
    return [run_from_columns(cols, meta)]


def _chunk_times(first: np.ndarray, timed: np.ndarray, offsets: np.ndarray, gaps: np.ndarray) -> tuple[np.ndarray,
    np.ndarray]:
    """(offsets (n + 1,), flat chunk times) of the timed requests: ``first + [0, cumsum(gaps)]`` per request.

    Requests are grouped by their number of gaps so that each group is one 2-D ``cumsum`` along its rows: the same
    left-to-right sums, bit for bit, as the per-request reader's ``np.cumsum`` (no global running sum to subtract).
    """
    n_gaps = np.diff(offsets)
    chunk_len = np.where(timed, n_gaps + 1, 0)
    chunk_off = np.concatenate(([0], np.cumsum(chunk_len))).astype(np.int64)
    flat = np.empty(int(chunk_off[-1]))
    rows_timed = np.flatnonzero(timed)
    flat[chunk_off[rows_timed]] = first[rows_timed]
    order = rows_timed[np.argsort(n_gaps[rows_timed], kind="stable")]
    lengths = n_gaps[order]
    cuts = np.flatnonzero(np.diff(lengths)) + 1
    for a, b in zip(np.concatenate(([0], cuts)), np.concatenate((cuts, [lengths.size]))):
        k = int(lengths[a]) if b > a else 0
        if k == 0:
            continue
        rows = order[a:b]
        steps = np.arange(k)
        sums = np.cumsum(gaps[offsets[rows][:, None] + steps], axis=1)
        flat[chunk_off[rows][:, None] + 1 + steps] = first[rows][:, None] + sums
    return chunk_off, flat


def _columns(tbl: Any):
    """RecordColumns with the per-request reader's rules (``_arrays._one``), vectorised; None when anything is
    unclean."""
    n_in = _flat(tbl.column("input_lens"), None, integral=True)
    if n_in is None:
        return None
    n = n_in.size
    n_out = _flat(tbl.column("output_lens"), n, integral=True)
    ttft = _flat(tbl.column("ttfts"), n)
    g = _gaps(tbl.column("itls"), n)
    opt = {k: tbl.column(k) for k in _OPTIONAL if k in tbl.column_names}
    lat = _flat(opt["latencies"], n) if "latencies" in opt else None
    starts = _flat(opt["start_times"], n) if "start_times" in opt else None
    errs = _errors(opt["errors"], n) if "errors" in opt else None
    if n_out is None or ttft is None or g is None or any(k in opt and v is None for k, v in
                                                         (("latencies", lat), ("start_times", starts), ("errors",
                                                             errs))):
        return None
    offsets, gaps = g
    arrival = starts - starts.min() if starts is not None and n else np.zeros(n)
    n_gaps = np.diff(offsets)
    if errs is None:  # inferred, as the per-request reader does
        failed = (ttft == 0.0) & (n_out == 0)
        errs = np.full(n, None, dtype=object)
        errs[failed] = "no output (ttft 0 and output_len 0; inferred, the file has no errors array)"
    else:
        errs, failed = errs
    timed = ~failed & ~((ttft == 0.0) & (n_gaps == 0))
    if lat is not None and (timed & (lat + 1e-9 < ttft)).any():
        return None  # the general reader names the request whose latency is shorter than its TTFT
    first = np.where(timed, arrival + ttft, np.nan)
    cols = RecordColumns(arrival, first, None, n_in.astype(np.int64), n_out.astype(np.int64), errs, ~failed, None, None,
                         timed)
    if lat is not None:  # chunk times are built only when something needs them (an ITL SLO, a record)
        cols.finish_s = np.where(timed, arrival + lat, np.where(lat > 0, arrival + lat, np.nan))
        cols.build_chunks = lambda: _chunk_times(first, timed, offsets, gaps)
    else:  # the finish is the last chunk: build them now
        chunk_off, chunk_flat = _chunk_times(first, timed, offsets, gaps)
        chunk_flat.setflags(write=False)
        cols.chunk_offsets_, cols.chunk_flat_ = chunk_off, chunk_flat
        last = chunk_flat[np.maximum(chunk_off[1:] - 1, 0)] if chunk_flat.size else np.zeros(n)
        cols.finish_s = np.where(timed, last, np.nan)
    return cols
