"""Loading benchmark files (JSON, JSON Lines, CSV) and checking their numbers, with errors that name file, line and
field.

Every reader goes through :func:`load_document` and the small validators here, so an
empty file, broken JSON, a NaN or a negative latency is reported the same way
everywhere: a :class:`~kvledger.errors.FormatError` naming the file, the line or
column when known, and the field (``ttfts[17]``, ``line 3: metrics.ttft.value``).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvledger.errors import FormatError
from kvledger.evidence.jsonl_cut import line_cut_off
from kvledger.evidence.prometheus_text import scrape_summary

__all__ = ["Document", "load_document", "number", "amount", "positive", "percentile", "latency_s", "count",
           "TIME_UNITS_S", "to_seconds", "top_keys", "looks_like_log", "yaml_docs"]

COUNT_MAX = 1 << 40  # tokens or requests in one run: far beyond any real benchmark, far inside float64's exact integers
AMOUNT_MAX = 1e15
# about 300 years: Unix-epoch timestamps (1.7e9 s) pass, 1e308 does not  # rates, means and totals (tokens, requests,
# req/s, tok/s)
LATENCY_MAX_S = 1e10
# Seconds per unit for every time unit the supported tools write ("sec" is AIPerf's spelling).
TIME_UNITS_S: dict[str, float] = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0, "seconds": 1.0}


@dataclass(slots=True)
class Document:
    """A parsed input file.

    Attributes:
        path: the file, as the user gave it (used in every error message).
        kind: "json" (one value), "jsonl" (one value per non-empty line), "csv" (raw text), "yaml" (a YAML
            mapping or list: no reader takes it, but the "unknown format" message can show its keys) or
            "text" (anything else: Markdown, logs, prose).
        value: the JSON value (json), the list of line values (jsonl), the parsed YAML (yaml) or the text (csv, text).
        line_numbers: for jsonl, the 1-based file line of each value.
    """

    path: str
    kind: str
    value: Any
    line_numbers: list[int] | None = None


def load_document(path: str | Path) -> Document:
    """Read ``path`` as JSON, JSON Lines (e.g. vLLM ``--append-result``, SGLang, AIPerf) or CSV; YAML and other text are
    returned as such, for :func:`kvledger.evidence.detect.detect_format` to name as an unknown format.

    Raises:
        FormatError: missing or unreadable file, a directory, an empty file, or text that starts like JSON
            but is broken (the JSON error's line and column are given).
    """
    p = Path(path)
    name = str(path) if len(str(path)) <= 200 else str(path)[:120] + f"… ({len(str(path)):,} characters)"
    try:
        if p.is_dir():
            if (p / "records.parquet").is_file():
                raise FormatError(name, f"is a `kvledger simulate --out` directory; pass its records file, "
                                        f"{p / 'records.parquet'}")
            from kvledger.evidence.run_folder import folder_problem

            raise FormatError(name, folder_problem(p))  # what the folder lacks, or the run folders under it
        text = p.read_text(encoding="utf-8").removeprefix("\ufeff")  # a byte-order mark (Windows editors, Excel)
    except FileNotFoundError:
        raise FormatError(name, "no such file") from None
    except UnicodeDecodeError as err:
        raise FormatError(name, f"cannot read the file: {err}") from None
    except OSError as err:  # a name longer than the file system allows, a permission, a device
        raise FormatError(name, f"cannot read the file: {err.strerror or err}") from None
    if not text.strip():
        raise FormatError(name, "the file is empty; a benchmark run writes at least one JSON object")
    try:
        return Document(name, "json", json.loads(text))
    except json.JSONDecodeError as err:
        first_err = err
    except RecursionError:
        raise FormatError(name, "JSON nested too deeply to be a benchmark output") from None
    if looks_like_log(text) or scrape_summary(text):  # a log or /metrics scrape is text, whatever CSV it parses as
        return Document(name, "text", text)
    if first_err.msg == "Extra data" or _first_line_is_json(text):
        values, lines = [], []
        all_lines = text.splitlines()
        for lineno, line in enumerate(all_lines, start=1):
            if not line.strip():
                continue
            try:
                values.append(json.loads(line))
            except RecursionError:
                raise FormatError(name, "JSON nested too deeply to be a benchmark output", f"line {lineno}") from None
            except json.JSONDecodeError as err:
                raise FormatError(name, f"not valid JSON Lines: {err.msg}{line_cut_off(all_lines, lineno)}",
                                  f"line {lineno}, column {err.colno}") from None
            lines.append(lineno)
        return Document(name, "jsonl", values, lines)
    if text.lstrip().startswith(("[", "{")):  # meant as JSON, but broken
        raise FormatError(name, f"not valid JSON: {first_err.msg}{_cut_off(text, first_err)}",
                          f"line {first_err.lineno}, column {first_err.colno}")
    yaml_value = _yaml_mapping(text)
    if yaml_value is not None:
        return Document(name, "yaml", yaml_value)
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if "," in lines[0] and not lines[0].lstrip().startswith("#") and (len(lines) == 1 or "," in lines[1]):
        return Document(name, "csv", text)  # a header row and a data row with commas (a Markdown heading is not one)
    return Document(name, "text", text)


# a log record as vLLM prints it (Python logging): level, month-day, time, then [source.py:line] (source.py:line] before
# 0.8)
_LOG_LINE = re.compile(r"\b(?:DEBUG|INFO|WARNING|ERROR)\s+\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?\s+\[?[^\]\s]+\.py:\d+\]")


def looks_like_log(text: str) -> bool:
    """Whether the text's first 20,000 characters hold a log record as vLLM prints it."""
    return _LOG_LINE.search(text[:20_000]) is not None


def yaml_docs(path: Path) -> list[Any]:
    """The YAML documents of an optional sidecar file (a client config, Kubernetes manifests); an absent, unreadable
    or broken one gives [] (it only adds metadata)."""
    import yaml

    if not path.is_file():
        return []
    try:
        return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8-sig")) if d is not None]
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return []


def _yaml_mapping(text: str) -> Any:
    """The YAML mapping or list the text holds (a config or a benchmark report in YAML), else None (prose, a CSV, a
    scalar)."""
    import yaml

    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError:
        return None
    if not docs or not all(isinstance(d, (dict, list)) for d in docs):
        return None
    return docs[0] if len(docs) == 1 else docs


def _cut_off(text: str, err: json.JSONDecodeError) -> str:
    """"; it looks cut off …" when the JSON stops before its end (a file truncated by a full disk, a killed writer, a
    partial copy: it does not end with a closing bracket, or the error is at its very end), what a trailing comma
    before a closing bracket is, else ""."""
    if text[err.pos:].lstrip().startswith(("}", "]")) and text[:err.pos].rstrip().endswith(","):
        return "; a comma stands before a closing bracket there (a trailing comma, which JSON does not allow)"
    if text.rstrip().endswith(("}", "]")) and text[err.pos:].strip():
        return ""
    return (f"; the file ends at character {len(text):,} before its JSON closes (the error at character {err.pos:,}), "
            "so it looks cut off: the writer stopped or the copy is partial")


def _first_line_is_json(text: str) -> bool:
    """True when the first non-empty line is a complete JSON object (a JSON Lines file with a later bad line)."""
    line = next((ln for ln in text.splitlines() if ln.strip()), "")
    try:
        return isinstance(json.loads(line), dict)
    except json.JSONDecodeError:
        return False


def number(doc_path: str, value: Any, where: str, *, allow_none: bool = False) -> float | None:
    """``value`` as a finite float; None passes only when ``allow_none``.

    Raises:
        FormatError: a non-number, NaN or infinity, naming ``where`` (the field path).
    """
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise FormatError(doc_path, f"expected a number, found {_short(value)}", where)
    try:
        x = float(value)
    except ValueError:
        raise FormatError(doc_path, f"expected a number, found {_short(value)}", where) from None
    except OverflowError:  # an integer with hundreds of digits
        raise FormatError(doc_path, f"{_short(value)} is beyond any meaningful value (not representable as a float)",
                          where) from None
    if not math.isfinite(x):
        raise FormatError(doc_path, f"{value!r} is not a finite number (NaN or infinity); the benchmark output is "
                                    f"damaged", where)
    return x


def amount(doc_path: str, value: Any, where: str, *, allow_none: bool = False, hi: float = AMOUNT_MAX) -> float | None:
    """A finite quantity that cannot be negative (a mean length, a throughput, a rate, a total), at most ``hi``.

    Raises:
        FormatError: non-number, NaN/inf, a negative value or one above ``hi``, naming ``where``.
    """
    x = number(doc_path, value, where, allow_none=allow_none)
    if x is not None and x < 0:
        raise FormatError(doc_path, f"{_short(value)} is negative; this quantity is ≥ 0 (damaged file)", where)
    if x is not None and x > hi:
        raise FormatError(doc_path, f"{_short(value)} is beyond any real run (at most {hi:g})", where)
    return x


def positive(doc_path: str, value: Any, where: str, *, allow_none: bool = False) -> float | None:
    """A finite quantity that must be > 0 because it divides (a completion rate, a requests-per-second figure).

    Raises:
        FormatError: non-number, NaN/inf, zero or a negative value, naming ``where``.
    """
    x = number(doc_path, value, where, allow_none=allow_none)
    if x is not None and not x > 0:
        raise FormatError(doc_path, f"{value!r} must be > 0 (it is divided by); damaged file", where)
    return x


def percentile(doc_path: str, text: str, where: str) -> float:
    """A percentile named in a key ("99", "99.9") as a number in [0, 100].

    Raises:
        FormatError: a percentile outside [0, 100] (e.g. a damaged key "p9999"), naming ``where``.
    """
    p = float(text)
    if not 0.0 <= p <= 100.0:
        raise FormatError(doc_path, f"percentile {_short(text)} is not in [0, 100]", where)
    return p


def latency_s(doc_path: str, value: Any, where: str, scale_s: float = 1.0, *, allow_none: bool = False) -> float | None:
    """A latency or timestamp offset converted to seconds (``value × scale_s``); must be finite and ≥ 0.

    Raises:
        FormatError: non-number, NaN/inf, or a negative latency, naming ``where``.
    """
    x = number(doc_path, value, where, allow_none=allow_none)
    if x is None:
        return None
    if x < 0:
        raise FormatError(doc_path, f"negative latency {_short(value)}; latencies cannot be negative (clock error or "
                                    f"damaged file)", where)
    if x * scale_s > LATENCY_MAX_S:
        raise FormatError(doc_path, f"{_short(value)} is beyond any real run (latencies and timestamps up to "
                                    f"{LATENCY_MAX_S:g} s)", where)
    return x * scale_s


def count(doc_path: str, value: Any, where: str, *, allow_none: bool = False) -> int | None:
    """A non-negative integer count (token counts, request counts); integral floats such as 550.0 are accepted.

    Raises:
        FormatError: non-number, NaN, fractional or negative value, naming ``where``.
    """
    x = number(doc_path, value, where, allow_none=allow_none)
    if x is None:
        return None
    if x < 0 or x != int(x) or x > COUNT_MAX:
        raise FormatError(doc_path, f"expected a non-negative whole count up to 2^40, found {_short(value)}", where)
    return int(x)


def _short(value: Any) -> str:
    """``repr(value)``, cut to 80 characters (a 5,000-digit number or a long string stays readable in the message)."""
    text = repr(value)
    return text if len(text) <= 80 else text[:60] + f"… ({len(text):,} characters)"


def to_seconds(doc_path: str, unit: Any, where: str) -> float:
    """Seconds per ``unit`` for a time unit string ("ns", "ms", "sec", ...).

    Raises:
        FormatError: an unknown or missing unit, naming ``where``.
    """
    key = str(unit).strip().lower() if unit is not None else ""
    if key not in TIME_UNITS_S:
        raise FormatError(doc_path, f"unknown time unit {unit!r}; expected one of {', '.join(TIME_UNITS_S)}", where)
    return TIME_UNITS_S[key]


def top_keys(value: Any, limit: int = 25) -> list[str]:
    """The top-level keys a file shows (for "unknown format" messages): dict keys, or keys of its first element."""
    if isinstance(value, dict):
        keys = list(value)
    elif isinstance(value, list) and value and isinstance(value[0], dict):
        keys = [f"[0].{k}" for k in value[0]]
    elif isinstance(value, list):
        keys = [f"<list of {len(value)} {type(value[0]).__name__ if value else 'items'}>"]
    else:
        keys = [f"<{type(value).__name__}>"]
    return keys[:limit] + ([f"... {len(keys) - limit} more"] if len(keys) > limit else [])
