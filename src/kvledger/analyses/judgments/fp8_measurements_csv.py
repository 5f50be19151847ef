"""The bf16-vs-fp8 decode table of ``kvledger fp8-kv --calibration``: a CSV whose column names carry the rates' unit.

A decode rate is either per sequence (tok/s of one sequence, 1 / step time: what ``fit_fp8_overhead`` fits) or
aggregate (tok/s of the whole batch: what ``vllm bench serve`` reports as output token throughput, per sequence ×
batch). Read one as the other and the fit is off by the batch, so the columns must say which:

    context_tokens,batch,bf16_tok_per_s_per_seq,fp8_tok_per_s_per_seq
    context_tokens,batch,bf16_tok_per_s_aggregate,fp8_tok_per_s_aggregate    (divided by batch on reading)

``concurrency`` is read as ``batch`` (vllm bench's --max-concurrency). The unit-less ``bf16_tok_per_s`` is refused.
"""

from __future__ import annotations

from kvledger.analyses.judgments.fp8_calibration import Fp8Measurement
from kvledger.errors import FormatError, InputError

__all__ = ["UNIT_COLUMNS", "CALIBRATION_CSV_HELP", "read_fp8_measurements"]

UNIT_COLUMNS = {"per sequence": ("bf16_tok_per_s_per_seq", "fp8_tok_per_s_per_seq"),
                "aggregate": ("bf16_tok_per_s_aggregate", "fp8_tok_per_s_aggregate")}
"""The rate columns by unit: tok/s of one sequence, or of the whole batch (divided by batch on reading)."""

CALIBRATION_CSV_HELP = ("columns context_tokens, batch (or concurrency), then the decode rates with their unit in the "
                        "name: bf16_tok_per_s_per_seq,fp8_tok_per_s_per_seq (tok/s of one sequence) or "
                        "bf16_tok_per_s_aggregate,fp8_tok_per_s_aggregate (tok/s of the whole batch, what vllm bench "
                        "reports as output token throughput)")


def _columns(path: str, names: list[str]) -> tuple[str, str, str, str]:
    """(batch column, bf16 column, fp8 column, unit) of the header, or a FormatError saying what it needs."""
    batch = "batch" if "batch" in names else "concurrency" if "concurrency" in names else None
    units = [u for u, cols in UNIT_COLUMNS.items() if all(c in names for c in cols)]
    if "context_tokens" in names and batch and len(units) == 1:
        return (batch, *UNIT_COLUMNS[units[0]], units[0])
    if len(units) > 1:
        why = "has both per-sequence and aggregate rate columns: keep one pair"
    elif "bf16_tok_per_s" in names or "fp8_tok_per_s" in names:
        why = "bf16_tok_per_s / fp8_tok_per_s do not say whether the rates are per sequence or aggregate"
    else:
        why = f"columns {', '.join(names) or '(none)'} are not a bf16-vs-fp8 decode table"
    raise FormatError(path, f"{why}; need {CALIBRATION_CSV_HELP}", "line 1")


def read_fp8_measurements(path: str) -> list[Fp8Measurement]:
    """Read the CSV at ``path`` into per-sequence measurements (aggregate rates divided by their batch).

    Raises:
        FormatError: a missing file, a header without the unit's columns, or a value that is not a number (file and
            line named).
    """
    import csv
    from pathlib import Path

    from kvledger.names import check_name_or_path

    check_name_or_path(str(path), "--calibration")
    p = Path(path)
    if not p.is_file():
        raise FormatError(path, "no such file")
    with p.open(encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        batch_col, bf16_col, fp8_col, unit = _columns(path, [n.strip() for n in reader.fieldnames or []])
        out = []
        for i, row in enumerate(reader, start=2):
            row = {(k or "").strip(): v for k, v in row.items()}
            try:
                b = int(row[batch_col])
                div = b if unit == "aggregate" and b > 0 else 1
                out.append(Fp8Measurement(int(row["context_tokens"]), b, float(row[bf16_col]) / div,
                                          float(row[fp8_col]) / div))
            except (TypeError, ValueError) as err:
                raise FormatError(path, f"cannot read the row as numbers ({err})", f"line {i}") from None
            except InputError as err:
                raise FormatError(path, str(err), f"line {i}") from None
    return out
