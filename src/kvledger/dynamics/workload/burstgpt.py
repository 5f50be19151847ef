"""BurstGPT traces (HPMLL/BurstGPT; Wang et al., arXiv:2401.17644, 2024): Azure OpenAI GPT-3.5/GPT-4 traffic as CSV
with the header ``Timestamp, Model, Request tokens, Response tokens, Total tokens, Log Type`` (later releases add
``Session ID`` and ``Elapsed time``; only the three columns below are read; no sample is bundled).

``Timestamp`` is seconds from the trace's start. The dataset's README marks a failed request by ``Response tokens`` 0
(``BurstGPT_1.csv`` and ``_2.csv`` keep them; the ``_without_fails`` files drop them): such a row is skipped, as is a
row with ``Request tokens`` 0 (an empty prompt, which no engine serves), and the count of each is kept for the run's
note. Every other row is checked as any trace row (``trace_arrow.check_tokens``, ``check_times``).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kvledger.dynamics.workload.trace_arrow import MAX_TRACE_TOKENS, check_times, check_tokens
from kvledger.errors import FormatError

__all__ = ["BURSTGPT_COLUMNS", "BurstGPTTrace", "read_burstgpt"]

BURSTGPT_COLUMNS = ("Timestamp", "Request tokens", "Response tokens")


@dataclass(frozen=True, slots=True)
class BurstGPTTrace:
    """The served rows of a BurstGPT file, in file order, and what was skipped.

    Attributes:
        arrivals_s: arrival time, s after the earliest served row, shape ``(n,)``.
        prompt_tokens: ``Request tokens`` per served row, int64.
        output_tokens: ``Response tokens`` per served row, int64.
        failed_rows: rows skipped for ``Response tokens`` 0 (failed requests), count.
        empty_prompt_rows: rows skipped for ``Request tokens`` 0 (and a response), count.
        note: one sentence on the skipped rows for the run's notes, or None when none were.
    """

    arrivals_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    failed_rows: int
    empty_prompt_rows: int
    note: str | None


def _columns_arrow(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(times, request tokens, response tokens) in one pyarrow read, or None (the row reader names the bad cell)."""
    try:
        import pyarrow as pa
        from pyarrow import csv as pcsv
    except ImportError:
        return None
    types = dict(zip(BURSTGPT_COLUMNS, (pa.float64(), pa.int64(), pa.int64())))
    try:
        table = pcsv.read_csv(str(path), convert_options=pcsv.ConvertOptions(
            column_types=types, include_columns=list(BURSTGPT_COLUMNS), strings_can_be_null=True))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    if table.num_rows == 0 or any(table.column(c).null_count for c in BURSTGPT_COLUMNS):
        return None
    return tuple(table.column(c).to_numpy() for c in BURSTGPT_COLUMNS)  # type: ignore[return-value]


def _columns_rows(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The same columns row by row: a cell that is not a number is a FormatError naming its line and column."""
    out: tuple[list[float], list[int], list[int]] = ([], [], [])
    with path.open(newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f)
        for row in reader:
            for col, values, kind in zip(BURSTGPT_COLUMNS, out, (float, int, int)):
                cell = row.get(col)
                try:
                    values.append(kind(cell))  # type: ignore[arg-type]
                except (TypeError, ValueError, OverflowError):
                    what = "a number of seconds" if kind is float else "a whole number of tokens"
                    raise FormatError(str(path), f"{cell!r} is not {what}",
                                      f"line {reader.line_num}, column {col!r}") from None
    if not out[0]:
        raise FormatError(str(path), "no data rows")
    return np.asarray(out[0], dtype=np.float64), np.asarray(out[1], dtype=np.int64), np.asarray(out[2], dtype=np.int64)


def read_burstgpt(path: str | Path) -> BurstGPTTrace:
    """Read a BurstGPT CSV: its served rows (failed and empty-prompt rows skipped and counted).

    Raises:
        FormatError: a cell that is not a number, a negative or non-finite time, a token count out of range on a
            served row, or no served row at all (each names file, line and column where there is one).
    """
    p = Path(path)
    cols = _columns_arrow(p)
    times, prompts, outputs = cols if cols is not None else _columns_rows(p)
    failed = outputs == 0
    empty = (prompts == 0) & ~failed
    keep = ~(failed | empty)
    lines = np.flatnonzero(keep) + 2  # file line of each served row (line 1: the header)
    check_times(times, str(p), BURSTGPT_COLUMNS[0], 2)
    for col, values in zip(BURSTGPT_COLUMNS[1:], (prompts[keep], outputs[keep])):
        bad = np.flatnonzero((values < 1) | (values > MAX_TRACE_TOKENS))
        if len(bad):  # the first bad served row, named by its file line
            check_tokens(values[bad[:1]], str(p), col, int(lines[bad[0]]))
    n_failed, n_empty = int(failed.sum()), int(empty.sum())
    if not keep.any():
        raise FormatError(str(p), f"no row to serve: {n_failed:,} rows have Response tokens 0 (BurstGPT's failed "
                          f"requests) and {n_empty:,} Request tokens 0")
    t = times[keep]
    note = None
    if n_failed or n_empty:
        note = (f"{p.name}: {n_failed + n_empty:,} of {len(keep):,} BurstGPT rows skipped ({n_failed:,} with Response "
                f"tokens 0, failed requests as the BurstGPT README marks them; {n_empty:,} with Request tokens 0, an "
                f"empty prompt); the other {int(keep.sum()):,} replayed, as the _without_fails files hold them")
    return BurstGPTTrace(t - t.min(), prompts[keep].astype(np.int64), outputs[keep].astype(np.int64), n_failed,
                         n_empty, note)
