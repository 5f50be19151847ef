"""The trace layouts kvledger reads (columns or keys each needs, ``trace_formats``'s table) and their detection."""

from __future__ import annotations

from pathlib import Path

from kvledger.dynamics.workload.burstgpt import BURSTGPT_COLUMNS
from kvledger.errors import FormatError
from kvledger.outputs import LOG_RECORD

__all__ = ["CSV_LAYOUTS", "JSONL_LAYOUTS", "JSONL_TIME_S", "OPENAI_TIME_WORDS", "detect_layout", "openai_time_column"]

CSV_LAYOUTS: dict[str, tuple[str, ...]] = {
    "azure": ("TIMESTAMP", "ContextTokens", "GeneratedTokens"),
    "vidur": ("arrived_at", "num_prefill_tokens", "num_decode_tokens"),
    "kvledger": ("arrival_s", "num_prompt_tokens", "num_output_tokens"),
    "burstgpt": BURSTGPT_COLUMNS,
    "vidur-lengths": ("num_prefill_tokens", "num_decode_tokens"),
    # a user's own request log with each response's OpenAI usage counts (the usage object's prompt_tokens,
    # completion_tokens) and, where kept, the response's `created` (Unix seconds, the Chat Completion object's name)
    "openai": ("created", "prompt_tokens", "completion_tokens"),
    "openai-lengths": ("prompt_tokens", "completion_tokens"),
}
#: column names a user's request log may hold its times under, which the openai layouts do not read
OPENAI_TIME_WORDS = ("timestamp", "time", "created_at", "arrival", "arrival_time", "arrival_s", "ts", "date",
                     "datetime", "request_time", "start_time")
JSONL_LAYOUTS: dict[str, tuple[str, ...]] = {
    "mooncake": ("timestamp", "input_length", "output_length"),
    "kvledger": ("arrival_s", "num_prompt_tokens", "num_output_tokens"),
    # LLMServingSim's workloads/*.jsonl (arrival in ns) and a bench run's requests.jsonl (queued on the engine's
    # clock, s: the arrival its own validate.py takes); casys-kaist/LLMServingSim bench/core/runner.py
    "llmservingsim": ("arrival_time_ns", "input_toks", "output_toks"),
    "llmservingsim-run": ("queued_ts", "input_toks", "output_toks"),
}
#: seconds per unit of a JSONL layout's arrival time (others: seconds)
JSONL_TIME_S = {"mooncake": 1e-3, "llmservingsim": 1e-9}


def detect_layout(keys: set[str], layouts: dict[str, tuple[str, ...]], path: Path, what: str) -> str:
    """The first layout whose columns/keys ``keys`` all hold (``layouts``: name → the names it needs).

    Raises:
        FormatError: none holds; the message lists them, and names padded column names ("a, b") when those are why.
    """
    for name, needed in layouts.items():
        if all(k in keys for k in needed):
            return name
    accepted = "; ".join(f"{n}: {', '.join(c)}" for n, c in layouts.items())
    if record := next((k for k in sorted(keys) if LOG_RECORD.search(k)), None):  # "… INFO 04-22 01:38:34 [x.py:1]"
        raise FormatError(str(path), "a server log, not a request trace (its first line is a log record: "
                          f"{record.strip()[:80]!r}): `kvledger doctor FILE` reads a vLLM server log; a trace gives "
                          f"each request's arrival and token counts, accepted layouts: {accepted}", "line 1")
    padded = any(all(k in {x.strip() for x in keys} for k in c) for c in layouts.values())  # "a, b": names " b"
    raise FormatError(str(path), f"unrecognised {what} layout (found {', '.join(sorted(keys)) or 'nothing'}); "
                      + ("its column names carry spaces around them (a header written 'arrival_s, num_prompt_tokens'"
                         "): write the names without, 'arrival_s,num_prompt_tokens'; " if padded else "")
                      + f"accepted layouts: {accepted}", "line 1")


def openai_time_column(fields: list[str], path: Path) -> None:
    """Refuse an openai-lengths CSV that holds its times under another name (``timestamp``, …): read as lengths only,
    its times would be replaced by --rate's Poisson arrivals without a word.

    Raises:
        FormatError: names the column and the two ways on.
    """
    other = next((f for f in fields if f.strip().lower() in OPENAI_TIME_WORDS), None)
    if other is not None:
        raise FormatError(str(path), f"column {other!r} is not read: a CSV of OpenAI usage columns (prompt_tokens, "
                          "completion_tokens) takes each request's arrival from a 'created' column, in Unix seconds "
                          "as OpenAI's responses give it; rename the column to 'created' (its values as seconds), or "
                          "drop it and give a rate (--rate R req/s, Poisson arrivals with --seed S)", "line 1")
