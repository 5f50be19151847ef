"""Readers for request-trace files: layout detection and row parsing with file/line/column errors.

Layouts (detected from the header row or the first JSON object's keys):

======================  =====  ================================================================
layout                  file   columns / keys (extra ones are ignored)
======================  =====  ================================================================
``azure``               CSV    TIMESTAMP (``YYYY-MM-DD HH:MM:SS.fffffff``; 2024: ``+00:00`` after), ContextTokens,
                               GeneratedTokens
``vidur``               CSV    arrived_at (s), num_prefill_tokens, num_decode_tokens
``vidur-lengths``       CSV    num_prefill_tokens, num_decode_tokens (no arrival times)
``kvledger``            CSV    arrival_s, num_prompt_tokens, num_output_tokens [, client_id]
``openai``              CSV    created (Unix s), prompt_tokens, completion_tokens (OpenAI usage object's names)
``openai-lengths``      CSV    prompt_tokens, completion_tokens (no arrival times: --rate)
``burstgpt``            CSV    Timestamp (s), Request tokens, Response tokens (rows with 0 skipped: ``burstgpt.py``)
``mooncake``            JSONL  timestamp (ms), input_length, output_length [, hash_ids]
``kvledger``            JSONL  arrival_s, num_prompt_tokens, num_output_tokens [, prefix_segments, client_id]
``bailian``             JSONL  chat_id, parent_chat_id, timestamp (s), input_length, output_length [, turn, hash_ids]
======================  =====  ================================================================

Mooncake ``hash_ids`` name consecutive 512-token prompt blocks; ``len(hash_ids)`` must equal
``ceil(input_length / 512)`` (true on every row of the FAST'25 release). Qwen-Bailian rows (``bailian.py``) carry
sessions (``client_id`` = the conversation) and 16-token ``hash_ids``.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kvledger.dynamics.workload.burstgpt import read_burstgpt
from kvledger.dynamics.workload.trace_arrow import MAX_TRACE_TOKENS, read_csv_fast, read_jsonl_fast
from kvledger.dynamics.workload.trace_layouts import (
    CSV_LAYOUTS,
    JSONL_LAYOUTS,
    JSONL_TIME_S,
    detect_layout,
    openai_time_column,
)
from kvledger.dynamics.workload.trace_times import azure_ns
from kvledger.errors import FormatError, InputError

__all__ = ["ParsedTrace", "read_trace_file", "too_few_requests", "CSV_LAYOUTS", "JSONL_LAYOUTS"]

_MOONCAKE_BLOCK_TOKENS = 512


@dataclass(frozen=True, slots=True)
class ParsedTrace:
    """A trace file's rows in file order.

    Attributes:
        layout: the detected layout name (see the module table).
        arrivals_s: arrival time of each row relative to the file's earliest one, s, shape ``(n,)``;
            None for a layout without arrival times.
        prompt_tokens: prompt length per row, tokens, int64, shape ``(n,)``.
        output_tokens: output length per row, tokens, int64, shape ``(n,)``.
        segments: per-row prefix segment ids (Mooncake ``hash_ids``), or None when the file has none.
        segment_tokens: tokens per segment id.
        client_ids: per-row client id, or None.
        note: what the reader left out (BurstGPT's failed rows), for the run's notes; None when nothing.
    """

    layout: str
    arrivals_s: np.ndarray | None
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    segments: list[tuple[int, ...]] | None
    segment_tokens: int
    client_ids: list[str | None] | None
    note: str | None = None


def _int_at(value: object, path: Path, where: str) -> int:
    """A token count ≥ 1 from a cell, else a FormatError naming the place."""
    try:
        if isinstance(value, bool):
            raise ValueError
        number = int(value) if not isinstance(value, float) else int(value) if value.is_integer() else None
        if number is None:
            raise ValueError
    except (TypeError, ValueError, OverflowError):  # OverflowError: int(inf)
        raise FormatError(str(path), f"{value!r} is not a whole number of tokens", where) from None
    if number < 1:
        raise FormatError(str(path), f"token count {number} must be ≥ 1", where)
    if number > MAX_TRACE_TOKENS:
        raise FormatError(str(path), f"token count {number} exceeds {MAX_TRACE_TOKENS:,} tokens (longer than any "
                          "model's context)", where)
    return number


def _float_at(value: object, path: Path, where: str) -> float:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):  # OverflowError: an integer beyond float range (10**400)
        raise FormatError(str(path), f"{value!r} is not a number of seconds", where) from None
    if not math.isfinite(number):
        raise FormatError(str(path), f"time {value!r} must be finite", where)
    if number < 0:
        raise FormatError(str(path), f"time {value!r} must be ≥ 0 (a time since the trace's start)", where)
    return number


def _read_csv(path: Path) -> ParsedTrace:
    try:
        return _read_csv_rows(path)
    except csv.Error as err:  # a field over the csv module's limit, a NUL byte, an unterminated quote
        raise FormatError(str(path), f"not a readable CSV ({err})") from None


def _read_csv_rows(path: Path) -> ParsedTrace:
    with path.open(newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f)
        layout = detect_layout(set(reader.fieldnames or []), CSV_LAYOUTS, path, "CSV")
        if layout == "openai-lengths":
            openai_time_column(list(reader.fieldnames or []), path)
        if layout == "burstgpt":
            b = read_burstgpt(path)
            return ParsedTrace(layout, b.arrivals_s, b.prompt_tokens, b.output_tokens, None, _MOONCAKE_BLOCK_TOKENS,
                               None, b.note)
        cols = CSV_LAYOUTS[layout]
        time_col, p_col, o_col = (None, *cols) if len(cols) == 2 else cols
        has_client = layout == "kvledger" and "client_id" in (reader.fieldnames or [])
        fast = read_csv_fast(path, layout, time_col, p_col, o_col, has_client)
        if fast is not None:
            arrivals, prompts_a, outputs_a, client_list = fast
            has_clients = client_list is not None and any(c is not None for c in client_list)
            return ParsedTrace(layout, arrivals, prompts_a, outputs_a, None, _MOONCAKE_BLOCK_TOKENS,
                               client_list if has_clients else None)
        times: list[float] = []
        prompts: list[int] = []
        outputs: list[int] = []
        clients: list[str | None] = []
        days: dict[str, int] = {}
        for row in reader:
            line = reader.line_num
            if None in row or any(row.get(c) is None for c in CSV_LAYOUTS[layout]):
                raise FormatError(str(path),
                                  f"wrong number of fields (the header names {len(reader.fieldnames or [])})",
                                  f"line {line}")
            prompts.append(_int_at(row[p_col], path, f"line {line}, column {p_col!r}"))
            outputs.append(_int_at(row[o_col], path, f"line {line}, column {o_col!r}"))
            if layout == "azure":
                times.append(azure_ns(row[time_col], path, f"line {line}, column {time_col!r}", days))
            elif time_col is not None:
                times.append(_float_at(row[time_col], path, f"line {line}, column {time_col!r}"))
            clients.append(row.get("client_id") or None)
    if not prompts:
        raise FormatError(str(path), "no data rows")
    if layout == "azure":
        origin = min(times)  # Python ints: day-ordinal nanoseconds overflow int64
        arrivals = np.asarray([float(t - origin) for t in times], dtype=np.float64) / 1e9  # int → double rounded once
    else:
        arrivals = None if time_col is None else np.asarray(times, dtype=np.float64)
        if arrivals is not None:
            arrivals = arrivals - arrivals.min()
    has_clients = layout == "kvledger" and any(c is not None for c in clients)
    return ParsedTrace(layout, arrivals, np.asarray(prompts, dtype=np.int64), np.asarray(outputs, dtype=np.int64),
                       None, _MOONCAKE_BLOCK_TOKENS, clients if has_clients else None)


def _segments_at(value: object, prompt: int, block: int, path: Path, where: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise FormatError(str(path), "must be a list of integer block ids", where)
    if block and len(value) != math.ceil(prompt / block):
        raise FormatError(str(path), f"has {len(value)} ids but the prompt of {prompt} tokens spans "
                          f"ceil({prompt}/{block}) = {math.ceil(prompt / block)} blocks of {block} tokens", where)
    return tuple(value)


def _first_layout(path: Path) -> str | None:
    """The layout the first non-blank line's keys name, or None (the row reader then gives the error)."""
    from kvledger.dynamics.workload.bailian import BAILIAN_KEYS  # here: a CSV trace never needs the Bailian reader

    with path.open(encoding="utf-8-sig") as f:
        for text in f:
            if text.strip():
                try:
                    obj = json.loads(text)
                except (json.JSONDecodeError, RecursionError):
                    return None
                if not isinstance(obj, dict):
                    return None
                if all(k in obj for k in BAILIAN_KEYS):  # before Mooncake's keys, which a Bailian row also has
                    return "bailian"
                return next((name for name, keys in JSONL_LAYOUTS.items() if all(k in obj for k in keys)), None)
    return None


def _read_jsonl(path: Path, segment_tokens: int) -> ParsedTrace:
    """A JSON Lines trace: pyarrow's reader with every row checked (trace_arrow.py), else row by row."""
    layout = _first_layout(path)
    if layout == "bailian":
        from kvledger.dynamics.workload.bailian import BAILIAN_BLOCK_TOKENS, read_bailian

        b = read_bailian(path)
        return ParsedTrace(layout, b.arrivals_s, b.prompt_tokens, b.output_tokens, b.segments, BAILIAN_BLOCK_TOKENS,
                           b.sessions)
    if layout is not None:
        seg_key = "hash_ids" if layout == "mooncake" else "prefix_segments"
        block = segment_tokens if layout == "mooncake" else 0
        fast = read_jsonl_fast(path, layout, JSONL_LAYOUTS[layout], seg_key, block)
        if fast is not None:
            times, prompts, outputs, segments, clients = fast
            times = times * JSONL_TIME_S.get(layout, 1.0)  # Mooncake's ms, LLMServingSim's ns → s
            return ParsedTrace(layout, times - times.min(), prompts, outputs,
                               segments if segments is not None and any(segments) else None, segment_tokens,
                               clients if clients is not None and any(c is not None for c in clients) else None)
    return _read_jsonl_rows(path, segment_tokens)


def _read_jsonl_rows(path: Path, segment_tokens: int) -> ParsedTrace:
    layout = None
    times: list[float] = []
    prompts: list[int] = []
    outputs: list[int] = []
    segments: list[tuple[int, ...]] = []
    clients: list[str | None] = []
    with path.open(encoding="utf-8-sig") as f:
        for line_no, text in enumerate(f, start=1):
            if not text.strip():
                continue
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as err:
                raise FormatError(str(path), f"not valid JSON: {err.msg} (JSON Lines: one whole object a line)",
                                  f"line {line_no}, column {err.colno}") from None
            except RecursionError:  # brackets nested thousands deep: no trace line looks like this
                raise FormatError(str(path), "JSON nested too deeply to be a trace line", f"line {line_no}") from None
            if not isinstance(obj, dict):
                raise FormatError(str(path), "each line must be a JSON object", f"line {line_no}")
            if layout is None:
                layout = detect_layout(set(obj), JSONL_LAYOUTS, path, "JSONL")
            t_key, p_key, o_key = JSONL_LAYOUTS[layout]
            for key in (t_key, p_key, o_key):
                if key not in obj:
                    raise FormatError(str(path), f"missing field {key!r}", f"line {line_no}")
            where = f"line {line_no}, field "
            prompts.append(_int_at(obj[p_key], path, where + repr(p_key)))
            outputs.append(_int_at(obj[o_key], path, where + repr(o_key)))
            t = _float_at(obj[t_key], path, where + repr(t_key))
            times.append(t * JSONL_TIME_S.get(layout, 1.0))
            seg_key = "hash_ids" if layout == "mooncake" else "prefix_segments"
            block = segment_tokens if layout == "mooncake" else 0
            segments.append(_segments_at(obj[seg_key], prompts[-1], block, path, where + repr(seg_key))
                            if seg_key in obj else ())
            client = obj.get("client_id")
            clients.append(None if client is None else str(client))
    if layout is None:
        raise FormatError(str(path), "no data rows")
    arrivals = np.asarray(times, dtype=np.float64)
    return ParsedTrace(layout, arrivals - arrivals.min(), np.asarray(prompts, dtype=np.int64),
                       np.asarray(outputs, dtype=np.int64), segments if any(segments) else None, segment_tokens,
                       clients if any(c is not None for c in clients) else None)


def read_trace_file(path: str | Path, *, segment_tokens: int = _MOONCAKE_BLOCK_TOKENS) -> ParsedTrace:
    """Parse a trace file, detecting CSV or JSON Lines from the first non-blank character.

    Args:
        path: the file.
        segment_tokens: tokens per prefix segment id (Mooncake: 512).

    Raises:
        FormatError: unreadable file, unknown layout, or a malformed row (the message names line and column/field).
    """
    p = Path(path)
    try:
        with p.open("rb") as f:
            head = f.read(4096).removeprefix(b"\xef\xbb\xbf").lstrip()  # past a byte-order mark
    except OSError as err:
        raise FormatError(str(p), f"cannot read trace file: {err.strerror or err}") from None
    if not head:
        raise FormatError(str(p), "file is empty")
    if head[:1] == b"[":
        raise FormatError(str(p), "a JSON array, not a trace: kvledger reads JSON Lines (one request object a line) "
                          "or CSV with token counts. A ShareGPT-style file holds conversation text, without token "
                          "counts or send times: count its tokens with your tokenizer into a JSONL of arrival_s, "
                          "num_prompt_tokens, num_output_tokens (`kvledger simulate --help`, --trace), or give "
                          "--prompt-lengths and --output-lengths with --rate for a synthetic load")
    try:
        return _read_jsonl(p, segment_tokens) if head[:1] == b"{" else _read_csv(p)
    except UnicodeDecodeError:
        raise FormatError(str(p), "not a UTF-8 text file") from None


def too_few_requests(label: str, available: int, count: int, where: str) -> InputError:
    """A trace with fewer requests than asked for: the count is --num-requests, or the command's default without it
    (cost, search and report probe 2,000 a run), so the flag is named with the most the trace holds."""
    fix = f"pass --num-requests {available:,} or fewer" if available else "give an earlier start or another trace"
    return InputError(f"trace {label!r} has {available:,} requests{where}; asked for {count:,} (--num-requests as "
                      f"given, or the command's default when it is not): {fix}")
