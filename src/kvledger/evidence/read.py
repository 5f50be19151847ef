"""The public entry points: ``read_runs`` (every run a file holds) and ``read_run`` (exactly one).

API decision: a file can hold several runs (vLLM ``--append-result`` and SGLang JSON
Lines, one per line; GuideLLM ``benchmarks[]``; GenAI-Perf ``experiments[]``;
inference-perf per-request files, one per stage), and a run is either per-request
(:class:`~kvledger.records.RunRecords`) or aggregate-only
(:class:`~kvledger.evidence.aggregate.AggregateRun`). So :func:`read_runs` always returns
a list of ``RunRecords | AggregateRun`` in file order, and :func:`read_run` returns the
single run of a one-run file and refuses files with several (naming how many).

Keys readers put in ``RunMetadata.extra`` (besides tool fields kept verbatim):
``run_label`` (which part of a multi-run file: "line 2", "stage 3", "benchmark 0 (...)");
``tool_goodput`` (goodput the tool itself reported, with its field name; the SLO it used
is not in the file); ``shared_clock`` = False (requests have no common clock, so the
duration must be stated: llmperf); ``sample_weights`` = {"ok": w, "failed": w} (the file
kept a sample of the requests: GuideLLM ``sample_size``); ``summary_file``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kvledger.errors import FormatError, UnknownNameError
from kvledger.evidence import (
    aiperf,
    genai_perf,
    guidellm,
    inference_perf,
    kvledger_records,
    llmperf,
    sglang_bench,
    together_runner,
    vllm_bench,
)
from kvledger.evidence._io import Document, load_document
from kvledger.evidence.aggregate import AggregateRun, check_summary
from kvledger.evidence.detect import detect_format
from kvledger.evidence.plausibility import check_run
from kvledger.evidence.records_parquet import is_parquet, read_parquet
from kvledger.records import RunRecords

__all__ = ["Run", "READERS", "read_runs", "read_run"]

Run = RunRecords | AggregateRun

#: format name → reader (a small function of the loaded document); the keys equal FORMAT_DESCRIPTIONS'.
READERS: dict[str, Callable[[Document], list[Run]]] = {
    "vllm-bench-serve": vllm_bench.read,
    "sglang-bench-serving": sglang_bench.read,
    "aiperf-jsonl": aiperf.read_jsonl,
    "aiperf-json": aiperf.read_json,
    "aiperf-csv": aiperf.read_csv,
    "genai-perf-raw": genai_perf.read_raw,
    "genai-perf-json": genai_perf.read_json,
    "guidellm": guidellm.read,
    "llmperf-individual": llmperf.read_individual,
    "llmperf-summary": llmperf.read_summary,
    "inference-perf-lifecycle": inference_perf.read_lifecycle,
    "inference-perf-per-request": inference_perf.read_per_request,
    "inferencex-together-runner": together_runner.read,
    "kvledger-records": kvledger_records.read,
}

_SHAPES = {  # what each reader needs the loaded document to be
    "aiperf-jsonl": ("jsonl",), "aiperf-csv": ("csv",),
    "vllm-bench-serve": ("json", "jsonl", "json-list"), "sglang-bench-serving": ("json", "jsonl", "json-list"),
    "llmperf-individual": ("json-list",), "inference-perf-per-request": ("json-list",),
}


def read_runs(path: str | Path, *, format: str | None = None, aggregate_samples: bool = False) -> list[Run]:
    """Every run in a benchmark output or kvledger records file, in file order.

    Args:
        path: the file, or a ``kvledger simulate --out`` folder (its records.parquet is read).
        format: a name from ``READERS`` to skip auto-detection; None detects by key signature.
        aggregate_samples: a run whose file keeps only a sample of its requests (GuideLLM ``--output-sampling``) as an
            ``AggregateRun`` (for a replay, which needs the run's load) rather than its sampled requests.

    Returns:
        ``RunRecords`` for runs with per-request data, ``AggregateRun`` for aggregate-only runs.

    Raises:
        FormatError: unreadable, empty or unknown file (known formats and keys seen are listed),
            a file of another shape than ``format`` needs, or damaged values (file, line, field named).
        UnknownNameError: ``format`` is not a known format name.
    """
    if format is not None and format not in READERS:
        raise UnknownNameError("benchmark format", format, READERS, hint="(see kvledger goodput --help for the list)")
    runs = _read(path, format, aggregate_samples)
    for run in runs:
        _check_metadata(run.metadata)
        check_run(run)  # latencies longer than the run, a duration shorter than its timeline, impossible TPOT
        if isinstance(run, AggregateRun):  # every reader's summaries, as inference-perf's are checked as read
            label = run.metadata.extra.get("run_label")
            for name, m in run.metrics.items():
                check_summary(run.metadata.source, m, f"{label + ': ' if label else ''}{name} "
                                                      f"({m.source_field or 'summary'})")
    return runs


# the stated load of a run: a request rate in (0, 10^9] req/s or inf, a concurrency and a GPU count in [1, 10^9]
_RATE_MAX = 1e9


def _check_metadata(meta: Any) -> None:
    """FormatError for a stated request rate, concurrency or GPU count outside what a benchmark can have."""
    r = meta.request_rate
    if r is not None and not (r == math.inf or (math.isfinite(r) and 0 < r <= _RATE_MAX)):
        if r == 0:
            meta.request_rate = None  # "0" is how some tools write "not rate-limited here": not stated
        else:
            raise FormatError(meta.source, f"request_rate {r!r} is out of range: a request rate is above 0 and at "
                              "most 1e9 req/s, or inf", "request_rate")
    for name in ("concurrency", "num_gpus"):
        v = getattr(meta, name)
        if v is not None and not (isinstance(v, int) and 1 <= v <= _RATE_MAX):
            raise FormatError(meta.source, f"{name} {v!r} is out of range: a whole number from 1 to 1e9", name)


def _read(path: str | Path, format: str | None, aggregate_samples: bool = False) -> list[Run]:
    if format in (None, "kvledger-records"):
        path = _records_of_out_folder(path)
    if format in (None, "kvledger-records") and is_parquet(path):  # kvledger simulate --out's records.parquet
        return read_parquet(path)
    from kvledger.evidence.llmservingsim import looks_like_llmservingsim, read_llmservingsim
    from kvledger.evidence.vllm_fast import read_fast

    if format is None and looks_like_llmservingsim(path):  # its requests.jsonl, or the run folder holding it
        return [read_llmservingsim(path)]

    fast = read_fast(path, format=format)  # a large clean vLLM --save-detailed file: columns, not objects
    if fast is not None:
        return fast
    doc = load_document(path)
    fmt = format or detect_format(doc)
    _check_forced(doc, fmt, format)
    if fmt == "aiperf-jsonl" and doc.kind == "json" and isinstance(doc.value, dict):
        doc = Document(doc.path, "jsonl", [doc.value], [1])
    if fmt == "guidellm" and doc.kind == "yaml" and isinstance(doc.value, dict):  # its benchmarks.yaml: the same report
        doc = Document(doc.path, "json", doc.value)
    _check_shape(doc, fmt)
    runs = guidellm.read(doc, aggregate_samples=True) if aggregate_samples and fmt == "guidellm" else READERS[fmt](doc)
    if not runs:
        raise FormatError(doc.path, f"read as {fmt} but holds no run")
    for run in runs:
        if isinstance(run, RunRecords) and not len(run.records):
            raise FormatError(doc.path, f"read as {fmt} but holds no requests")
    return runs


#: the two bench_serving clients, whose result keys tell them apart (``detect.detect_dict``): a file of one read as
#: the other would be read under another client's definitions (SGLang's mean in-flight "concurrency", its E2E keys)
_BENCH_CLIENTS = {"vllm-bench-serve": "vLLM's `vllm bench serve` (date, endpoint_type, model_id, *_e2el_ms keys)",
                  "sglang-bench-serving": "SGLang's bench_serving (total_output_tokens_retokenized, *_e2e_latency_ms "
                                          "keys, server_info)"}


def _check_forced(doc: Document, fmt: str, given: str | None) -> None:
    """Refuse a --format of one bench_serving client for a file the other wrote (``_BENCH_CLIENTS``).

    Raises:
        FormatError: naming the client whose keys the file holds and the --format to give (or none).
    """
    if given not in _BENCH_CLIENTS:
        return
    try:
        seen = detect_format(doc)
    except FormatError:  # keys of neither: the forced reader says what it misses
        return
    if seen in _BENCH_CLIENTS and seen != given:
        raise FormatError(doc.path, f"--format {given} reads {_BENCH_CLIENTS[given].split(' (')[0]} results, but this "
                                    f"file holds the keys of {_BENCH_CLIENTS[seen]}: read as the other client's, its "
                                    f"figures would be misread; give --format {seen}, or leave --format out (the "
                                    "format is detected)")


def _records_of_out_folder(path: str | Path) -> str | Path:
    """A ``kvledger simulate --out`` folder's records.parquet; any other path as given (its errors come later)."""
    try:
        if Path(path).is_dir() and (Path(path) / "records.parquet").is_file():
            return Path(path) / "records.parquet"
    except OSError:  # a name the file system refuses (too long): load_document names it
        pass
    return path


def read_run(path: str | Path, *, format: str | None = None) -> Run:
    """The single run of a one-run file (see :func:`read_runs` for arguments and errors).

    Raises:
        FormatError: the file holds several runs (use ``read_runs``), or any ``read_runs`` error.
    """
    runs = read_runs(path, format=format)
    if len(runs) != 1:
        labels = ", ".join(str(r.metadata.extra.get("run_label", i)) for i, r in enumerate(runs))
        raise FormatError(str(path), f"holds {len(runs)} runs ({labels}); use read_runs() to get all of them")
    return runs[0]


def _check_shape(doc: Document, fmt: str) -> None:
    want = _SHAPES.get(fmt, ("json",))
    have = doc.kind
    if have == "json":
        have = "json-list" if isinstance(doc.value, list) else ("json" if isinstance(doc.value,
                                                                                     dict) else "json-scalar")
    if have not in want:
        raise FormatError(doc.path, f"is {_describe(have)} but format {fmt!r} needs "
                                    f"{' or '.join(_describe(w) for w in want)}")


def _describe(kind: str) -> str:
    return {"json": "a JSON object", "json-list": "a JSON list", "json-scalar": "a bare JSON value",
            "jsonl": "JSON Lines", "csv": "a CSV table", "yaml": "YAML", "text": "plain text (not JSON, JSON Lines or "
                "CSV)"}[kind]
