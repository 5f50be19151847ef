"""A Prometheus ``/metrics`` scrape handed in place of a benchmark output or a server log.

vLLM's OpenAI server exports its counters, gauges and histograms at ``/metrics`` in the Prometheus text exposition
format: ``# HELP name …`` and ``# TYPE name counter|gauge|histogram|summary`` comment lines, then one sample per line,
``name{label="value",…} number`` (vllm/v1/metrics/loggers.py, PrometheusStatLogger, names every series ``vllm:…``).
A scrape is the server's totals since it started, at one moment: no request rate, no duration, no per-request times, so
neither goodput/validate/calibrate (which judge a benchmark client's run) nor doctor (which reads the server's log)
can take it as their input: they refuse it by name and say what to give instead. ``kvledger doctor FILE`` reads a
scrape saved to a file (``vllm_scrape.py``, with ``samples`` here).
"""

from __future__ import annotations

import re

__all__ = ["scrape_summary", "samples", "SCRAPE_ADVICE"]

# a sample line: metric name (letters, digits, '_' and ':'), optional {labels}, a value, an optional timestamp
_SAMPLE = re.compile(r"^[A-Za-z_:][A-Za-z0-9_:]*(\{[^}]*\})?\s+[-+]?(?:[0-9.]+(?:[eE][-+]?\d+)?|NaN|Inf)(\s+-?\d+)?$")
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')
_COMMENT = re.compile(r"^#\s+(HELP|TYPE)\s+[A-Za-z_:][A-Za-z0-9_:]*(\s|$)")
_FAMILY = re.compile(r"_(bucket|count|sum|created)$")
_LINES = 200  # the first lines, read to decide

SCRAPE_ADVICE = ("its counters and histograms are the server's totals since it started, with no request rate, "
                 "duration or per-request times: give goodput, validate and calibrate the benchmark client's result "
                 "(`vllm bench serve --save-result`, with --save-detailed for each request's times), and doctor the "
                 "server's log (`kubectl logs POD | kvledger doctor -`), whose metrics lines carry the same "
                 "preemptions, KV usage and prefix-cache hits over time; `kvledger doctor FILE` reads the scrape "
                 "itself saved to a file (its preemption count, KV pool and usage now)")


def scrape_summary(text: str) -> str | None:
    """'a Prometheus /metrics scrape (…)' when at least 90 % of the first 200 non-empty lines (of the first 50,000
    characters: a large JSON Lines file is not split whole) are exposition-format comments or samples and at least one
    is a sample, and a TYPE/HELP comment, a {label} or a vllm: name says it is Prometheus's, else None."""
    lines = [ln.strip() for ln in text[:50_000].splitlines()[:5 * _LINES] if ln.strip()][:_LINES]
    samples = [ln for ln in lines if _SAMPLE.match(ln)]
    comments = sum(1 for ln in lines if _COMMENT.match(ln))
    if not samples or len(samples) + comments < 0.9 * len(lines):
        return None
    if not comments and not any("{" in ln or ln.startswith("vllm:") for ln in samples):
        return None  # bare "name value" lines and nothing of Prometheus's own (# TYPE, {labels}, vllm:): a plain table
    # a histogram's samples are NAME_bucket, NAME_count and NAME_sum (and NAME_created): one metric
    names = list(dict.fromkeys(_FAMILY.sub("", re.split(r"[{\s]", ln, maxsplit=1)[0]) for ln in samples))
    vllm = [n for n in names if n.startswith("vllm:")]
    which = (f"{len(vllm):,} vLLM metrics, e.g. {', '.join(vllm[:2])}" if vllm
             else f"{len(names):,} metrics, none of them vLLM's (vllm:…)")
    return f"a Prometheus /metrics scrape (text exposition format; {which})"


def samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    """Every sample line of a scrape as (metric name, labels, value), in file order; comments and lines that are not
    exposition-format samples are skipped (the same line pattern ``scrape_summary`` counts)."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not _SAMPLE.match(line):
            continue
        head, _, tail = line.rpartition("}") if "{" in line else ("", "", line)
        name = re.split(r"[{\s]", line, maxsplit=1)[0]
        value = (tail if head else line[len(name):]).split()[0]
        labels = dict(_LABEL.findall(head)) if head else {}
        out.append((name, labels, float(value)))
    return out
