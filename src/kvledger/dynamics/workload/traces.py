"""Request traces: the bundled real traces by name, user trace files by path, and replay with rate scaling.

Bundled traces (package data under ``kvledger/dynamics/workload/data/traces/``, provenance and licences in
``SOURCES.md`` there) need no download. ``load_trace`` turns any of them, or a user CSV/JSONL file in
one of the layouts of :mod:`kvledger.dynamics.workload.trace_formats`, into ``RequestSpec`` objects.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from kvledger.dynamics.engine.request import MAX_ARRIVAL_S, RequestSpec
from kvledger.dynamics.workload.arrivals import arrival_times
from kvledger.dynamics.workload.columns import WorkloadColumns
from kvledger.dynamics.workload.trace_formats import ParsedTrace, read_trace_file, too_few_requests
from kvledger.errors import InputError, UnknownNameError
from kvledger.jsonable import to_jsonable
from kvledger.names import check_name_or_path

__all__ = ["TraceInfo", "list_traces", "load_trace", "load_trace_columns", "trace_has_arrivals", "bundled_trace_path",
           "trace_note", "trace_longest_request", "check_trace"]


@dataclass(frozen=True, slots=True)
class TraceInfo:
    """A bundled trace, as ``kvledger`` lists it.

    Attributes:
        name: the name ``load_trace`` accepts.
        description: what the trace holds, with its headline figures (computed from the file).
        source: repository, path and citation.
        licence: the data licence.
        rows: requests in the file.
        file: path below ``kvledger/dynamics/workload/data/traces/``.
        has_arrivals: False when the file has lengths only (replay needs a rate and a seed).
        has_prefix_ids: True when rows carry prefix block ids (Mooncake ``hash_ids``).
        tokenizer: whose tokens the lengths count.
    """

    name: str
    description: str
    source: str
    licence: str
    rows: int
    file: str
    has_arrivals: bool = True
    has_prefix_ids: bool = False
    tokenizer: str = ""

    def to_dict(self) -> dict[str, object]:
        """Plain JSON-ready dict."""
        return to_jsonable(self)


_AZURE_SRC = "Azure/AzurePublicDataset data/{0} (Patel et al., Splitwise, ISCA 2024)"
_MOONCAKE_SRC = "kvcache-ai/Mooncake FAST25-release/traces/{0} (Qin et al., Mooncake, FAST 2025)"
_BUNDLED: dict[str, TraceInfo] = {t.name: t for t in (
    TraceInfo("azure-conv", "Azure LLM inference 2023, conversation: 19,366 requests in 58 min (5.53 req/s), "
              "near-Poisson (gap CV 1.09); prompt mean 1,155 / output mean 211 tokens",
              _AZURE_SRC.format("AzureLLMInferenceTrace_conv.csv"), "CC-BY-4.0", 19366,
              "azure_llm_2023/AzureLLMInferenceTrace_conv.csv", tokenizer="GPT (OpenAI)"),
    TraceInfo("azure-code", "Azure LLM inference 2023, code: 8,819 requests in 57 min (2.57 req/s), very bursty "
              "(gap CV 13); prompt mean 2,048 / output mean 28 tokens",
              _AZURE_SRC.format("AzureLLMInferenceTrace_code.csv"), "CC-BY-4.0", 8819,
              "azure_llm_2023/AzureLLMInferenceTrace_code.csv", tokenizer="GPT (OpenAI)"),
    TraceInfo("mooncake", "Mooncake (Kimi) conversation: 12,031 requests in 59 min (3.40 req/s, times on ~3 s steps); "
              "prompt mean 12,035 / output mean 343 tokens; 512-token prefix block ids (37% of prompt tokens "
              "reusable with an unbounded cache)", _MOONCAKE_SRC.format("conversation_trace.jsonl"), "Apache-2.0",
              12031, "mooncake_fast25/conversation_trace.jsonl", has_prefix_ids=True, tokenizer="Kimi"),
    TraceInfo("mooncake-synthetic", "Mooncake synthetic multi-turn: 3,993 requests in 17 min (3.91 req/s, Poisson); "
              "prompt mean 15,325 / output mean 149 tokens; 512-token prefix block ids (65% reusable)",
              _MOONCAKE_SRC.format("synthetic_trace.jsonl"), "Apache-2.0", 3993,
              "mooncake_fast25/synthetic_trace.jsonl", has_prefix_ids=True, tokenizer="Kimi"),
    TraceInfo("arxiv", "arXiv summarization lengths as Vidur uses them: 28,257 requests, prompt mean 2,588 / output "
              "mean 291 tokens; no arrival times (give a rate and a seed for Poisson arrivals)",
              "microsoft/vidur data/processed_traces/arxiv_summarization_stats_llama2_tokenizer_filtered_v2.csv "
              "(Agrawal et al., Vidur, MLSys 2024)", "MIT", 28257,
              "vidur_processed/arxiv_summarization_stats_llama2_tokenizer_filtered_v2.csv", has_arrivals=False,
              tokenizer="Llama-2"),
)}


def list_traces() -> list[TraceInfo]:
    """The bundled traces, in a fixed order (for ``kvledger`` listings)."""
    return list(_BUNDLED.values())


def bundled_trace_path(name: str) -> Path:
    """Filesystem path of a bundled trace file. Raises UnknownNameError for an unknown name."""
    info = _BUNDLED.get(name.lower())
    if info is None:
        raise UnknownNameError("trace", name, _BUNDLED)
    return Path(str(resources.files("kvledger.dynamics.workload") / "data" / "traces" / info.file))


def _resolve(name_or_path: str | Path) -> tuple[str, Path]:
    """(label used in request ids, file path)."""
    key = str(name_or_path)
    check_name_or_path(key, "trace")
    if key.lower() in _BUNDLED:
        return key.lower(), bundled_trace_path(key)
    path = Path(key).expanduser()
    if path.is_file():
        return path.stem, path
    if path.is_dir():
        raise InputError(f"trace {key!r} is a directory; give a CSV or JSONL trace file")
    if path.suffix or "/" in key or "\\" in key:
        raise InputError(f"trace file {key!r} not found")
    raise UnknownNameError("trace", key, _BUNDLED, hint=f"The bundled traces: {', '.join(sorted(_BUNDLED))}; or "
                                                        "give the path of a CSV/JSONL trace file.")


@functools.lru_cache(maxsize=8)
def _parse_cached(path: str, mtime_ns: int, segment_tokens: int) -> ParsedTrace:
    parsed = read_trace_file(path, segment_tokens=segment_tokens)
    for arr in (parsed.arrivals_s, parsed.prompt_tokens, parsed.output_tokens):
        if arr is not None:
            arr.setflags(write=False)
    return parsed


def _parse(path: Path, segment_tokens: int) -> ParsedTrace:
    return _parse_cached(str(path), path.stat().st_mtime_ns, segment_tokens)


def check_trace(name_or_path: str | Path) -> None:
    """Refuse (InputError) a ``--trace`` that is no bundled trace and no file, unread: called before any planning."""
    _resolve(name_or_path)


def trace_has_arrivals(name_or_path: str | Path) -> bool:
    """Whether the trace carries arrival times (bundled: from the registry; files: by parsing)."""
    key = str(name_or_path).lower()
    if key in _BUNDLED:
        return _BUNDLED[key].has_arrivals
    return _parse(_resolve(name_or_path)[1], 512).arrivals_s is not None


def require_arrivals(name_or_path: str | Path, why: str, instead: str = "") -> None:
    """Refuse a trace without arrival times where the load is its own arrivals scaled: ``why`` says what needs them,
    ``instead`` (a clause from "; ") what else works there; the bundled traces that have them are listed."""
    if not trace_has_arrivals(name_or_path):
        timed = ", ".join(t.name for t in _BUNDLED.values() if t.has_arrivals)
        raise InputError(f"trace {str(name_or_path)!r} has request lengths but no arrival times, and {why}; pick one "
                         f"with arrival times: {timed}{instead}")


def trace_longest_request(name_or_path: str | Path) -> int:
    """The trace's longest request over every row of the file, prompt + output tokens (the max_model_len that serves
    each whole)."""
    p = _parse(_resolve(name_or_path)[1], 512)
    return int((p.prompt_tokens + p.output_tokens).max()) if len(p.prompt_tokens) else 0


def trace_note(name_or_path: str | Path) -> str | None:
    """What the file's reader left out, as a sentence for the run's notes (BurstGPT's failed rows), or None."""
    if str(name_or_path).lower() in _BUNDLED:
        return None
    return _parse(_resolve(name_or_path)[1], 512).note


def _check_args(num_requests: int | None, rate: float | None, rate_scale: float | None, start_s: float) -> None:
    if num_requests is not None and num_requests < 1:
        raise InputError(f"num_requests must be ≥ 1, got {num_requests}")
    if rate is not None and not rate > 0:
        raise InputError(f"rate must be > 0 req/s, got {rate}")
    if rate_scale is not None and not (rate_scale > 0 and math.isfinite(rate_scale)):
        raise InputError(f"rate_scale must be a finite number > 0, got {rate_scale}")
    if rate is not None and rate_scale is not None:
        raise InputError("give either --rate (a target mean rate, req/s) or --rate-scale (a multiplier), not both")
    if not (start_s >= 0 and math.isfinite(start_s)):
        raise InputError(f"start_s must be ≥ 0 s, got {start_s}")


def _replayed_times(label: str, t_sorted: np.ndarray, num_requests: int | None, rate: float | None,
                    rate_scale: float | None, start_s: float) -> tuple[int, int, np.ndarray]:
    """(first index, count, new arrival times) of the replayed window."""
    first = int(np.searchsorted(t_sorted, start_s, side="left"))
    available = len(t_sorted) - first
    count = available if num_requests is None else num_requests
    if count > available or available == 0:
        raise too_few_requests(label, available, count, f" at or after start_s={start_s:g} s")
    t = t_sorted[first:first + count]
    if start_s != 0.0:  # t − 0.0 is t: without an offset the times are the sorted column's own (no copy)
        t = t - start_s
    if rate is not None:
        span = float(t[-1] - t[0])
        if count < 2 or span <= 0:
            raise InputError(f"trace {label!r}: cannot set a mean rate for {count} request(s) spanning {span:g} s")
        # mean inter-arrival gap becomes 1/rate: every time (relative to start_s) is scaled by the same factor
        t = t * ((1.0 / rate) / (span / (count - 1))) if math.isfinite(rate) else np.zeros_like(t)
    elif rate_scale is not None:
        t = t / rate_scale
    if (rate is not None or rate_scale is not None) and len(t) and float(t[-1]) > MAX_ARRIVAL_S:
        name, how = ("rate", f"rate {rate:g} req/s") if rate is not None else ("rate_scale", f"rate_scale "
            f"{rate_scale:g}")
        raise InputError(f"trace {label!r}: {how} puts the last of {count:,} arrivals at {float(t[-1]):.4g} s, past "
                         f"the simulator's {MAX_ARRIVAL_S:g} s (about 31.7 years; float64 times lose step resolution "
                         f"beyond); give a larger {name}")
    return first, count, t


def load_trace(
    name_or_path: str | Path, *, num_requests: int | None = None, rate: float | None = None,
    rate_scale: float | None = None, start_s: float = 0.0, seed: int | np.random.Generator | None = None,
    segment_tokens: int = 512,
) -> list[RequestSpec]:
    """Requests of a bundled trace (``azure-conv``, ``azure-code``, ``mooncake``, ``mooncake-synthetic``,
    ``arxiv``) or of a CSV/JSONL file, in arrival order (ties keep file order).

    Args:
        name_or_path: bundled name (case-insensitive) or a file path.
        num_requests: replay only the first N requests at or after ``start_s`` (default: all).
        rate: target mean arrival rate, req/s, defined as 1 / mean inter-arrival gap of the replayed
            requests; every gap is scaled by the same factor, so burstiness (gap CV) is kept. For a trace
            without arrival times it is the Poisson rate (``inf``: everything at t = 0).
        rate_scale: multiply the trace's own rate by this factor (gaps divided by it).
        start_s: offset into the trace, s after its first arrival; requests before it are skipped and
            times are re-based so ``start_s`` becomes t = 0.
        seed: int or numpy Generator; required for Poisson arrivals of a lengths-only trace.
        segment_tokens: tokens per prefix block id in JSONL ``hash_ids`` (Mooncake: 512).

    Returns:
        ``RequestSpec`` list; ids are ``f"{name}-{row}"`` with ``row`` the 0-based data row in the file.
        Mooncake rows carry ``prefix_segments = hash_ids`` and ``segment_tokens = 512``.

    Raises:
        UnknownNameError: unknown bundled name. InputError: bad arguments or missing file.
        FormatError: malformed file (names file, line and column/field).
    """
    return _specs(*_select(name_or_path, num_requests, rate, rate_scale, start_s, seed, segment_tokens))


def load_trace_columns(
    name_or_path: str | Path, *, num_requests: int | None = None, rate: float | None = None,
    rate_scale: float | None = None, start_s: float = 0.0, seed: int | np.random.Generator | None = None,
) -> WorkloadColumns | None:
    """``load_trace``'s requests as a :class:`WorkloadColumns` (same ids, times and lengths, 24 bytes a request),
    or None when the trace has prefix segments or client ids (use ``load_trace`` then). Same arguments and errors."""
    label, parsed, rows, times = _select(name_or_path, num_requests, rate, rate_scale, start_s, seed, 512)
    if parsed.segments is not None or parsed.client_ids is not None:
        return None
    n = len(rows)
    if n and rows[0] == 0 and rows[-1] == n - 1 and (n < 2 or bool((np.diff(rows) == 1).all())):
        # the file's first n rows in file order (a sorted trace): the parsed columns' leading part, not copies, and
        # ids by row number (id_rows None gives the same ids, "label-i")
        return WorkloadColumns(times, parsed.prompt_tokens[:n], parsed.output_tokens[:n], f"{label}-")
    return WorkloadColumns(times, parsed.prompt_tokens[rows], parsed.output_tokens[rows], f"{label}-", rows)


def _select(name_or_path, num_requests, rate, rate_scale, start_s, seed, segment_tokens):
    """(label, parsed trace, file rows replayed, their arrival times) for ``load_trace``'s arguments."""
    _check_args(num_requests, rate, rate_scale, start_s)
    label, path = _resolve(name_or_path)
    parsed = _parse(path, segment_tokens)
    n_rows = len(parsed.prompt_tokens)
    if parsed.arrivals_s is None:
        if rate is None or rate_scale is not None or start_s != 0.0:
            extra = ("; --rate-scale scales a trace's own arrival times, so it does not apply" if rate_scale is not None
                     else "; a start offset does not apply" if start_s != 0.0 else "")
            raise InputError(f"trace {label!r} has no arrival times (only lengths): give --rate R (req/s) for Poisson "
                             "arrivals drawn with --seed S (default 0), --rate inf to send every request at t = 0, or "
                             f"--concurrency N for a closed loop{extra} (Python: load_trace(..., rate=R, seed=S))")
        count = n_rows if num_requests is None else num_requests
        if count > n_rows:
            raise too_few_requests(label, n_rows, count, "")
        if seed is None and math.isfinite(rate):
            raise InputError(f"trace {label!r}: Poisson arrivals need an explicit seed (--seed on the command line; "
                             f"seed=0 in Python)")
        rows = np.arange(count)
        times = arrival_times(count, rate, seed=0 if seed is None else seed)
    else:
        t = parsed.arrivals_s
        if len(t) < 2 or bool((t[1:] >= t[:-1]).all()):  # in order already: no sort, no sorted copy
            first, count, times = _replayed_times(label, t, num_requests, rate, rate_scale, start_s)
            rows = np.arange(first, first + count)
        else:
            order = np.argsort(t, kind="stable")
            first, count, times = _replayed_times(label, t[order], num_requests, rate, rate_scale, start_s)
            rows = order[first:first + count]
    return label, parsed, rows, times


def _specs(label: str, parsed: ParsedTrace, rows: np.ndarray, times: np.ndarray) -> list[RequestSpec]:
    prompts, outputs = parsed.prompt_tokens.tolist(), parsed.output_tokens.tolist()
    segs, clients = parsed.segments, parsed.client_ids
    out = []
    for row, t in zip(rows.tolist(), times.tolist()):
        out.append(RequestSpec(
            f"{label}-{row}", t, prompts[row], outputs[row],
            segs[row] if segs is not None else (), parsed.segment_tokens,
            clients[row] if clients is not None else None,
        ))
    return out
