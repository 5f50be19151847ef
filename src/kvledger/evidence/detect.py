"""Benchmark-format detection by key signature (docs/formats.md §7), and the table of known formats.

Detection looks only at structure, never at file names, so renamed files still read.
Order matters where signatures overlap: kvledger's own records first, then the more
specific tool signatures (``total_output_tokens_retokenized`` before the generic
vLLM ``request_throughput``; AIPerf's ``schema_version`` before GenAI-Perf's bare metric
table). An unknown file raises a one-paragraph FormatError: the top-level keys it saw, what to give instead when
it is a file that sits beside a run, and where the known formats are listed.
"""

from __future__ import annotations

import json
from typing import Any

from kvledger.errors import FormatError
from kvledger.evidence._arrays import has_details
from kvledger.evidence._io import Document, looks_like_log, top_keys
from kvledger.evidence.kvledger_records import looks_like_records
from kvledger.evidence.llmperf import is_summary_collection
from kvledger.evidence.prometheus_text import SCRAPE_ADVICE, scrape_summary
from kvledger.evidence.together_runner import looks_like_together_runner

__all__ = ["FORMAT_DESCRIPTIONS", "detect_format", "describe_content", "unknown_format_message"]

#: format name → what it is (shown in help and in "unknown format" errors).
FORMAT_DESCRIPTIONS: dict[str, str] = {
    "vllm-bench-serve": "vllm bench serve --save-result JSON (aggregate, --save-detailed, --append-result lines; "
                        "vllm bench sweep summary.json lists)",
    "sglang-bench-serving": "SGLang bench_serving --output-file JSONL (with or without --output-details)",
    "aiperf-jsonl": "AIPerf profile_export.jsonl (per request; early and current layouts)",
    "aiperf-json": "AIPerf profile_export_aiperf.json (aggregate; early 'records' and current layouts)",
    "aiperf-csv": "AIPerf/GenAI-Perf profile_export_*.csv (aggregate tables)",
    "genai-perf-raw": "GenAI-Perf/perf_analyzer profile_export.json (experiments with ns timestamps)",
    "genai-perf-json": "GenAI-Perf profile_export_genai_perf.json (aggregate)",
    "guidellm": "GuideLLM benchmarks.json (metadata.version 2 and the older layout)",
    "llmperf-individual": "llmperf *_individual_responses.json (per request)",
    "llmperf-summary": "llmperf *_summary.json (aggregate; llmperf-bench's *_results.json of them by concurrency, "
                       "a sweep)",
    "inference-perf-lifecycle": "inference-perf summary_/stage_N_lifecycle_metrics.json (aggregate)",
    "inference-perf-per-request": "inference-perf per_request_lifecycle_metrics.json",
    "inferencex-together-runner": "InferenceX together_runner conc<N>.json (one concurrency level, aggregate; "
                                  "several files with validate --sweep)",
    "kvledger-records": "kvledger records: records.parquet from kvledger simulate --out, or RunRecords JSON "
                        "(kvledger.evidence.write_records)",
}


def _is_metric_entry(v: Any) -> bool:
    return isinstance(v, dict) and "unit" in v and ("avg" in v or "p50" in v)


def detect_dict(d: dict[str, Any]) -> str | None:
    if looks_like_records(d):
        return "kvledger-records"
    if looks_like_together_runner(d):
        return "inferencex-together-runner"
    if isinstance(d.get("metadata"), dict) and ("metrics" in d or "error" in d) and not isinstance(d.get("records"),
        list):
        return "aiperf-jsonl"  # a one-line profile_export.jsonl parses as a single JSON object
    if isinstance(d.get("records"), dict) and any(_is_metric_entry(v) for v in d["records"].values()):
        return "aiperf-json"
    if isinstance(d.get("experiments"), list):
        return "genai-perf-raw"
    if isinstance(d.get("benchmarks"), list):
        return "guidellm"
    if isinstance(d.get("load_summary"), dict) or (isinstance(d.get("successes"), dict) and "failures" in d):
        succ = d.get("successes") if isinstance(d.get("successes"), dict) else {}
        if "latency" not in succ and "request_latency" in succ:
            return "inference-perf-prometheus"
        return "inference-perf-lifecycle"
    if "results_ttft_s_mean" in d or any(k.startswith("results_ttft_s_") for k in d) or is_summary_collection(d):
        return "llmperf-summary"  # one summary, or llmperf-bench's collection of them keyed by concurrency
    details = d.get("details") if isinstance(d.get("details"), dict) else {}
    if "total_output_tokens_retokenized" in d or "mean_e2e_latency_ms" in d or has_details(details):
        return "sglang-bench-serving"
    if "request_throughput" in d and ("duration" in d or "completed" in d or has_details(d)):
        return "vllm-bench-serve"
    if "request_goodput:" in d:
        return "vllm-bench-serve"
    metric_keys = [k for k, v in d.items() if _is_metric_entry(v)]
    if metric_keys:
        return (
            "aiperf-json"
            if ("schema_version" in d or "aiperf_version" in d or "benchmark_duration" in d)
            else "genai-perf-json"
        )
    return None


def _detect_list(items: list[Any]) -> str | None:
    first = next((x for x in items if isinstance(x, dict)), None)
    if first is None:
        return None
    if "ttft_s" in first or "end_to_end_latency_s" in first:
        return "llmperf-individual"
    if "start_time" in first and "end_time" in first and "info" in first:
        return "inference-perf-per-request"
    # a JSON list of bench results: `vllm bench sweep`'s summary.json (one object per serve × bench combination)
    return detect_dict(first) if detect_dict(first) in ("sglang-bench-serving", "vllm-bench-serve") else None


def _detect_lines(values: list[Any]) -> str | None:
    first = values[0] if values else None
    if not isinstance(first, dict):
        return None
    if isinstance(first.get("metadata"), dict) and ("metrics" in first or "error" in first):
        return "aiperf-jsonl"
    return detect_dict(first) if detect_dict(first) in ("sglang-bench-serving", "vllm-bench-serve") else None


def detect_format(doc: Document) -> str:
    """The format name of a loaded document.

    Raises:
        FormatError: no signature matches (the message: :func:`unknown_format_message`).
    """
    if doc.kind == "csv":
        first = doc.value.lstrip().split(",", 1)[0].strip().lower()
        if first == "metric":
            return "aiperf-csv"
        fmt = None
    elif doc.kind == "yaml" and isinstance(doc.value, dict) and detect_dict(doc.value) == "guidellm":
        fmt = "guidellm"  # GuideLLM --output-path benchmarks.yaml: the same report (benchmark/output.py save_yaml)
    elif doc.kind in ("yaml", "text"):
        fmt = None
    elif doc.kind == "jsonl":
        fmt = _detect_lines(doc.value)
    elif isinstance(doc.value, dict):
        fmt = detect_dict(doc.value)
    elif isinstance(doc.value, list):
        if not doc.value:
            raise FormatError(doc.path, "the file holds an empty list: no requests and no aggregates to read")
        fmt = _detect_list(doc.value)
    else:
        fmt = None
    if fmt == "inference-perf-prometheus":
        raise FormatError(doc.path, "this is an inference-perf Prometheus report (server-side histograms scraped from "
                                    "the engine), "
                          "not a lifecycle report; read the matching *_lifecycle_metrics.json (client-side, per stage) "
                          "instead")
    if fmt is None and isinstance(doc.value, dict) and looks_like_simulate_document(doc.value):
        raise FormatError(doc.path, simulate_document_message(doc.path))
    if fmt is None:
        raise FormatError(doc.path, unknown_format_message(doc))
    return fmt


def looks_like_simulate_document(d: dict[str, Any]) -> bool:
    """Whether ``d`` is ``kvledger simulate``'s own document (``--json``, and ``summary.json`` under ``--out``): the
    run's summary beside the engine, workload and step cost it ran with (``sim_report.simulate_document``)."""
    return all(isinstance(d.get(k), dict) for k in ("summary", "engine", "workload")) and "step_cost" in d


def simulate_document_message(path: Any) -> str:
    """Why ``kvledger simulate``'s own document at ``path`` is not read as a run: it holds the run's summary (means and
    percentiles), not each request's times, which goodput and cost count against the SLO; and what to give instead."""
    from pathlib import Path

    beside = Path(path).with_name("records.parquet")
    instead = (f"give the records.parquet --out wrote beside it ({beside})" if beside.is_file() else
               "run `kvledger simulate ... --out DIR` and give DIR/records.parquet (every request)")
    return (f"this is kvledger simulate's own output (its --json document, or summary.json under --out): it holds the "
            f"run's summary figures (means and percentiles), not each request's latencies, which goodput and cost "
            f"count against the SLO; {instead}, or let goodput run the simulation itself "
            "(`kvledger goodput --simulate MODEL --gpu GPU ...`)")


def unknown_format_message(doc: Document) -> str:
    """One paragraph: what the file was seen to be, what to give instead when it is a file that sits beside a run
    (``evidence.sidecars.sidecar_hint``), the tools the formats come from and where their names are listed (the
    layouts are in docs/formats.md, which an installed wheel lacks, so the message does not cite it)."""
    from kvledger.evidence.sidecars import sidecar_hint

    hint = sidecar_hint(doc.path, doc.value)
    tools = dict.fromkeys(t for name, d in FORMAT_DESCRIPTIONS.items() if name != "kvledger-records"
                          for t in d.split()[0].split("/"))
    return (f"unknown benchmark output format. {describe_content(doc)}. " + (f"{hint}. " if hint else "")
            + f"kvledger reads {len(FORMAT_DESCRIPTIONS)} formats (from {', '.join(tools)}, its own records and "
              "LLMServingSim's requests.jsonl): `kvledger goodput --help` names them (goodput and "
              "cost force one with --format NAME).")


def describe_content(doc: Document) -> str:
    """What the file was seen to be, for "unknown format" messages: its keys, CSV header, or first line of text."""
    if doc.kind == "csv":
        return f"Keys seen: {doc.value.splitlines()[0][:80]}"
    if doc.kind == "text":
        first = next((ln.strip() for ln in doc.value.splitlines() if ln.strip()), "")
        if looks_like_log(doc.value):  # "INFO 04-22 00:03:46 [v1/engine/core.py:105] ..."
            return (f"It is a server log, not a benchmark output (a vLLM log is read by `kvledger doctor LOGFILE`); "
                    f"first "
                    f"line: {first[:80]!r}")
        scrape = scrape_summary(doc.value)
        if scrape:
            return f"It is {scrape}, not a benchmark output: {SCRAPE_ADVICE}"
        kind = "Markdown" if first.startswith("#") or "](" in doc.value else "plain text"
        return f"It is {kind}, not JSON, JSON Lines or CSV; first line: {first[:80]!r}"
    if doc.kind == "yaml":
        # an inference-perf client config (config.yaml, profile.yaml) is named by sidecars.sidecar_hint
        return f"It is YAML, not JSON, JSON Lines or CSV; keys seen: {', '.join(map(str, top_keys(doc.value)))}"
    value = doc.value[0] if doc.kind == "jsonl" and doc.value else doc.value
    if value in ({}, []):
        return f"It is an empty JSON {'object' if value == {} else 'list'} ({json.dumps(value)}): no keys at all"
    return f"Keys seen: {', '.join(map(str, top_keys(value)))}"
