"""Vectorised reading of CSV and JSON Lines trace files (numpy's loadtxt, pyarrow), and the range checks every trace
row must pass.

``read_csv_fast`` reads a CSV trace of up to 1 MiB holding exactly its layout's columns with numpy's
C reader (``np.loadtxt``: no pyarrow import, which with its first read costs about 20 ms, more than
such a file takes to parse), and any other CSV trace, like ``read_jsonl_fast`` a JSON Lines
one, in one pyarrow call; every row is then checked with numpy. Anything the vectorised reader
cannot read as the layout's types (a stray word, a missing field, an odd timestamp) returns None,
and the next reader tries: numpy, then pyarrow, then the row-by-row reader in trace_formats.py,
which names the file, line and column (field) of the first bad cell. numpy reads only files whose
values the other readers give too (Azure timestamps exactly ``YYYY-MM-DD HH:MM:SS[.fraction]``,
years 1900–2100) and leaves a file with a bad row to them, so its error is the same as before.
Checks (every reader): token counts are whole numbers in [1, MAX_TRACE_TOKENS]; arrival times are
finite and ≥ 0.
"""

from __future__ import annotations

import csv
import os
import warnings

import numpy as np

from kvledger.errors import FormatError

__all__ = ["MAX_TRACE_TOKENS", "read_csv_fast", "read_jsonl_fast", "check_tokens", "check_times"]

# Longest prompt or output one trace row may ask for, tokens: 10M is 38× the longest context window among the
# bundled model configs (262,144 max_position_embeddings), so a larger count is a damaged file, not a request.
MAX_TRACE_TOKENS = 10_000_000

# Largest CSV read by numpy, bytes: below it loadtxt (~0.6 µs a row) beats pyarrow's import and first read (~20 ms);
# above it pyarrow's multithreaded reader is faster (1M Azure rows, 38 MB: 0.09 s against 0.6 s, this 2-core machine).
NUMPY_CSV_MAX_BYTES = 1 << 20


def check_tokens(values: np.ndarray, path: str, column: str, first_line: int) -> None:
    """Token counts in [1, MAX_TRACE_TOKENS], else a FormatError naming the first bad row's line."""
    bad = (values < 1) | (values > MAX_TRACE_TOKENS)
    if bad.any():
        i = int(np.argmax(bad))
        v = int(values[i])
        why = "must be ≥ 1" if v < 1 else f"exceeds {MAX_TRACE_TOKENS:,} tokens (longer than any model's context)"
        raise FormatError(path, f"token count {v} {why}", f"line {first_line + i}, column {column!r}")


def check_times(values: np.ndarray, path: str, column: str, first_line: int) -> None:
    """Arrival times finite and ≥ 0, else a FormatError naming the first bad row's line."""
    bad = ~np.isfinite(values) | (values < 0)
    if bad.any():
        i = int(np.argmax(bad))
        v = float(values[i])
        why = "must be finite" if not np.isfinite(v) else "must be ≥ 0 (a time since the trace's start)"
        raise FormatError(path, f"time {v!r} {why}", f"line {first_line + i}, column {column!r}")


def read_csv_fast(path, layout: str, time_col: str | None, p_col: str, o_col: str, has_client: bool):
    """(arrival times or None, prompt tokens, output tokens, client ids or None) via numpy or pyarrow; None → use the
    row reader."""
    if not has_client and (got := _read_csv_numpy(path, layout, time_col, p_col, o_col)) is not None:
        return got
    try:
        import pyarrow as pa
        from pyarrow import csv
    except ImportError:  # pyarrow is a declared dependency; a broken install falls back to the row reader
        return None
    types = {p_col: pa.int64(), o_col: pa.int64()}
    if time_col is not None:
        types[time_col] = pa.timestamp("ns") if layout == "azure" else pa.float64()  # ISO 8601, fractions to ns
    cols = [c for c in (time_col, p_col, o_col) if c is not None] + (["client_id"] if has_client else [])
    if has_client:
        types["client_id"] = pa.string()
    try:
        zoned = pa.timestamp("ns", tz="UTC") if layout == "azure" else None  # Azure 2024's +00:00 times
        table = _read_table(csv, str(path), types, cols, time_col, zoned)
        if any(table.column(c).null_count for c in cols if c != "client_id") or table.num_rows == 0:
            return None
        times = None
        if time_col is not None:
            col = table.column(time_col)
            if layout == "azure":
                ns = col.to_numpy().astype(np.int64)  # datetime64[ns] → ns since the epoch
                times = (ns - ns.min()).astype(np.float64) / 1e9
            else:
                times = col.to_numpy()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    prompts = table.column(p_col).to_numpy()
    outputs = table.column(o_col).to_numpy()
    check_tokens(prompts, str(path), p_col, 2)
    check_tokens(outputs, str(path), o_col, 2)
    if times is not None and layout != "azure":
        check_times(times, str(path), time_col, 2)
        times = times - times.min()
    clients = table.column("client_id").to_pylist() if has_client else None
    prompts, outputs = prompts.astype(np.int64), outputs.astype(np.int64)
    table = col = None  # every column is a numpy copy by now (times: concatenated, converted or shifted)
    pa.default_memory_pool().release_unused()  # the reader's buffers back to the system, not kept for later reads
    return times, prompts, outputs, clients


def _read_table(csv, path: str, types: dict, cols: list[str], time_col: str | None, zoned):
    """pyarrow's table of ``cols``; when that fails and ``zoned`` is given (Azure), again with ``time_col`` read as
    that zoned type: Azure 2024 writes ``…ffffff+00:00``, which a naive timestamp type refuses and a zoned one takes
    to UTC; 2023's naive times only the naive type reads. Raises pyarrow's error when neither reads."""
    tries = [types] if zoned is None else [types, {**types, time_col: zoned}]
    for i, column_types in enumerate(tries):
        try:
            return csv.read_csv(path, convert_options=csv.ConvertOptions(
                column_types=column_types, include_columns=cols, strings_can_be_null=True,
                quoted_strings_can_be_null=False))
        except Exception:  # pyarrow.ArrowInvalid and kin: the caller maps them to the row reader
            if i == len(tries) - 1:
                raise
    raise AssertionError("unreachable")


def _read_csv_numpy(path, layout: str, time_col: str | None, p_col: str, o_col: str):
    """(arrival times or None, prompt tokens, output tokens, None) by ``np.loadtxt`` when the header names exactly the
    layout's columns (any order) and every row parses as their types and passes the checks; None → pyarrow (a bad
    row's error then comes from the reader that names it as before)."""
    cols = [c for c in (time_col, p_col, o_col) if c is not None]
    try:
        if os.path.getsize(path) > NUMPY_CSV_MAX_BYTES:
            return None
        with open(path, encoding="utf-8-sig", newline="") as f:
            header = next(csv.reader([f.readline()]), [])
    except (OSError, UnicodeDecodeError, csv.Error):
        return None
    if sorted(header) != sorted(cols):  # extra or repeated columns: pyarrow picks by name
        return None
    dtype = [(name, ("S40" if layout == "azure" else "f8") if name == time_col else "i8") for name in header]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # e.g. "input contained no data": the next reader judges
            rows = np.loadtxt(path, dtype=dtype, delimiter=",", skiprows=1, comments=None, quotechar='"',
                              encoding="utf-8-sig", ndmin=1)
        times = None
        if layout == "azure":
            ns = _azure_ns(rows[time_col])
            if ns is None:
                return None
            times = (ns - ns.min()).astype(np.float64) / 1e9
    except (ValueError, OverflowError, Warning):  # a cell not of its column's type, a short or long row
        return None
    prompts, outputs = rows[p_col].astype(np.int64), rows[o_col].astype(np.int64)
    if time_col is not None and layout != "azure":
        times = rows[time_col].astype(np.float64)
        if (~np.isfinite(times) | (times < 0)).any():
            return None  # the next reader names the row, with the cell as written
        times = times - times.min()
    if _bad_tokens(prompts) or _bad_tokens(outputs):
        return None
    return times, prompts, outputs, None


def _azure_ns(text: np.ndarray) -> np.ndarray | None:
    """Azure timestamps (``S40`` byte strings) as ns since the epoch, or None unless every one is exactly
    ``YYYY-MM-DD HH:MM:SS[.digits]`` with a year in 1900–2100 (numpy's parser takes more forms, and wraps
    around outside datetime64[ns]'s range). Raises ValueError for a date or time numpy rejects (month 13, hour 24)."""
    c = np.ascontiguousarray(text).view(np.uint8).reshape(len(text), 40)
    digit = (c >= 48) & (c <= 57)
    if not (digit[:, [0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18]].all()
            and (c[:, [4, 7]] == 45).all() and (c[:, 10] == 32).all() and (c[:, [13, 16]] == 58).all()):
        return None
    end = c[:, 19:] == 0  # the string's padding
    frac = c[:, 19] == 46  # "."
    if not ((end[:, 0] | (frac & ~end[:, 1])).all() and (end[:, 1:] >= end[:, :-1]).all()
            and (digit[:, 20:] | end[:, 1:]).all() and end[:, -1].all()):
        return None
    year = c[:, :4].astype(np.int64) @ np.array([1000, 100, 10, 1]) - 48 * 1111
    if year.min() < 1900 or year.max() > 2100:
        return None
    return text.astype("M8[ns]").astype(np.int64)


def read_jsonl_fast(path, layout: str, keys: tuple[str, str, str], seg_key: str, block: int):
    """(times as written, prompt tokens, output tokens, segments or None, client ids or None) of a JSON Lines trace
    in one pyarrow call, every row checked with numpy; None → the row reader (it names the line and field).

    None whenever a row would need the row reader's judgement: a value pyarrow cannot read as the field's type
    (a string, a bool, 5.0 for a token count), a missing or null field, a bad token count or time, a segment
    list that is null, not integers or (``block`` > 0, Mooncake) not ``ceil(prompt / block)`` ids long, or a
    client id that is not a string or an integer. The row reader gives such a file's error (or, for the
    values it accepts, such as "5" or 5.0 tokens, its rows), so both readers accept the same files with the
    same values.
    """
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
        from pyarrow import json as pj
    except ImportError:  # pyarrow is a declared dependency; a broken install falls back to the row reader
        return None
    t_key, p_key, o_key = keys
    schema = pa.schema([(t_key, pa.float64()), (p_key, pa.int64()), (o_key, pa.int64())])
    try:
        table = pj.read_json(str(path), parse_options=pj.ParseOptions(explicit_schema=schema,
                                                                      unexpected_field_behavior="infer"))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    if table.num_rows == 0 or any(table.column(k).null_count for k in keys):
        return None
    times, prompts, outputs = (table.column(k).to_numpy() for k in keys)
    if _bad_tokens(prompts) or _bad_tokens(outputs) or (~np.isfinite(times) | (times < 0)).any():
        return None
    segments = None
    if seg_key in table.column_names:
        col = table.column(seg_key).combine_chunks()
        if col.null_count or not (pa.types.is_list(col.type) and pa.types.is_integer(col.type.value_type)):
            return None
        lengths = pc.list_value_length(col).to_numpy()
        if block and (lengths != -(-prompts // block)).any():
            return None
        flat_col = col.flatten()
        if flat_col.null_count:  # [1, null]: the row reader names it
            return None
        flat = flat_col.to_numpy().tolist()
        ends = np.cumsum(lengths).tolist()
        segments = [tuple(flat[a:b]) for a, b in zip([0] + ends[:-1], ends)]
    clients = None
    if "client_id" in table.column_names:
        col = table.column("client_id")
        if not (pa.types.is_string(col.type) or pa.types.is_integer(col.type) or pa.types.is_null(col.type)):
            return None
        clients = [None if c is None else str(c) for c in col.to_pylist()]
    prompts, outputs = prompts.astype(np.int64), outputs.astype(np.int64)
    table = col = None
    pa.default_memory_pool().release_unused()  # the reader's spare buffers back to the system (csv above)
    return times, prompts, outputs, segments, clients


def _bad_tokens(values: np.ndarray) -> bool:
    return bool(((values < 1) | (values > MAX_TRACE_TOKENS)).any())
