"""Start-up failures in a vLLM log: out-of-memory, no room for the KV cache, worker and engine-core init errors, NCCL.

Each signal is a line vLLM (or PyTorch, NCCL, Python) prints when the server did not start; the root cause is the
first exception line (``AssertionError: …``, ``ValueError: …``) after the first traceback, which the later
"EngineCore failed to start" / "Engine core initialization failed" lines only wrap.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kvledger.evidence.vllm_log.lines import segments
from kvledger.jsonable import to_jsonable

__all__ = ["StartupFailure", "FAILURE_KINDS", "VLLM_FAILURES", "SERVING_READY", "failure_on_line", "profile_frame",
           "cause_in_lines", "graph_capture_frame"]

_NEG_GIB = r"-\s?(\d{1,15}(?:\.\d{1,15})?)\s*GiB"
# (kind, pattern), most specific first: a line takes the first kind that matches
_SIGNALS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("negative_kv_memory", re.compile(r"Available KV cache memory: " + _NEG_GIB)),
    ("no_kv_memory", re.compile(r"No available memory for the cache blocks")),
    ("max_model_len_too_large", re.compile(r"larger than the maximum number of tokens that can be stored in KV cache|"
                                           r"KV cache is needed, which is larger than the available KV cache memory")),
    # V1 worker's start-up check (0.19/0.33 v1/worker/gpu_worker.py; 0.11 gpu_worker.Worker.init_device): "Free memory
    # on device cuda:0 (70.12/79.19 GiB) on startup is less than desired GPU memory utilization (0.95, 75.23 GiB)"
    ("free_memory_below_request", re.compile(r"Free memory on device[^(]{0,40}\(([\d.]{1,12})/([\d.]{1,12}) GiB\) on "
                                             r"startup is less than desired GPU memory utilization \(([\d.]{1,12}), "
                                             r"([\d.]{1,12}) GiB\)")),
    ("cuda_oom", re.compile(r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory")),
    ("not_divisible", re.compile(r"\b(\d+) is not divisible by (\d+)")),
    ("dp_rank_out_of_bounds", re.compile(r"local rank \d+ is out of bounds")),
    ("nccl_error", re.compile(r"NCCL error|nccl\w*Error\b|ncclInvalidUsage|ncclSystemError|NCCL_ERROR")),
    ("worker_init_failed", re.compile(r"WorkerProc failed to start|WorkerProc initialization failed|"
                                      r"Worker failed with error")),
    ("engine_core_init_failed", re.compile(r"EngineCore failed to start|Engine core initialization failed|"
                                           r"Engine process failed to start")),
    # V1's engine core died after start-up (v1/engine/core.py "EngineCore encountered a fatal error.", the API
    # server's vllm.v1.engine.exceptions.EngineDeadError, and v1/engine/async_llm.py's per-request "Request R failed
    # (engine dead)."): each is printed only by an engine that had started
    ("engine_dead", re.compile(r"EngineDeadError|EngineCore encountered a fatal error|failed \(engine dead\)")),
    ("traceback", re.compile(r"Traceback \(most recent call last\)")),
)
FAILURE_KINDS = tuple(k for k, _ in _SIGNALS)
# the kinds only vLLM prints (a log holding one is a vLLM log even when no start-up figure was read)
VLLM_FAILURES = frozenset({"negative_kv_memory", "no_kv_memory", "max_model_len_too_large", "dp_rank_out_of_bounds",
                           "free_memory_below_request",
                           "worker_init_failed", "engine_core_init_failed", "engine_dead"})
# Lines that show the server up and serving (the start-up is over): vLLM's API server announces itself only after the
# engine is built (entrypoints/openai/api_server.py "Starting vLLM API server"), then uvicorn's own ready lines.
SERVING_READY = re.compile(r"Starting vLLM API server|Application startup complete|Uvicorn running on")
# The frames of vLLM's profile run, which sizes the KV cache after loading the weights: one forward pass of
# max_num_batched_tokens tokens spread over up to max_num_seqs sequences, then a sampler step for those sequences
# (V1 gpu_worker.determine_available_memory → gpu_model_runner.profile_run → _dummy_run, _dummy_sampler_run; V0
# worker.determine_num_available_blocks → model_runner.profile_run). _dummy_run also runs after the KV cache is
# allocated, to warm up and capture CUDA graphs (compile_or_warm_up_model, capture_model): not the profile run then.
_PROFILE_FRAMES = re.compile(r"\b(determine_available_memory|determine_num_available_blocks|profile_run|"
                             r"_dummy_sampler_run|_dummy_run)\b")
_AFTER_PROFILE = re.compile(r"\b(?:compile_or_warm_up_model|capture_model)\b")
# CUDA-graph capture, after the KV cache is allocated (V1 gpu_model_runner.capture_model → _capture_cudagraphs; V0
# model_runner.capture_model): its memory is what the KV cache left
_GRAPH_CAPTURE = re.compile(r"\b(capture_model|_capture_cudagraphs)\b")
_ANY = re.compile("|".join(f"(?:{p.pattern})" for _, p in _SIGNALS))
_EXCEPTION = re.compile(r"^\s*((?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception|Interrupt)|Exception|AssertionError)"
                        r"(?::\s*(.*))?$")


@dataclass(frozen=True)
class StartupFailure:
    """One line that says the server failed (or is failing) to start.

    Attributes:
        kind: one of FAILURE_KINDS. line_no: 1-based line. text: the message (header stripped, at most 300
        characters). value_bytes: the negative "Available KV cache memory", B (else None).
    """

    __json__ = ("kind", ("line", "line_no"), "text", "value_bytes")
    kind: str
    line_no: int
    text: str
    value_bytes: float | None = None

    def to_dict(self) -> dict[str, object]:
        return to_jsonable(self)


def clip(text: str, limit: int = 500) -> str:
    """``text`` whole up to ``limit`` characters, else cut at the last space before it and marked " …" (a CUDA
    out-of-memory message runs to about 400 characters: cut at 300 mid-word, "… and 1.12 GiB i" hid what it was)."""
    if len(text) <= limit:
        return text
    cut = text[:limit]
    return (cut[:cut.rfind(" ")] if " " in cut else cut).rstrip() + " …"


def failure_on_line(line_no: int, raw: str) -> StartupFailure | None:
    """The failure signal on one physical line, or None."""
    if _ANY.search(raw) is None:  # most lines: one scan, no segmenting
        return None
    for seg in segments(line_no, raw):
        for kind, pat in _SIGNALS:
            m = pat.search(seg.message)
            if m is None:
                continue
            value = float(m.group(1)) * 2**30 if kind == "negative_kv_memory" else None
            return StartupFailure(kind, line_no, clip(seg.message.strip()), -abs(value) if value is not None else None)
    return None


def cause_in_lines(lines: list[str], first_traceback_line: int, first: int = 1) -> tuple[int, str] | None:
    """(line, "ExceptionType: message") of the first exception line in the 400 after line ``first_traceback_line``,
    on a start-up's lines (``lines[0]`` is line ``first``; the file's numbers in and out)."""
    start = first_traceback_line + 1 - first  # the index of the line after the traceback's
    for i in range(start, min(len(lines), start + 400)):
        for seg in segments(i + first, lines[i]):
            m = _EXCEPTION.match(seg.message.strip())
            if m and not seg.message.startswith(" "):
                return i + first, clip(seg.message.strip())
    return None


def _traceback(lines: list[str], first_traceback_line: int, cause_line: int, first: int) -> list[str]:
    """The lines from ``first_traceback_line`` to ``cause_line``, both kept (``lines[0]`` is line ``first``)."""
    return lines[first_traceback_line - first:cause_line - first + 1]


def profile_frame(lines: list[str], first_traceback_line: int, cause_line: int,
                  first: int = 1) -> tuple[int, str] | None:
    """(line, function) of the first frame of vLLM's profile run in the traceback from ``first_traceback_line`` to its
    exception line ``cause_line`` (``lines[0]`` is line ``first``); None when no frame is one, or a frame shows the
    warm-up or CUDA-graph capture."""
    found = None
    for n, raw in enumerate(_traceback(lines, first_traceback_line, cause_line, first), start=first_traceback_line):
        if _AFTER_PROFILE.search(raw):
            return None
        if found is None and (m := _PROFILE_FRAMES.search(raw)) is not None:
            found = (n, m.group(1))
    return found


def graph_capture_frame(lines: list[str], first_traceback_line: int, cause_line: int,
                        first: int = 1) -> tuple[int, str] | None:
    """(line, function) of the first CUDA-graph capture frame in the traceback from ``first_traceback_line`` to its
    exception line ``cause_line`` (``lines[0]`` is line ``first``), else None."""
    for n, raw in enumerate(_traceback(lines, first_traceback_line, cause_line, first), start=first_traceback_line):
        if (m := _GRAPH_CAPTURE.search(raw)) is not None:
            return n, m.group(1)
    return None
